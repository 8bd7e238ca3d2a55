# SPDX-License-Identifier: Apache-2.0
"""
All-gold recall of the bridge-entity search policy, per question type and per half of the questions.

Every paragraph of every `--data` file goes into ONE `InMemoryDocumentStore` per file (`--pool`: one store for all
files together); each question then runs through `BridgeEntityPolicy.collect` (the procedure the router follows in
the loop: one search per turn, chunks merged by id, sorted by BM25 score, capped at the budget) with an
`InMemoryBM25Retriever`. A question counts when ALL its gold paragraphs are among the final chunks (HotpotQA: the
titles in `supporting_facts`; MuSiQue: `context[i]` for `i` in `supporting_paragraph_idx`).

Also reported: the share of follow-up searches that return a gold paragraph not found before ("useful follow-ups"),
searches per question, and CPU milliseconds per follow-up decision (the policy alone, no retrieval). Questions are
split into halves A/B by a hash of their id: weights were calibrated on half A; B is held out.

`--corpus FILE` adds a file's paragraphs to every store without asking its questions: a HotpotQA/MuSiQue file's
`context`, or a grounding file's (HaluEval) `context` strings, each one untitled Document (`meta.source` =
the row's `source`), so `--pool --corpus grounding_sample.jsonl` pools EVERY shared data set.

Run: `python benchmarks/bridge_recall.py --data examples/data/hotpotqa_dev_sample.jsonl --budget 6`
"""

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from haystack import Document
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.document_stores.in_memory import InMemoryDocumentStore

from benchmarks.harness.gold import gold_document_ids
from haystack_agentic.indexing.hotpotqa import hotpotqa_documents, load_hotpotqa_questions
from haystack_agentic.policies.bridge_entities import BridgeEntityPolicy

#: The policy's defaults are the router's; each other variant turns one rule off or changes the budget (the history
#: of the rules and their figures is in docs/benchmarks.md).
VARIANTS: dict[str, dict] = {
    "one search": {"first_top_k": 6, "max_follow_ups": 0},
    "default (scored + mentions + stop when covered + named first + generic pages last)": {},
    "without generic pages last": {"generic_share": None},
    "without named first": {"scan_named_first": False},
    "without stop when covered": {"stop_when_covered": False},
    "without mentions": {"mentions": False},
    "scan 3": {"scan_top_chunks": 3},
    "3 + 3 x 1": {"first_top_k": 3, "max_follow_ups": 3},
}


def corpus_documents(path: str) -> list[Document]:
    """
    The paragraphs of a `--corpus` file: HotpotQA/MuSiQue rows' `context` (titled), or grounding rows' `context`
    string (untitled, deduplicated by text; the HaluEval knowledge has no title).
    """
    rows = [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]
    if rows and isinstance(rows[0].get("context"), list):
        return hotpotqa_documents(load_hotpotqa_questions(path), title_in_content=True)
    texts = dict.fromkeys(t.strip() for r in rows if isinstance(t := r.get("context"), str) and t.strip())
    source = rows[0].get("source", Path(path).stem) if rows else Path(path).stem
    return [
        Document(id=hashlib.sha256(json.dumps([source, t]).encode()).hexdigest(), content=t, meta={"source": source})
        for t in texts
    ]


def half(row: dict) -> str:
    """`A` (calibration) or `B` (held out), from a hash of the question id."""
    return "AB"[int(hashlib.sha256(row["id"].encode()).hexdigest(), 16) % 2]


