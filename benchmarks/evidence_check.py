# SPDX-License-Identifier: Apache-2.0
"""
Calibrate and measure the evidence check (`EvidenceChecker`) on an unanswerable split of HotpotQA and MuSiQue.

Every question runs through the offline default loop (bridge-entity policy, in-memory BM25, 6 chunks; no answer
LLM, which the check does not depend on) twice over the pooled store of all paragraphs: as it is, and with its
gold paragraphs removed (see `benchmarks/harness/unanswerable.py`).

- `calibrate`: on the CALIBRATION questions only (the first half of the HotpotQA sample), run with a checker that
  never refuses (threshold 0) and record the features of the chunks each run ends with; fit the logistic weights
  (all features, and lexical only) and choose each threshold as the highest one that still accepts
  `TARGET_ANSWER_RATE` of the normal runs whose gold paragraphs were all found. Prints the constants for
  `haystack_agentic/evidence/scoring.py`.
- `report`: with the packaged checker (calibrated constants, and the lexical-only variant), report on the
  HELD-OUT half of HotpotQA and on all of MuSiQue (never used for calibration): abstention rate on unanswerable
  questions, answer rate on normal questions whose evidence was found, the precision/recall curve of the score,
  AUC, and ms per check.

Run:
    python benchmarks/evidence_check.py calibrate
    python benchmarks/evidence_check.py report [--limit N] [--json out.json]
    python benchmarks/evidence_check.py speed        # ms per check: wall and CPU time, 60 checks of 6 chunks
    python benchmarks/evidence_check.py casing       # the same questions typed without capitals
"""

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.harness.calibration import choose_threshold, fit_logistic
from benchmarks.harness.runner import bridge_entity_config, build_store
from benchmarks.harness.unanswerable import run_abstention_eval
from haystack_agentic.components.evidence.evidence_checker import EvidenceChecker
from haystack_agentic.evidence.scoring import LEXICAL_MODEL, OFFLINE_MODEL, TARGET_ANSWER_RATE
from haystack_agentic.indexing.hotpotqa import load_hotpotqa_questions

REPO = Path(__file__).resolve().parents[1]
DEFAULT_HOTPOTQA = REPO / "examples" / "data" / "hotpotqa_dev_sample.jsonl"  # the same file as shared/data's


def _shared_data(name: str) -> Path:
    """A file of the project's shared/data folder: beside the checkout (CI) or at /work/shared (developers)."""
    for folder in (*[p / "shared" / "data" for p in REPO.parents], Path("/work/shared/data")):
        if (folder / name).exists():
            return folder / name
    return Path("/work/shared/data") / name


DEFAULT_MUSIQUE = _shared_data("musique_dev_sample.jsonl")


def split_hotpotqa(rows: list[dict]) -> tuple[list[dict], list[dict]]:
    """The calibration half (first) and the held-out half (second) of the HotpotQA sample."""
    half = len(rows) // 2
    return rows[:half], rows[half:]


def calibrate(hotpotqa: Path) -> dict:
    rows = load_hotpotqa_questions(hotpotqa)
    calibration, _ = split_hotpotqa(rows)
    store = build_store(rows)  # the pooled store of ALL questions: the same corpus the report uses
    checker = EvidenceChecker(threshold=0.0)  # never refuses: the features of the chunks each run ends with
    config = bridge_entity_config(store, 6, None, evidence_checker=checker)
    started = time.perf_counter()
    report = run_abstention_eval(calibration, store, [config])
    records = report["configs"]["bridge-entity"]["questions"]
    positives = [r for r in records if r["condition"] == "normal" and r["all_gold_found"]]
    negatives = [r for r in records if r["condition"] == "unanswerable"]
    out = {"questions": len(calibration), "positives": len(positives), "negatives": len(negatives), "models": {}}
    for base in (OFFLINE_MODEL, LEXICAL_MODEL):
        names = list(base.weights)
        rows_x = [[r["evidence_features"][n] for n in names] for r in positives + negatives]
        labels = [1] * len(positives) + [0] * len(negatives)
        model = fit_logistic(rows_x, labels, names, name=base.name)
        threshold = choose_threshold([model.score(r["evidence_features"]) for r in positives], TARGET_ANSWER_RATE)
        neg_scores = [model.score(r["evidence_features"]) for r in negatives]
        out["models"][base.name] = {
            "weights": dict(model.weights),
            "bias": model.bias,
            "threshold": threshold,
            "calibration_abstention": sum(s < threshold for s in neg_scores) / len(neg_scores),
        }
    out["seconds"] = time.perf_counter() - started
    return out


def report(hotpotqa: Path, musique: Path, limit: int | None) -> dict:
    sets = {}
    rows = load_hotpotqa_questions(hotpotqa)
    _, held_out = split_hotpotqa(rows)
    sets["hotpotqa (held-out half)"] = (rows, held_out)
    if musique.exists():
        m_rows = load_hotpotqa_questions(musique)
        sets["musique (all)"] = (m_rows, m_rows)
    else:
        print(f"MuSiQue left out: {musique} does not exist (pass --musique PATH).")
    out = {}
    for name, (pool, every_question) in sets.items():
        questions = every_question[:limit] if limit else every_question
        store = build_store(pool)
        configs = [
            bridge_entity_config(store, 6, None, evidence_checker=EvidenceChecker()),
            bridge_entity_config(store, 6, None, evidence_checker=EvidenceChecker(embedding_model=None)),
        ]
        configs[1].name = "bridge-entity (lexical check)"
        started = time.perf_counter()
        result = run_abstention_eval(questions, store, configs)
        out[name] = {
            config: {k: v for k, v in entry["summary"].items() if k != "pr_curve_full"}
            for config, entry in result["configs"].items()
        }
        out[name]["seconds"] = time.perf_counter() - started
        print_summary(name, out[name])
    return out


