# SPDX-License-Identifier: Apache-2.0
"""
Issue 39: hostile chat generator replies in every LLM role, 10,000 runs per role (tests/pipelines/
test_hostile_replies.py runs a few hundred in CI). Each run draws the results of the role's generator
(tests/hostile_replies.py: deep JSON, huge integers, NaN/inf, wrong types at every level, bad `meta.usage`, reply
items of the wrong type, nameless tool calls, megabyte texts, regex worst cases, special tokens; the small or the
issue's full sizes, half each), the evidence check on or off, and the entry point (the loop pipeline's `run` or
`run_async`, or `AgenticRAG(raise_on_failure=False)`), and counts how the run ended, whether an exception left `run`, and the CPU
seconds it took.

    python benchmarks/hostile_replies.py [--runs 10000] [--roles controller-tools,answer]

Prints a Markdown table (docs/robustness.md has the last one).
"""

import argparse
import collections
import logging
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")
ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from hostile_replies import ENTRY_POINTS, ROLES, TERMINATIONS, hostile_results, run_hostile  # noqa: E402


def run_role(role: str, runs: int) -> dict:
    ended: collections.Counter = collections.Counter()
    escaped: collections.Counter = collections.Counter()
    cpu: list[float] = []

    @settings(max_examples=runs, phases=[Phase.generate], deadline=None, database=None,
              suppress_health_check=list(HealthCheck))  # fmt: skip
    @given(
        results=st.one_of(hostile_results("small"), hostile_results("big")),
        evidence=st.booleans(),
        through=st.sampled_from(ENTRY_POINTS),
    )
    def one(results, evidence, through):
        started = time.process_time()
        try:
            result = run_hostile(role, results, evidence, through)
            ended[result["terminated_by"] if result["terminated_by"] in TERMINATIONS else "undocumented"] += 1
        except Exception as exc:  # noqa: BLE001 - counted: the property is that none leaves `run`
            escaped[type(exc).__name__] += 1
        cpu.append(time.process_time() - started)

    one()
    cpu.sort()
    return {"ended": ended, "escaped": escaped, "cpu": cpu}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10_000, help="runs per role (default 10,000)")
    parser.add_argument("--roles", default=",".join(ROLES), help=f"comma-separated, of {', '.join(ROLES)}")
    args = parser.parse_args()
    logging.disable(logging.WARNING)  # the loop logs every bad reply: thousands of lines
    header = ("| Role | Runs | answered | gave_up | max_iterations | error | other ending | escaped `run` "
              "| CPU s median | p99 | max | wall s |")  # fmt: skip
    print(header)
    print("|---|" + "---:|" * 11)
    for role in args.roles.split(","):
        started = time.perf_counter()
        out = run_role(role, args.runs)
        wall = time.perf_counter() - started
        ended, cpu = out["ended"], out["cpu"]
        escaped = sum(out["escaped"].values())
        escaped_text = f"{escaped} ({', '.join(f'{k} {v}' for k, v in out['escaped'].items())})" if escaped else "0"
        row = [role, len(cpu), *(ended[t] for t in ("answered", "gave_up", "max_iterations", "error")),
               ended["undocumented"], escaped_text, f"{cpu[len(cpu) // 2]:.3f}",
               f"{cpu[min(len(cpu) - 1, int(len(cpu) * 0.99))]:.3f}", f"{cpu[-1]:.2f}", f"{wall:.0f}"]  # fmt: skip
        print("| " + " | ".join(str(cell) for cell in row) + " |", flush=True)


if __name__ == "__main__":
    main()
