# SPDX-License-Identifier: Apache-2.0
"""
Benchmarks cannot rot (issue 41): every runnable script in `benchmarks/` runs here as a subprocess at its smallest
setting, and must exit 0 within its timeout and print the header and figure lines it exists to print.

`test_every_benchmark_has_a_smoke_run` (a unit test) fails when a script with a `__main__` is added to `benchmarks/`
without a case here or a reason in `NOT_RUN`. A script that needs what a machine may lack says so and is skipped
with its own message (`grounding_accuracy.py`: the real HHEM weights).
"""

import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"
SAMPLE = ROOT / "examples" / "data" / "hotpotqa_dev_sample.jsonl"

#: Runnable scripts the smoke test does not run, with why.
NOT_RUN = {
    "real_llm.py": "has its own smoke test (tests of the real-LLM benchmark)",
    "answer_replay.py": "has its own smoke test (tests of the real-LLM benchmark)",
    "plain_rag.py": "the baseline `ask_startup.py` runs and times (its answer is printed there)",
}

NUMBER = r"[-+]?\d[\d,]*(?:\.\d+)?"


@dataclass(frozen=True)
class Case:
    """One benchmark run: the script (relative to `benchmarks/`), its arguments, its timeout, the lines it prints."""

    script: str
    args: tuple[str, ...]
    timeout: float
    #: Regular expressions that must each match a line of stdout (searched with re.MULTILINE).
    prints: tuple[str, ...]