def print_summary(name: str, summaries: dict) -> None:
    for config, s in summaries.items():
        if config == "seconds":
            continue
        print(f"\n{name} / {config}: threshold {s['threshold']}")
        print(
            f"  abstention on unanswerable: {s['abstention_rate']:.1%} of {s['unanswerable']};  "
            f"answer rate, evidence found: {s['answer_rate_evidence_found']:.1%} of {s['evidence_found']};  "
            f"answer rate, all normal: {s['answer_rate_normal']:.1%} of {s['normal']}"
        )
        print(
            f"  AUC {s['auc']:.3f}, average precision {s['average_precision']:.3f}; "
            f"{s['ms_per_check_mean']:.1f} ms per check (median {s['ms_per_check_median']:.1f}, {s['checks']} checks); "
            f"searched again {s['searched_again_mean']:.2f} per run"
        )
        print("  threshold  precision  recall(answer rate)  abstention")
        for p in s["pr_curve"]:
            print(f"  {p['threshold']:9.3f}  {p['precision']:9.3f}  {p['recall']:19.3f}  {p['abstention']:10.3f}")


def speed(hotpotqa: Path, checks: int = 60) -> dict:
    """Wall and CPU (process) time of one offline check of 6 new chunks, with and without the embedding model."""
    from haystack import Document

    rows = load_hotpotqa_questions(hotpotqa)[:checks]
    out = {}
    for name, checker in (("offline (MiniLM)", EvidenceChecker()), ("lexical", EvidenceChecker(embedding_model=None))):
        checker.warm_up()
        checker.check("warm-up question", [Document(content="warm-up chunk")])
        wall, cpu = [], []
        for row in rows:
            chunks = [Document(content=f"{t}\n{''.join(s)}") for t, s in row["context"][:6]]
            w0, c0 = time.perf_counter(), time.process_time()
            checker.check(row["question"], chunks)
            wall.append(time.perf_counter() - w0)
            cpu.append(time.process_time() - c0)
        out[name] = {
            "checks": len(rows),
            "wall_ms_median": 1000 * sorted(wall)[len(wall) // 2],
            "cpu_ms_median": 1000 * sorted(cpu)[len(cpu) // 2],
        }
        print(
            f"{name}: {out[name]['wall_ms_median']:.1f} ms wall, {out[name]['cpu_ms_median']:.1f} ms CPU per check "
            f"(median of {len(rows)}; 6 new chunks each, so no cached embedding)"
        )
    return out


def casing(hotpotqa: Path, musique: Path, limit: int | None) -> dict:
    """
    Does a question typed without capitals get the same verdict? Per question (no loop, no store): its gold
    paragraphs as the chunks (should pass) and its first 6 distractors (should be refused; distractors are chosen
    to look like the answer), for the question as written and lower-cased.
    """
    from haystack import Document

    out: dict = {}
    for name, path in (("HotpotQA", hotpotqa), ("MuSiQue", musique)):
        rows = load_hotpotqa_questions(path)[:limit]
        for label, checker in (
            ("offline (MiniLM)", EvidenceChecker()),
            ("lexical", EvidenceChecker(embedding_model=None)),
        ):
            checker.warm_up()
            counts = {"gold passed": [0, 0], "distractors refused": [0, 0]}
            for row in rows:
                gold = {title for title, _ in row["supporting_facts"]}
                docs = [Document(content=f"{t}\n{''.join(s)}", meta={"title": t}) for t, s in row["context"]]
                chunk_sets = {
                    "gold passed": [d for d in docs if d.meta["title"] in gold],
                    "distractors refused": [d for d in docs if d.meta["title"] not in gold][:6],
                }
                for kind, chunks in chunk_sets.items():
                    for i, question in enumerate((row["question"], row["question"].lower())):
                        sufficient = checker.check(question, chunks)["sufficient"]
                        counts[kind][i] += sufficient if kind == "gold passed" else not sufficient
            figures = {
                kind: {"as written": c[0] / len(rows), "lower-cased": c[1] / len(rows)} for kind, c in counts.items()
            }
            out[f"{name} / {label}"] = {"questions": len(rows), **figures}
            print(
                f"{name} ({len(rows)} q), {label}: "
                + "; ".join(
                    f"{kind} {f['as written']:.1%} as written, {f['lower-cased']:.1%} lower-cased"
                    for kind, f in figures.items()
                )
            )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["calibrate", "report", "speed", "casing"])
    parser.add_argument("--hotpotqa", type=Path, default=DEFAULT_HOTPOTQA)
    parser.add_argument("--musique", type=Path, default=DEFAULT_MUSIQUE)
    parser.add_argument(
        "--limit", type=int, help="report, casing: only the first N questions of each set; speed: N checks (default 60)"
    )
    parser.add_argument("--json", type=Path, help="also write the figures as JSON here")
    args = parser.parse_args()
    if args.command == "calibrate":
        out = calibrate(args.hotpotqa)
        print(json.dumps(out, indent=2))
    elif args.command == "speed":
        out = speed(args.hotpotqa, args.limit or 60)
    elif args.command == "casing":
        out = casing(args.hotpotqa, args.musique, args.limit)
    else:
        out = report(args.hotpotqa, args.musique, args.limit)
    if args.json:
        args.json.write_text(json.dumps(out, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