def evaluate(policy: BridgeEntityPolicy, rows: list[dict], retrieve, budget: int) -> dict:
    """Run every question; return all-gold hits per group, useful follow-ups, searches and decision CPU time."""
    groups: dict[str, list[int]] = {}
    useful = follow_ups = searches = 0
    decision_cpu: list[float] = []
    for row in rows:
        log: list[list] = []

        def logged(query, top_k, filters, log=log):
            found = retrieve(query, top_k, filters)
            log.append(found)
            return found

        original = policy.next_searches

        def timed(*args, original=original, **kwargs):
            start = time.process_time()
            out = original(*args, **kwargs)
            decision_cpu.append(time.process_time() - start)
            return out

        policy.next_searches = timed
        try:
            chunks, queries = policy.collect(row["question"], logged, chunk_cap=budget)
        finally:
            del policy.next_searches
        gold = set(gold_document_ids(row))
        seen = {d.id for d in log[0]} if log else set()
        for found in log[1:]:
            follow_ups += 1
            useful += any(d.id in gold and d.id not in seen for d in found)
            seen |= {d.id for d in found}
        searches += len(queries)
        hit = int(gold <= {c.id for c in chunks})
        for key in ("all", f"half {half(row)}", f"type {row.get('type')}"):
            groups.setdefault(key, []).append(hit)
    return {
        "recall": {k: (100 * sum(v) / len(v), len(v)) for k, v in groups.items()},
        "useful_follow_ups": 100 * useful / follow_ups if follow_ups else None,
        "follow_ups": follow_ups,
        "searches_mean": searches / len(rows),
        "decision_ms_mean": 1000 * sum(decision_cpu) / len(decision_cpu) if decision_cpu else 0.0,
        "decision_ms_max": 1000 * max(decision_cpu, default=0.0),
    }


def main() -> None:
    """Parse arguments, index the corpus, run every policy variant and print one line per variant and dataset."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", action="append", required=True, help="HotpotQA or MuSiQue JSONL file (repeatable)")
    parser.add_argument("--budget", type=int, default=6, help="chunk budget (final chunks kept), default 6")
    parser.add_argument("--limit", type=int, default=None, help="only the first N questions of each file")
    parser.add_argument("--pool", action="store_true", help="one store pooling every file's paragraphs")
    parser.add_argument(
        "--corpus",
        action="append",
        default=[],
        help="extra paragraphs for every store, questions not asked (HotpotQA/MuSiQue/grounding JSONL)",
    )
    parser.add_argument("--only", default=None, help="only variants whose name contains this text")
    parser.add_argument("--json", default=None, help="also write the figures to this JSON file")
    args = parser.parse_args()

    datasets = [(Path(p).stem, load_hotpotqa_questions(p)) for p in args.data]
    extra = [d for path in args.corpus for d in corpus_documents(path)]
    pooled = [d for _, rows in datasets for d in hotpotqa_documents(rows, title_in_content=True)] if args.pool else None
    if pooled is not None:
        pooled += extra
    figures: dict = {}
    for name, rows in datasets:
        documents = pooled if pooled is not None else hotpotqa_documents(rows, title_in_content=True) + extra
        store = InMemoryDocumentStore()
        store.write_documents(documents)
        retriever = InMemoryBM25Retriever(store)
        cache: dict[str, list] = {}

        def retrieve(query: str, top_k: int, filters: dict | None, cache=cache, retriever=retriever) -> list:
            key = json.dumps([query, top_k, filters])
            if key not in cache:
                cache[key] = retriever.run(query=query, top_k=top_k, filters=filters)["documents"]
            return cache[key]

        questions = rows[: args.limit] if args.limit else rows
        print(
            f"\n{name}: {len(questions)} questions, {store.count_documents()} documents"
            f"{' (pooled)' if pooled is not None else ''}, budget {args.budget} chunks"
        )
        for variant, kwargs in VARIANTS.items():
            if args.only and args.only not in variant:
                continue
            policy = BridgeEntityPolicy.from_documents(documents, **kwargs)
            result = evaluate(policy, questions, retrieve, args.budget)
            figures[f"{name} / {variant}"] = result
            cells = " ".join(f"{k}: {v:.1f}% ({n})" for k, (v, n) in sorted(result["recall"].items()))
            useful = "-" if result["useful_follow_ups"] is None else f"{result['useful_follow_ups']:.0f}%"
            print(
                f"  {variant:<40} {cells} | useful follow-ups {useful} of {result['follow_ups']} | "
                f"searches {result['searches_mean']:.2f} | decision {result['decision_ms_mean']:.2f} ms "
                f"(max {result['decision_ms_max']:.1f})"
            )
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