CASES = {
    "adoption": Case(
        "adoption.py",
        ("--trials", "1", "--venv", "{venv}"),
        240,
        (
            r"^wheel, no extras: reused virtualenv$",
            r"^  pip check: ",
            rf"^  import time \(s\)\s+{NUMBER}\s+{NUMBER}\s+{NUMBER}x",
            rf"^  first answer, process start to print \(s\)\s+{NUMBER}\s+{NUMBER}\s+{NUMBER}x",
            r"^  lines of user code\s+\d+\s+\d+$",
        ),
    ),
    "ask_startup": Case(
        "ask_startup.py",
        ("--trials", "1"),
        300,
        (
            r"^warm-up ask printed:",
            r"^warm-up plain script printed: '.+'",
            rf"^ +ask: wall median {NUMBER} s",
            rf"^ plain: wall median {NUMBER} s",
            rf"^ask / plain script: wall {NUMBER}x \(goal <= 1\.0x\): (met|NOT met)",
        ),
    ),
    "bridge_decision_cost": Case(
        "bridge_decision_cost.py",
        ("--data", str(SAMPLE), "--chunks", "500", "--questions", "3"),
        120,
        (
            rf"^first follow-up: 3 decisions, CPU ms mean {NUMBER}, median {NUMBER}",
            rf"^later follow-up: \d+ decisions, CPU ms mean {NUMBER}",
            rf"^{NUMBER} chunks: index built in {NUMBER} s CPU",
        ),
    ),
    "bridge_recall": Case(
        "bridge_recall.py",
        ("--data", str(SAMPLE), "--limit", "4"),
        120,
        (
            r"^hotpotqa_dev_sample: 4 questions, \d+ documents, budget 6 chunks",
            rf"^  one search +all: {NUMBER}% \(4\)",
            rf"^  default .* all: {NUMBER}% \(4\) .*\| searches {NUMBER}",
        ),
    ),
    "chat_session": Case(
        "chat_session.py",
        ("--questions", "2"),
        300,
        (
            rf"^ask, one process per question: median {NUMBER} s",
            rf"^chat, first answer: {NUMBER} s",
            rf"^chat, further questions: median {NUMBER} s wall",
            rf"^chat further / loop's own time: {NUMBER}x",
        ),
    ),
    "citations_oracle": Case(
        "citations.py",
        ("--oracle", "--data", str(SAMPLE)),
        180,
        (
            r"^oracle \(gold answer, no LLM\)$",
            r"^  questions: \d+$",
            r"^  cite a gold sentence, answered: \d+/\d+ \(\d+%\)$",
            r"^  right answers flagged: \d+/\d+",
        ),
    ),
    "citations_run": Case(
        "citations.py",
        ("--data", str(SAMPLE), "--limit", "1", "--out", "{tmp}/cite.jsonl"),
        300,
        (r"^offline default$", r"^scripted LLM router$", r"^  questions: 1$", r"^  cite a gold sentence, answered: "),
    ),
    "cli_help": Case(
        "cli_help.py",
        ("--repeat", "1"),
        120,
        (
            rf"^haystack-agentic --help +{NUMBER} +{NUMBER} +(ok|SLOW|\S+)",
            rf"^haystack-agentic ask --help +{NUMBER} +{NUMBER}",
            rf"^haystack-agentic serve --help +{NUMBER}",
        ),
    ),
    "collections_cost": Case(
        "collections_cost.py",
        ("--sizes", "300", "--queries", "3"),
        120,
        (
            rf"^in-memory +300 chunks: list_collections median {NUMBER} ms",
            rf"^in-memory +300 chunks: BM25 top-5 one of 3 +median {NUMBER} ms",
        ),
    ),
    "comparison": Case(
        "comparison/compare.py",
        ("ours", "agent"),
        300,
        (r"^aspect +system +outcome +s +check$", r"^\d+ of \d+ checks held$"),
    ),
    "cost_growth": Case(
        "cost_growth.py",
        ("--max-turns", "3", "--curve-turns", "3", "--recall-questions", "2", "--recall-turns", "3"),
        120,
        (
            r"^turns \|",
            rf"^ +3 \| +\d+ +\d+ +\d+ +\d+ \| +\d+ +\d+ +\d+ +\d+ +{NUMBER}$",
            rf"^ digests: recall {NUMBER}, prompt tokens per question {NUMBER}",
        ),
    ),
    "embedded_runtime": Case(
        "embedded_runtime.py",
        ("--questions", "1"),
        300,
        (
            r"^runtime +start-up s +s/question",
            rf"^transformers +{NUMBER} +{NUMBER}",
            rf"^llamacpp +{NUMBER} +{NUMBER}",
            r"^identical answers: \d/1$",
        ),
    ),
    "eval": Case(
        "eval.py",
        (
            "--no-answer",
            "--limit",
            "2",
            "--configs",
            "one-shot,bridge-entity",
            "--out",
            "{tmp}/eval",
            "--no-plot",
            "--quiet",
        ),
        300,
        (
            r"^Evaluation: hotpotqa_dev_sample \(2 questions, 6 chunks\)",
            rf"one-shot +│ +{NUMBER}% +│ +{NUMBER}%",
            rf"bridge-entity +│ +{NUMBER}% +│ +{NUMBER}%",
            r"^2 questions, 3572 documents, ",
        ),
    ),
    "evidence_check_report": Case(
        "evidence_check.py",
        ("report", "--limit", "2"),
        240,
        (
            r"^hotpotqa \(held-out half\) / bridge-entity: threshold ",
            rf"^  abstention on unanswerable: {NUMBER}% of 2;",
            rf"^  AUC {NUMBER}, average precision {NUMBER};",
        ),
    ),
    "evidence_check_speed": Case(
        "evidence_check.py",
        ("speed", "--limit", "3"),
        180,
        (
            rf"^offline \(MiniLM\): {NUMBER} ms wall, {NUMBER} ms CPU per check \(median of 3;",
            rf"^lexical: {NUMBER} ms wall, {NUMBER} ms CPU per check \(median of 3;",
        ),
    ),
    "grounding_accuracy": Case(
        "grounding_accuracy.py",
        ("--limit", "4"),
        180,
        (rf"balanced accuracy.*{NUMBER}",),
    ),
    "grounding_speed": Case(
        "grounding_speed.py",
        (),
        180,
        (r"^sentences chunks +pairs +ms/answer$", rf"^ +10 +20 +\d+ +{NUMBER}$"),
    ),
    "hostile_replies": Case(
        "hostile_replies.py",
        ("--runs", "3"),
        180,
        (
            r"^\| Role \| Runs \| answered \| gave_up \| max_iterations \| error \|",
            r"^\| controller-tools \| 3 \| \d+ \| \d+ \| \d+ \| \d+ \| \d+ \| 0 \|",  # nothing escaped `run`
            r"^\| grounding-judge \| 3 \| \d+ \| \d+ \| \d+ \| \d+ \| \d+ \| 0 \|",
        ),
    ),
    "llamacpp_routing": Case(
        "llamacpp_routing.py",
        ("--questions", "1"),
        300,
        (rf"^1 questions, \d+ decisions in {NUMBER} s", r"^valid decisions: \d+/\d+ = ", r"^endings: \{"),
    ),
    "loop_overhead": Case(
        "loop_overhead.py",
        ("--iterations", "2", "--runs", "2"),
        120,
        (
            rf"^ +2 +haystack-agentic run +{NUMBER} +{NUMBER} +{NUMBER} +{NUMBER}",
            rf"^ +2 +haystack Agent run_async +{NUMBER}",
            rf"^ +2 +bare loop +{NUMBER}",
        ),
    ),
    "memory": Case(
        # 200 questions: the leak check's RSS is sampled every 100 (its growth needs two samples)
        "memory.py",
        ("--chunks", "300", "--concurrency", "1", "2", "--questions", "200", "--server-concurrency", "1"),
        300,
        (
            r"^server \(embedded SmolLM2, 300 chunks\): RSS after start .* ended \['answered'\]$",
            rf"^in-process, scripted LLM: the 300-chunk store adds {NUMBER} MB",
            r"^ +2 concurrent runs: baseline ",
            rf"^  growth from question 100 to 200: {NUMBER} MB",
        ),
    ),
    "milvus_lite_index": Case(
        "milvus_lite_index.py",
        ("--size", "300", "--queries", "3"),
        120,
        (
            rf"^\| FLAT \| 300 \| {NUMBER} \| {NUMBER} \| {NUMBER} \| FLAT \|$",
            rf"^\| HNSW M=16, ef=64 \| 300 \| {NUMBER} \| {NUMBER} \| {NUMBER} \| HNSW \|$",
        ),
    ),
    "serve_first_token": Case(
        "serve_first_token.py",
        ("--questions", "2", "--latency", "0.01", "--first-token", "0.01", "--token-interval", "0.001"),
        180,
        (r"^server up in ", rf"^scripted +2 +{NUMBER} +{NUMBER}", r"^answers as scripted;"),
    ),
    "serve_throughput": Case(
        "serve_throughput.py",
        ("--levels", "2", "--requests", "4", "--latency", "0.01"),
        240,
        (
            r"^server +concurrency +requests +req/s .* ours/Agent req/s$",
            rf"^ +ours +2 +4 +{NUMBER} +{NUMBER} .* 0 +{NUMBER}$",  # no failures, and the ratio to the Agent
            rf"^ Agent +2 +4 +{NUMBER} +{NUMBER} .* 0 $",
        ),
    ),
    "served_cpu": Case(
        "served_cpu.py",
        ("--questions", "2", "--runs", "2", "--parts"),
        240,
        (
            rf"^ +ours +{NUMBER} +{NUMBER}  {NUMBER} {NUMBER}$",
            rf"^ +floor +{NUMBER} +{NUMBER}  ",
            rf"^ +floor, one-leaf result +{NUMBER} +{NUMBER}  ",
            rf"^ +Agent +{NUMBER} +1\.00  ",
            rf"^goal: ours <= 1\.5x Agent; the floor alone is {NUMBER}x$",
            rf"^ +component answerer +{NUMBER} ms/q$",
            rf"^ +Haystack's copies \(inputs, result\) +{NUMBER} ms/q$",
        ),
    ),
    "short_answer": Case(
        "short_answer.py",
        ("--data", str(SAMPLE), "--limit", "1", "--out", "{tmp}/short.jsonl"),
        300,
        (
            rf"^1 questions, {NUMBER} s CPU",
            r"^\| Questions \| Sentence EM \| Sentence F1 \| Span EM",
            r"^1 runs; \d+ ended without an answer",
        ),
    ),
    "store_latency": Case(
        "store_latency.py",
        ("--sizes", "300", "--queries", "3", "--questions", "2", "--baseline-queries", "2"),
        180,
        (
            rf"^\| 300 \| in-memory BM25, SparseBM25DocumentStore \| {NUMBER} \| {NUMBER} \| {NUMBER} \| {NUMBER}",
            rf"^\| 300 \| Milvus Lite hybrid \| {NUMBER} \| {NUMBER}",
        ),
    ),
}

