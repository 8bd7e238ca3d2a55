# SPDX-License-Identifier: Apache-2.0
"""
Issue 39: hostile chat generator replies in every LLM role, 10,000 runs per role (tests/pipelines/
test_hostile_replies.py runs a few hundred in CI). Each run draws the results of the role's generator
(tests/hostile_replies.py: deep JSON, huge integers, NaN/inf, wrong types at every level, bad `meta.usage`, reply
items of the wrong type, nameless tool calls, megabyte texts, regex worst cases, special tokens; the small or the
issue's full sizes, half each), the evidence check on or off, and the entry point (the loop pipeline's `run` or
`run_async`, or `AgenticRAG(raise_on_failure=False)`), and counts how the run ended, whether an exception left `run`,
and the CPU seconds it took. The slowest runs of each role are kept, described (`describe`) and, with `--rerun`, run
again to tell a slow shape from a busy machine.

    python benchmarks/hostile_replies.py [--runs 10000] [--roles controller-tools,answer] [--slowest 3] [--rerun 3]

Prints a Markdown table (docs/robustness.md has the last one), then each role's slowest runs.
"""

import argparse
import collections
import gc
import heapq
import itertools
import logging
import math
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")
ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from hostile_replies import ENTRY_POINTS, ROLES, TERMINATIONS, hostile_results, run_hostile  # noqa: E402
from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


def describe(value, depth: int = 0) -> str:
    """A short text for a drawn value: long texts as their start and length, deep values as their depth."""
    from haystack.dataclasses import ChatMessage, ToolCall

    if isinstance(value, str):
        return repr(value) if len(value) <= 40 else f"{value[:24]!r}...({len(value):,} chars)"
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return f"<int of {len(str(abs(value))) if value.bit_length() < 14_000 else '4,000+'} digits>"
    if isinstance(value, (list, tuple, dict)):
        if depth >= 6:
            nested, inner = 0, value
            while isinstance(inner, (list, dict)) and inner and nested < 200_000:
                inner = next(iter(inner.values())) if isinstance(inner, dict) else inner[0]
                nested += 1
            return f"<nested {nested:,} more levels>"
        if isinstance(value, dict):
            return (
                "{" + ", ".join(f"{describe(k, depth + 1)}: {describe(v, depth + 1)}" for k, v in value.items()) + "}"
            )
        return "[" + ", ".join(describe(item, depth + 1) for item in value) + "]"
    if isinstance(value, ChatMessage):
        parts = [
            describe(part.text, depth + 1) if hasattr(part, "text") else describe(part, depth + 1)
            for part in value._content
        ]
        return f"msg({', '.join(parts)}; meta={describe(value._meta, depth + 1)})"
    if isinstance(value, ToolCall):
        name, arguments, call_id = (describe(part, depth + 1) for part in (value.tool_name, value.arguments, value.id))
        return f"call({name}, {arguments}, id={call_id})"
    return repr(value)


