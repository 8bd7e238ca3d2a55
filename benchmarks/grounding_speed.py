# SPDX-License-Identifier: Apache-2.0
"""
Time HHEMGrounder per answer over sentences x chunks. Uses the TINY random model with HHEM's structure (real
HHEM weights are not downloadable here): the figures measure the grounder's plumbing (splitting, premise
windows, batching), not HHEM-2.1-Open's own speed, which is ~100x the compute per pair (flan-t5-base).

    python benchmarks/grounding_speed.py
"""

import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]  # this checkout's package and the tiny HHEM of the tests

from haystack import Document  # noqa: E402
from tiny_hhem import build_tiny_hhem  # noqa: E402

from haystack_agentic import HHEMGrounder, LoopState  # noqa: E402

SENTENCE = "Adriana Trigiani directed the film Big Stone Gap in New York. "
CHUNK = "Big Stone Gap is a film directed by Adriana Trigiani, an author based in Greenwich Village. " * 3

if __name__ == "__main__":
    checkpoint, _ = build_tiny_hhem(tempfile.mkdtemp())
    grounder = HHEMGrounder(model=str(checkpoint), device="cpu", batch_size=16)
    grounder.warm_up()
    print("TINY random HHEM-structured model (not the real HHEM-2.1-Open); CPU; batch_size 16; attribute=True")
    print(f"{'sentences':>9} {'chunks':>6} {'pairs':>6} {'ms/answer':>10}")
    for sentences in (1, 3, 10):
        for chunks in (1, 5, 20):
            documents = tuple(Document(id=f"c{i}", content=CHUNK + str(i)) for i in range(chunks))
            state = LoopState(question="q", chunks=documents)
            state = state.finish("answered", answer=SENTENCE * sentences)
            grounder.run(state)
            start = time.perf_counter()
            out = grounder.run(state)["state"]
            ms = (time.perf_counter() - start) * 1000
            print(f"{sentences:>9} {chunks:>6} {out.outcome.grounding['pairs_scored']:>6} {ms:>10.1f}")
