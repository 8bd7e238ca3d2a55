# SPDX-License-Identifier: Apache-2.0
"""
Answer F1 of the offline default: SmolLM2-135M's full sentences against their short answer span (issue 14).

    python benchmarks/short_answer.py --data /work/shared/data/hotpotqa_dev_sample.jsonl --limit 200 \
        --out short-answer.jsonl
    python benchmarks/short_answer.py --data /work/shared/data/hotpotqa_dev_sample.jsonl --start 200 \
        --out held-out.jsonl                                           # questions 201-360 only
    python benchmarks/short_answer.py --rescore short-answer.jsonl     # a changed span rule, in seconds

Every question runs once through `eval`'s `bridge-entity` configuration (the offline default's policy and answerer,
SmolLM2-135M, greedy; the store holds every paragraph of the file). The answerer's reply is recorded where it is
written from the chunks, and the same runs are scored twice: the model's sentence as it is, and
`extract_short_answer(question, reply, chunks)`, the rule of the `ShortAnswerExtractor` the packaged pipelines run
after the answerer (a pure function of those three, so this equals running the pipeline with it on). Runs that end
otherwise (the evidence check gives up) keep their answer in both, F1 ~0. F1/EM are HotpotQA's (SQuAD normalisation).
The table splits the questions into blocks of 100 (the rule was written looking at the first 200 questions of the
shared HotpotQA sample; later blocks are held out) and by question type. Each run is one JSON line of `--out`;
`--rescore` reads them back.
"""

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import haystack_agentic.components.extractors.short_answer_extractor as extractor_module
from benchmarks.harness.metrics import best_answer_scores, gold_answers
from benchmarks.harness.runner import bridge_entity_config, build_store, run_eval
from haystack_agentic.components.extractors.short_answer_extractor import (
    ShortAnswer,
    extract_short_answer,
)
from haystack_agentic.components.generators.embedded_chat_generator import EmbeddedChatGenerator
from haystack_agentic.indexing.hotpotqa import load_hotpotqa_questions

DEFAULT_DATA = Path(__file__).resolve().parents[1] / "examples" / "data" / "hotpotqa_dev_sample.jsonl"


def record_runs(data: Path, start: int, limit: int | None, out: Path) -> list[dict]:
    """Run the questions with the answerer's replies recorded (answers left as the model wrote them)."""
    all_rows = load_hotpotqa_questions(data)
    rows = all_rows[start : start + limit] if limit else all_rows[start:]
    replies: dict[str, dict] = {}

    def recording(
        question: str, text: str, chunk_texts: list[str], option_pages: list[str] | None = None
    ) -> ShortAnswer:
        replies[" ".join(question.split())] = {
            "reply": text,
            "chunks": list(chunk_texts),
            "option_pages": None if option_pages is None else list(option_pages),
        }
        return ShortAnswer(text)

    extractor_module.extract_short_answer = recording  # the name the ShortAnswerExtractor calls; restored below
    try:
        config = bridge_entity_config(build_store(all_rows), 6, EmbeddedChatGenerator())
        started = time.process_time()
        report = run_eval(rows, [config])
        cpu = time.process_time() - started
    finally:
        extractor_module.extract_short_answer = extract_short_answer
    runs = []
    with out.open("w", encoding="utf-8") as handle:
        for row, record in zip(rows, report["configs"]["bridge-entity"]["questions"], strict=True):
            answered = record["terminated_by"] == "answered"
            reply = replies.get(" ".join(record["question"].split())) if answered else None
            run = {
                "id": record["id"],
                "question": record["question"],
                "type": record.get("type"),
                "golds": gold_answers(row),
                "terminated_by": record["terminated_by"],
                "answer": record["answer"],
                "reply": reply and reply["reply"],
                "chunks": reply and reply["chunks"],
                "option_pages": reply and reply["option_pages"],
            }
            runs.append(run)
            handle.write(json.dumps(run) + "\n")
    print(f"{len(rows)} questions, {cpu:.0f} s CPU ({cpu / len(rows):.1f} s per question); runs in {out}")
    return runs