class GarbageCollections:
    """CPU seconds spent in Python's garbage collector, and full (generation 2) collections, since the process
    started: a full collection walks every object alive, hypothesis's own included, so it is counted apart."""

    def __init__(self) -> None:
        self.seconds, self.full, self._started = 0.0, 0, 0.0
        gc.callbacks.append(self._callback)

    def _callback(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._started = time.process_time()
        else:
            self.seconds += time.process_time() - self._started
            self.full += info["generation"] == 2


GC = GarbageCollections()


class TimeUp(BaseException):
    """Raised in a run to stop a role at its time limit (a `BaseException`: hypothesis does not replay it)."""


def run_role(role: str, runs: int, slowest: int = 3, seconds: float = math.inf) -> dict:
    """Up to `runs` runs in `role` (fewer when `seconds` of wall time pass, or on Ctrl-C): how they ended, what
    escaped, each run's CPU seconds, the `slowest` runs' draws."""
    deadline = time.perf_counter() + seconds
    ended: collections.Counter = collections.Counter()
    escaped: collections.Counter = collections.Counter()
    cpu: list[float] = []
    kept: list = []  # a heap of the slowest (seconds, n, draw)
    without_gc: list[float] = []  # each run's CPU seconds outside the garbage collector
    full_collections: list[int] = []
    counter = itertools.count()

    @settings(
        max_examples=runs,
        phases=[Phase.generate],
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(
        results=st.one_of(hostile_results("small"), hostile_results("big")),
        evidence=st.booleans(),
        through=st.sampled_from(ENTRY_POINTS),
    )
    def one(results, evidence, through):
        if time.perf_counter() > deadline:
            raise TimeUp
        started, gc_started, full_started = time.process_time(), GC.seconds, GC.full
        try:
            result = run_hostile(role, results, evidence, through)
            ended[result["terminated_by"] if result["terminated_by"] in TERMINATIONS else "undocumented"] += 1
        except Exception as exc:
            escaped[type(exc).__name__] += 1
        seconds = time.process_time() - started
        cpu.append(seconds)
        collected = (GC.seconds - gc_started, GC.full - full_started)
        without_gc.append(seconds - collected[0])
        full_collections.append(collected[1])
        heapq.heappush(kept, (seconds, next(counter), (results, evidence, through, collected)))
        if len(kept) > slowest:
            heapq.heappop(kept)
        if len(cpu) % 500 == 0:
            print(f"{role}: {len(cpu)} runs", file=sys.stderr, flush=True)

    try:
        one()
    except (TimeUp, KeyboardInterrupt):
        print(f"{role}: stopped after {len(cpu)} runs", file=sys.stderr, flush=True)
    cpu.sort()
    return {
        "ended": ended,
        "escaped": escaped,
        "cpu": cpu,
        "slowest": sorted(kept, reverse=True),
        "without_gc": max(without_gc, default=math.nan),
        "full_collections": sum(full_collections),
        "gc_seconds": sum(cpu) - sum(without_gc),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10_000, help="runs per role (default 10,000)")
    parser.add_argument("--roles", default=",".join(ROLES), help=f"comma-separated, of {', '.join(ROLES)}")
    parser.add_argument("--seconds", type=float, default=math.inf, help="stop a role after this much wall time")
    parser.add_argument("--slowest", type=int, default=3, help="slowest runs kept and described per role")
    parser.add_argument("--rerun", type=int, default=0, help="times each kept run is run again (CPU s printed)")
    args = parser.parse_args()
    logging.disable(logging.WARNING)  # the loop logs every bad reply: thousands of lines
    header = (
        "| Role | Runs | answered | gave_up | max_iterations | error | other ending | escaped `run` "
        "| CPU s median | p99 | max | wall s |"
    )
    print(header)
    print("|---|" + "---:|" * 11)
    slow = {}
    for role in args.roles.split(","):
        started = time.perf_counter()
        out = run_role(role, args.runs, args.slowest, args.seconds)
        slow[role] = out
        wall = time.perf_counter() - started
        ended, cpu = out["ended"], out["cpu"] or [math.nan]
        escaped = sum(out["escaped"].values())
        escaped_text = f"{escaped} ({', '.join(f'{k} {v}' for k, v in out['escaped'].items())})" if escaped else "0"
        row = [
            role,
            len(out["cpu"]),
            *(ended[t] for t in ("answered", "gave_up", "max_iterations", "error")),
            ended["undocumented"],
            escaped_text,
            f"{cpu[len(cpu) // 2]:.3f}",
            f"{cpu[min(len(cpu) - 1, int(len(cpu) * 0.99))]:.3f}",
            f"{cpu[-1]:.2f}",
            f"{wall:.0f}",
        ]
        print("| " + " | ".join(str(cell) for cell in row) + " |", flush=True)
    for role, out in slow.items():
        print(
            f"garbage collector, {role}: {out['gc_seconds']:.1f} s of the runs' {sum(out['cpu']):.1f} s CPU, "
            f"{out['full_collections']} full collections; slowest run without its collections "
            f"{out['without_gc']:.2f} s"
        )
    for role, out in slow.items():
        for seconds, _, (results, evidence, through, (gc_seconds, full)) in out["slowest"]:
            again = []
            for _ in range(args.rerun):
                started = time.process_time()
                try:
                    run_hostile(role, results, evidence, through)
                except Exception:  # noqa: S110 - counted in the table already
                    pass
                again.append(f"{time.process_time() - started:.2f}")
            rerun = f" (again: {', '.join(again)} s)" if again else ""
            print(
                f"slowest {role}: {seconds:.2f} s CPU ({gc_seconds:.2f} s in the garbage collector, {full} full "
                f"collections){rerun}, evidence={evidence}, through={through}: "
                f"{describe(results)}",
                flush=True,
            )


if __name__ == "__main__":
    main()
