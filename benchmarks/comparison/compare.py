# SPDX-License-Identifier: Apache-2.0
"""
Our loop next to Haystack's `Agent` and LangGraph's agentic-RAG recipe: runs every check of `ours_checks.py`,
`agent_checks.py` and `langgraph_checks.py` (scripted LLMs, no network, no key; the same in-memory BM25 over the
shipped HotpotQA paragraphs for all three) and prints one line per check: the README table's aspect, the system,
the check (its name says what it shows), whether it held, and its seconds.

    .venv/bin/python benchmarks/comparison/compare.py            # every system
    .venv/bin/python benchmarks/comparison/compare.py ours agent  # some of them

LangGraph needs the `compare` extra (`pip install "haystack-agentic[compare]"`); without it its column says so.
Exit status 1 when a check failed (a cell of the README table no longer holds).
"""

import importlib
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the check modules and comparison_support
ROOT = Path(__file__).resolve().parents[2]
sys.path[1:1] = [str(ROOT), str(ROOT / "tests")]  # this checkout's package and the scripted LLM of the checks

from comparison_support import ASPECTS  # noqa: E402

#: System key -> (its name in the table, the module of its checks).
SYSTEMS = {
    "ours": ("Ours", "ours_checks"),
    "agent": ("Haystack Agent", "agent_checks"),
    "langgraph": ("LangGraph recipe", "langgraph_checks"),
}

#: Packages only the `compare` extra installs: a system that needs a missing one is reported as not run.
OPTIONAL = ("langgraph", "langchain_core")


def run_checks(module_name: str) -> list[tuple[str, str, str, float]]:
    """
    Every check of a module: `(aspect, check name, outcome, seconds)`; outcome `held`, `FAILED: ...` or `ERROR: ...`.
    """
    module = importlib.import_module(module_name)
    rows = []
    for aspect, check in module.CHECKS:
        started = time.perf_counter()
        try:
            check()
            outcome = "held"
        except AssertionError as exc:
            where = traceback.extract_tb(exc.__traceback__)[-1]
            outcome = f"FAILED at line {where.lineno} ({where.line}) {exc}".strip()
        except Exception as exc:
            outcome = f"ERROR: {type(exc).__name__}: {exc}"
        rows.append((aspect, check.__name__, outcome, time.perf_counter() - started))
    return rows


def main(argv: list[str]) -> int:
    wanted = argv or list(SYSTEMS)
    unknown = [key for key in wanted if key not in SYSTEMS]
    if unknown:
        print(f"unknown system(s) {unknown}: choose from {', '.join(SYSTEMS)}", file=sys.stderr)
        return 2
    rows = []
    for key in wanted:
        system, module_name = SYSTEMS[key]
        try:
            checks = run_checks(module_name)
        except ModuleNotFoundError as exc:  # langgraph without the `compare` extra; anything else is a bug
            if (exc.name or "").split(".")[0] not in OPTIONAL:
                raise
            rows.append(("-", system, f"not run: {exc.name} is not installed (the `compare` extra)", "", None))
            continue
        rows += [(aspect, system, outcome, name, seconds) for aspect, name, outcome, seconds in checks]
    rows.sort(key=lambda row: ASPECTS.index(row[0]) if row[0] in ASPECTS else -1)
    widths = [max(len(str(row[i])) for row in [("aspect", "system", "outcome"), *rows]) for i in range(3)]
    print(f"{'aspect':<{widths[0]}}  {'system':<{widths[1]}}  {'outcome':<{widths[2]}}  {'s':>6}  check")
    for aspect, system, outcome, name, seconds in rows:
        shown = f"{seconds:6.2f}" if seconds is not None else " " * 6
        print(f"{aspect:<{widths[0]}}  {system:<{widths[1]}}  {outcome:<{widths[2]}}  {shown}  {name}")
    ran = [row for row in rows if row[4] is not None]
    held = sum(row[2] == "held" for row in ran)
    print(f"\n{held} of {len(ran)} checks held")
    return 0 if held == len(ran) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