#: Cases that end with exit status 2 and this message on a machine without what they need: skipped, not failed.
UNAVAILABLE = {"grounding_accuracy": "NO REAL HHEM MODEL"}


def runnable_scripts() -> set[str]:
    """Every `benchmarks/**/*.py` with a `__main__` block, not a `_`-prefixed helper, relative to `benchmarks/`."""
    return {
        path.relative_to(BENCHMARKS).as_posix()
        for path in BENCHMARKS.rglob("*.py")
        if not path.name.startswith("_") and 'if __name__ == "__main__"' in path.read_text(encoding="utf-8")
    }


def test_every_benchmark_has_a_smoke_run() -> None:
    covered = {case.script for case in CASES.values()}
    missing = sorted(runnable_scripts() - covered - set(NOT_RUN))
    assert not missing, f"benchmarks without a smoke run in {Path(__file__).name}: {missing}"
    gone = sorted(covered - runnable_scripts())
    assert not gone, f"smoke cases for scripts that are gone: {gone}"


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CASES))
def test_benchmark_runs_and_prints_its_figures(name: str, tmp_path: Path) -> None:
    case = CASES[name]
    args = [arg.format(tmp=tmp_path, venv=Path(sys.executable).parents[1]) for arg in case.args]
    env = {
        **os.environ,
        "HAYSTACK_TELEMETRY_ENABLED": "False",
        # this checkout's package, whatever the venv's editable install points at
        "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
    }
    started = time.perf_counter()
    try:
        done = subprocess.run(
            [sys.executable, str(BENCHMARKS / case.script), *args],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=case.timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"{case.script} did not finish in {case.timeout} s; stdout so far:\n{exc.stdout}")
    seconds = time.perf_counter() - started
    message = UNAVAILABLE.get(name)
    if message and done.returncode == 2 and message in done.stdout:
        pytest.skip(f"{case.script}: {done.stdout.strip().splitlines()[0][:200]}")
    report = f"{case.script} {' '.join(args)} (exit {done.returncode}, {seconds:.1f} s)\nstdout:\n{done.stdout[-4000:]}"
    assert done.returncode == 0, f"{report}\nstderr:\n{done.stderr[-4000:]}"
    missing = [pattern for pattern in case.prints if not re.search(pattern, done.stdout, re.MULTILINE)]
    assert not missing, f"{report}\nlines not printed: {missing}"
