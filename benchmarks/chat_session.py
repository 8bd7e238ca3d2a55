# SPDX-License-Identifier: Apache-2.0
"""
`haystack-agentic chat` against one `ask` per question: what a person asking several questions waits.

Runs, in fresh processes over the default store (indexed first if missing) with the embedded default:
1. `ask` for each of the first `--questions` HotpotQA sample questions: wall seconds per process;
2. one `chat --json --new-each` session reading the same questions from stdin: the wall seconds between one answer
   line and the next (what a person waits for a further question) against the loop's own `seconds` in each result.

Prints the per-question figures and the ratios: chat's further question / the loop's own time (goal <= 1.2x), and
one `ask` / chat's further question (what loading once saves).

Run: `python benchmarks/chat_session.py --questions 5`
"""

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from haystack_agentic.indexing.hotpotqa import load_hotpotqa_questions

DATA = Path(__file__).resolve().parents[1] / "examples" / "data" / "hotpotqa_dev_sample.jsonl"
CLI = [sys.executable, "-m", "haystack_agentic.cli.main"]


def timed_asks(questions: list[str]) -> list[float]:
    """Wall seconds of one `ask --json --quiet` process per question."""
    seconds = []
    for question in questions:
        start = time.perf_counter()
        subprocess.run([*CLI, "ask", question, "--json", "--quiet"], check=True, capture_output=True)
        seconds.append(time.perf_counter() - start)
    return seconds


def timed_chat(questions: list[str]) -> tuple[float, list[float], list[float]]:
    """
    One `chat` session: (seconds to the first answer, wall seconds between later answers, each result's loop seconds).
    """
    start = time.perf_counter()
    process = subprocess.Popen(
        [*CLI, "chat", "--json", "--quiet", "--new-each"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert process.stdin is not None and process.stdout is not None
    arrivals, loop_seconds, first = [], [], 0.0
    for question in questions:  # one at a time, as a person types them after reading the previous answer
        asked = time.perf_counter()
        process.stdin.write(question + "\n")
        process.stdin.flush()
        result = json.loads(process.stdout.readline())
        arrivals.append(time.perf_counter() - asked)
        loop_seconds.append(result["seconds"])
        first = first or time.perf_counter() - start
    process.stdin.close()
    process.wait(timeout=60)
    return first, arrivals[1:], loop_seconds


def main() -> None:
    """Parse arguments, run both ways and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=5, help="questions asked (default 5, at least 2)")
    args = parser.parse_args()
    if args.questions < 2:
        parser.error("--questions must be at least 2 (the figures are of the questions after chat's first)")
    questions = [row["question"] for row in load_hotpotqa_questions(DATA)[: args.questions]]
    subprocess.run([*CLI, "ask", questions[0], "--json", "--quiet"], check=True, capture_output=True)  # warm: store
    asks = timed_asks(questions)
    first, further, loop_seconds = timed_chat(questions)
    further_loop = loop_seconds[1:]
    print(f"{len(questions)} questions, embedded default, warm store and model files")
    print(
        f"ask, one process per question: median {statistics.median(asks):.2f} s (each: "
        f"{', '.join(f'{s:.2f}' for s in asks)})"
    )
    print(f"chat, first answer: {first:.2f} s (loads the pipeline and models)")
    print(
        f"chat, further questions: median {statistics.median(further):.2f} s wall, loop's own "
        f"{statistics.median(further_loop):.2f} s"
    )
    ratio = sum(further) / sum(further_loop)
    print(
        f"chat further / loop's own time: {ratio:.2f}x (goal <= 1.2x); ask / chat further: "
        f"{statistics.median(asks) / statistics.median(further):.1f}x"
    )


if __name__ == "__main__":
    main()