def score(runs: list[dict], start: int = 0) -> None:
    """Print F1/EM of the sentences and of their short answer spans, per block of 100 questions and per type."""

    def answers(run: dict) -> tuple[str, str]:
        if run["reply"] is None:
            return run["answer"] or "", run["answer"] or ""
        span = extract_short_answer(run["question"], run["reply"], run["chunks"] or [], run.get("option_pages")).text
        return run["reply"], span

    blocks = [(first, min(first + 100, len(runs))) for first in range(0, len(runs), 100)]
    if len(blocks) > 1:
        blocks.append((0, len(runs)))
    print("| Questions | Sentence EM | Sentence F1 | Span EM | **Span F1** | Span F1 per type | x |")
    print("|---|---|---|---|---|---|---|")
    for first, end in blocks:
        part = runs[first:end]
        sums = [0.0, 0.0, 0.0, 0.0]
        types: dict[str, list[float]] = {}
        for run in part:
            sentence, span = answers(run)
            em_s, f1_s = best_answer_scores(sentence, run["golds"])
            em_a, f1_a = best_answer_scores(span, run["golds"])
            sums = [sums[0] + em_s, sums[1] + f1_s, sums[2] + em_a, sums[3] + f1_a]
            types.setdefault(run["type"] or "-", []).append(f1_a)
        em_s, f1_s, em_a, f1_a = (100 * s / len(part) for s in sums)
        per_type = ", ".join(f"{t} {100 * sum(v) / len(v):.1f}% ({len(v)})" for t, v in sorted(types.items()))
        ratio = f"{f1_a / f1_s:.2f}" if f1_s else "-"
        label = f"{first + start + 1}-{end + start}"
        cells = [label, f"{em_s:.1f}%", f"{f1_s:.1f}%", f"{em_a:.1f}%", f"**{f1_a:.1f}%**", per_type, ratio]
        print("| " + " | ".join(cells) + " |")
    abstained = sum(run["reply"] is None for run in runs)
    print(f"\n{len(runs)} runs; {abstained} ended without an answer from the chunks (counted in both columns).")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="HotpotQA-format JSONL (default: the sample).")
    parser.add_argument("--start", type=int, default=0, help="Skip the first N questions (200: the held-out ones).")
    parser.add_argument("--limit", type=int, help="Only N questions (the store keeps every paragraph).")
    parser.add_argument("--out", type=Path, default=Path("short-answer.jsonl"), help="Where the runs are written.")
    parser.add_argument("--rescore", type=Path, help="Score recorded runs (an earlier --out) instead of running.")
    args = parser.parse_args()
    if args.start < 0 or (args.limit is not None and args.limit < 1):
        parser.error("--start must be >= 0 and --limit >= 1.")
    if args.rescore:
        runs = read_runs(args.rescore, parser)
    else:
        if not args.data.is_file():
            parser.error(f"--data {args.data}: no such file.")
        runs = record_runs(args.data, args.start, args.limit, args.out)
    if not runs:
        parser.error("no runs to score (an empty --rescore file, or --start past the last question).")
    score(runs, args.start)


def read_runs(path: Path, parser: argparse.ArgumentParser) -> list[dict]:
    """The runs of an earlier `--out` file; a clear error for anything else."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        parser.error(f"--rescore {path}: {exc.strerror or exc}.")
    runs = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            run = json.loads(line)
        except json.JSONDecodeError as exc:
            parser.error(f"--rescore {path}, line {number}: not JSON ({exc.msg}); expected a file written by --out.")
        missing = {"question", "golds", "answer", "reply", "chunks"} - set(run if isinstance(run, dict) else ())
        if missing:
            parser.error(f"--rescore {path}, line {number}: no {', '.join(sorted(missing))}; expected a --out file.")
        runs.append(run)
    return runs


if __name__ == "__main__":
    main()
