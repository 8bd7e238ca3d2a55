# SPDX-License-Identifier: Apache-2.0
"""
Both-gold recall of the bridge-entity search policy against one BM25 search, on HotpotQA/MuSiQue.

All paragraphs of all questions go into ONE `InMemoryDocumentStore`; every question is then run
through `BridgeEntityPolicy.collect` (the exact procedure the policy does in the loop: one search
per turn, chunks merged by id, sorted by BM25 score, capped at the budget) with an
`InMemoryBM25Retriever`. A question counts when ALL its gold paragraphs are among the final
chunks (HotpotQA: the titles in `supporting_facts`; MuSiQue: `context[i]` for `i` in
`supporting_paragraph_idx`).

Run: `python benchmarks/bridge_recall.py --data examples/data/hotpotqa_dev_sample.jsonl --budget 6`
"""

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from haystack.components.retrievers.in_memory import InMemoryBM25Retriever  # noqa: E402
from haystack.document_stores.in_memory import InMemoryDocumentStore  # noqa: E402

from haystack_agentic.policies.bridge_entities import BridgeEntityPolicy  # noqa: E402
from haystack_agentic.datasets.hotpotqa import gold_document_ids, hotpotqa_documents, load_hotpotqa_questions  # noqa: E402


def variants(budget: int) -> dict[str, dict]:
    """The policies to compare: name -> `BridgeEntityPolicy` keyword arguments."""
    out: dict[str, dict] = {
        f"baseline: one search, top_k={budget}": {"first_top_k": budget, "max_follow_ups": 0},
    }
    # Fixed slots: first search budget-f chunks, then f follow-ups of 1 chunk, BM25 scores kept,
    # so nothing is ever evicted.
    for follow in (2, 3):
        tag = f"fixed {budget - follow}+{follow}x1"
        base = {"first_top_k": budget - follow, "max_follow_ups": follow, "scan_top_chunks": 2}
        out[f"{tag} scan2"] = base
        out[f"{tag} scan2 qtitles filter"] = {**base, "question_titles": True, "title_filter": True}
    # Adaptive slots: the first search fills the budget; rank scores let follow-ups evict its tail.
    for follow in (2, 3):
        tag = f"rank {budget}+{follow}x1"
        base = {"first_top_k": budget, "max_follow_ups": follow, "score_mode": "rank", "scan_top_chunks": 2}
        out[f"{tag} scan2"] = base
        out[f"{tag} scan2 follow-up top_k=2"] = {**base, "follow_up_top_k": 2}
        out[f"{tag} scan2 title+question"] = {**base, "query_mode": "title_question"}
        out[f"{tag} scan2 capitalised_fallback"] = {**base, "capitalised_fallback": True}
        out[f"{tag} scan2 qtitles"] = {**base, "question_titles": True}
        best = {**base, "question_titles": True, "title_filter": True}
        out[f"{tag} scan2 qtitles filter"] = best
        for scan in (1, 3):
            out[f"{tag} scan{scan} qtitles filter"] = {**best, "scan_top_chunks": scan}
        out[f"{tag} scan2 qtitles filter position"] = {**best, "candidate_order": "position"}
        out[f"{tag} scan2 qtitles filter all_words"] = {**best, "question_exclusion": "all_words"}
        out[f"{tag} scan2 qtitles filter comma_alias"] = {**best, "comma_alias": True}
        out[f"{tag} scan2 qtitles filter title+question"] = {**best, "query_mode": "title_question"}
    return out


def main() -> None:
    """Parse arguments, index the corpus, run every policy variant and print the table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="HotpotQA or MuSiQue JSONL file")
    parser.add_argument("--budget", type=int, default=6, help="chunk budget (final chunks kept), default 6")
    parser.add_argument("--limit", type=int, default=None, help="only the first N questions")
    parser.add_argument(
        "--content",
        choices=("title+text", "text"),
        default="title+text",
        help="document content: title line + paragraph (default) or the paragraph only",
    )
    parser.add_argument("--only", default=None, help="only variants whose name contains this text")
    args = parser.parse_args()

    rows = load_hotpotqa_questions(args.data)
    # all paragraphs of all questions, one store
    documents = hotpotqa_documents(rows, title_in_content=args.content == "title+text")
    store = InMemoryDocumentStore()
    store.write_documents(documents)
    retriever = InMemoryBM25Retriever(store)
    questions = rows[: args.limit] if args.limit else rows
    print(
        f"{args.data}: {len(questions)} questions, {len(documents)} documents, budget {args.budget} chunks, "
        f"content {args.content}\n"
    )

    cache: dict[str, list] = {}

    def retrieve(query: str, top_k: int, filters: dict | None) -> list:
        key = json.dumps([query, top_k, filters])
        if key not in cache:
            cache[key] = retriever.run(query=query, top_k=top_k, filters=filters)["documents"]
        return cache[key]

    header = f"{'policy':<48} {'both-gold recall':>16} {'mean searches':>14} {'max':>4} {'s/question':>10}"
    print(header)
    print("-" * len(header))
    for name, kwargs in variants(args.budget).items():
        if args.only and args.only not in name:
            continue
        policy = BridgeEntityPolicy.from_documents(documents, **kwargs)
        hits, searches, started = 0, [], time.perf_counter()
        for row in questions:
            chunks, queries = policy.collect(row["question"], retrieve, chunk_cap=args.budget)
            found = {c.id for c in chunks}
            hits += all(g in found for g in gold_document_ids(row))
            searches.append(len(queries))
        elapsed = (time.perf_counter() - started) / len(questions)
        print(
            f"{name:<48} {100 * hits / len(questions):>15.1f}% {statistics.mean(searches):>14.2f} "
            f"{max(searches):>4} {elapsed:>10.3f}"
        )


if __name__ == "__main__":
    main()
