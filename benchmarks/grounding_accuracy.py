# SPDX-License-Identifier: Apache-2.0
"""
Balanced accuracy of HHEMGrounder on ../shared/data/grounding_sample.jsonl (HaluEval QA, label 1 = hallucinated),
overall and within response-length bands (hallucinated answers are much longer, so length alone predicts the
label). Needs the REAL HHEM-2.1-Open weights: without them it says so and exits 2.

    python benchmarks/grounding_accuracy.py [--model PATH_OR_ID] [--foundation PATH_OR_ID] [--data FILE] [--limit N]
"""

import argparse
import json
import sys
from pathlib import Path

from haystack import Document

from haystack_agentic import HHEMGrounder, LoopState
from haystack_agentic.components.grounders.hhem_grounder import HHEM_MODEL, HOW_TO_GET

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "grounding_sample.jsonl"
BANDS = ((0, 60), (60, 150), (150, 10**9))


def balanced_accuracy(pairs):
    pos = [p == y for p, y in pairs if y == 1]
    neg = [p == y for p, y in pairs if y == 0]
    rates = [sum(x) / len(x) for x in (pos, neg) if x]
    return sum(rates) / len(rates) if rates else float("nan")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default=HHEM_MODEL)
    parser.add_argument("--foundation")
    parser.add_argument("--data", default=str(DATA))
    parser.add_argument("--limit", type=int)
    args = parser.parse_args()
    grounder = HHEMGrounder(model=args.model, foundation=args.foundation, local_files_only=True)
    grounder.warm_up()
    if grounder.load_error:
        print(f"NO REAL HHEM MODEL: {grounder.load_error}.\nNo accuracy reported. To get it: {HOW_TO_GET}.")
        sys.exit(2)
    rows = [json.loads(line) for line in Path(args.data).read_text(encoding="utf-8").splitlines() if line.strip()]
    rows = rows[: args.limit] if args.limit else rows
    results = []
    for row in rows:
        state = LoopState(question=row["question"], chunks=(Document(id="ctx", content=row["context"]),))
        state = state.finish("answered", answer=row["response"])
        g = grounder.run(state)["state"].outcome.grounding
        predicted = 1 if g is None or g["hallucinated_spans"] else 0
        results.append((predicted, int(row["label"]), len(row["response"])))
    print(f"{len(results)} rows; balanced accuracy {balanced_accuracy([(p, y) for p, y, _ in results]):.3f}")
    for low, high in BANDS:
        band = [(p, y) for p, y, n in results if low <= n < high]
        print(f"  response {low}-{high} chars: n={len(band)} balanced accuracy {balanced_accuracy(band):.3f}")
