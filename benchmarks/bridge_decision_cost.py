# SPDX-License-Identifier: Apache-2.0
"""
CPU time of one bridge-entity decision (`BridgeEntityPolicy.next_searches`) with a title index of 100,000 chunks.

The chunks are the paragraphs of the given QA files, repeated under the same titles until `--chunks` (so every
title has several chunks, as a chunked Wikipedia page would). Each question's first 4 context paragraphs stand
for the first search; the decision is timed without a last follow-up (the first follow-up) and with one (later
turns, where the stop rule reads the last follow-up's chunk). No retrieval is timed.

Run: `python benchmarks/bridge_decision_cost.py --data examples/data/hotpotqa_dev_sample.jsonl --chunks 100000`
"""

import argparse
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from haystack import Document

from haystack_agentic.indexing.hotpotqa import hotpotqa_documents, load_hotpotqa_questions
from haystack_agentic.policies.bridge_entities import BridgeEntityPolicy


def main() -> None:
    """Build the index, time the decisions, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", action="append", required=True, help="HotpotQA or MuSiQue JSONL file (repeatable)")
    parser.add_argument("--chunks", type=int, default=100_000, help="chunks in the index (default 100000)")
    parser.add_argument("--questions", type=int, default=100, help="questions per file (default 100)")
    args = parser.parse_args()
    sets = [load_hotpotqa_questions(p) for p in args.data]
    base = [d for rows in sets for d in hotpotqa_documents(rows, title_in_content=True)]
    docs = list(base)
    while len(docs) < args.chunks:
        d = base[len(docs) % len(base)]
        docs.append(Document(id=f"repeat-{len(docs)}", content=d.content, meta={"title": d.meta["title"]}))
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.process_time()
    policy = BridgeEntityPolicy.from_documents(docs)  # the router's defaults
    build = time.process_time() - start
    grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss) / 1024
    by_title = {d.meta["title"]: d for d in reversed(base)}
    for label, later in (("first follow-up", False), ("later follow-up", True)):
        times = []
        for rows in sets:
            for row in rows[: args.questions]:
                chunks = [by_title[t] for t, _ in row["context"][:4] if t in by_title]
                searched = [row["question"], "an earlier follow-up"] if later else [row["question"]]
                latest = [chunks[-1].id] if later and chunks else []
                start = time.process_time()
                policy.next_searches(row["question"], chunks, searched, latest)
                times.append(time.process_time() - start)
        times.sort()
        ms = [1000 * t for t in times]
        print(
            f"{label}: {len(ms)} decisions, CPU ms mean {sum(ms) / len(ms):.2f}, median {ms[len(ms) // 2]:.2f}, "
            f"p90 {ms[int(0.9 * len(ms))]:.2f}, max {ms[-1]:.2f}"
        )
    print(f"{len(docs)} chunks: index built in {build:.1f} s CPU, +{grown:.0f} MB max RSS")


if __name__ == "__main__":
    main()
