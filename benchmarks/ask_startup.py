# SPDX-License-Identifier: Apache-2.0
"""
A warm `haystack-agentic ask` against a plain Haystack one-shot RAG script (`benchmarks/plain_rag.py`: load the same
store, one BM25 search, the same embedded SmolLM2-135M answering, print), each a fresh process started the same
way, from process start to exit (the printed answer).

Both run with the same cache (`--cache`: the default store and the converted model; one untimed run of each first
makes them warm), `--trials` times, alternating; the medians and their ratio (goal: `ask` <= 1.0x the plain
script). `--profile DIR` then runs `ask` once under `python -X importtime` and once under cProfile and prints where
its time goes: imports by top-level package, and the cumulative time of the stages (pipeline load, store load,
model loads, the evidence check, generation, grounding, printing).

    python benchmarks/ask_startup.py [--trials 5] [--profile DIR] [--question "..."]
"""

import argparse
import collections
import os
import pstats
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
QUESTION = 'The director of the romantic comedy "Big Stone Gap" is based in what New York city?'

#: Stages of a run, as (label, function name in the profile: `file fragment`, `function`).
STAGES = [
    ("imports of the CLI (haystack_agentic.cli.main)", ("<frozen importlib._bootstrap>", "_find_and_load")),
    ("ask: build the pipeline (build_loop)", ("pipelines/loop_builder.py", "build_loop")),
    ("ask: load the store into it", ("cli/ask.py", "load_store_into")),
    ("ask: load the grounding model", ("cli/ask.py", "warm_grounder")),
    ("Pipeline.warm_up (all components)", ("pipeline/base.py", "warm_up")),
    ("EmbeddedChatGenerator.warm_up (SmolLM2 load)", ("embedded_chat_generator.py", "warm_up")),
    ("Pipeline.run", ("pipeline/pipeline.py", "run")),
    ("router (BridgeEntityRouter.run)", ("bridge_entity_router.py", "run")),
    ("evidence check (EvidenceChecker.run)", ("evidence_checker.py", "run")),
    ("answer generation (EmbeddedChatGenerator.run)", ("embedded_chat_generator.py", "run")),
    ("grounding (HHEMGrounder.run)", ("hhem_grounder.py", "run")),
    ("printing the trace (print_trace)", ("ask_output.py", "print_trace")),
]


def _env(cache: Path) -> dict[str, str]:
    return {
        **os.environ,
        "HAYSTACK_AGENTIC_CACHE": str(cache),
        "HAYSTACK_TELEMETRY_ENABLED": "False",
        "PYTHONPATH": os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]),
    }


def commands(question: str, cache: Path) -> dict[str, list[str]]:
    return {
        "ask": [sys.executable, "-m", "haystack_agentic.cli.main", "ask", question],
        "plain": [
            sys.executable,
            str(REPO / "benchmarks" / "plain_rag.py"),
            question,
            "--store",
            str(cache / "store.json"),
        ],
    }


def timed(command: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """Run `command`; its wall seconds, CPU seconds (user + system, all threads) and stdout."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, env=env, cwd=REPO, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        msg = f"{command[:4]} exited {done.returncode}: {done.stderr[-2000:]}"
        raise RuntimeError(msg)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.stdout


def import_costs(stderr: str, top: int = 15) -> list[tuple[str, float]]:
    """Seconds of import time (self) per top-level package, from `-X importtime` output."""
    per_package: collections.Counter = collections.Counter()
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, _, name = (part.strip() for part in line[len("import time:") :].split("|"))
        per_package[name.split(".")[0]] += int(self_us) / 1e6
    return per_package.most_common(top)


def stage_costs(profile: Path) -> list[tuple[str, float, int]]:
    """Cumulative seconds (and calls) of each of `STAGES` in a cProfile dump."""
    stats = pstats.Stats(str(profile)).stats  # {(file, line, function): (cc, nc, tt, ct, callers)}
    rows = []
    for label, (fragment, function) in STAGES:
        matches = [
            (ct, nc) for (file, _, name), (_, nc, _, ct, _) in stats.items() if name == function and fragment in file
        ]
        if matches:
            ct, nc = max(matches)
            rows.append((label, ct, nc))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=5, help="Timed runs of each (default 5).")
    parser.add_argument("--question", default=QUESTION)
    cache = Path(tempfile.gettempdir()) / "haystack-agentic-bench-cache"
    parser.add_argument("--cache", default=str(cache), help="HAYSTACK_AGENTIC_CACHE.")
    parser.add_argument("--profile", metavar="DIR", help="Also profile one `ask` (importtime, cProfile) into DIR.")
    args = parser.parse_args()
    cache = Path(args.cache).resolve()
    env = _env(cache)
    runs = commands(args.question, cache)
    print(f"machine: {os.cpu_count()} CPUs, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} at start")
    *_, answer = timed(runs["ask"], env)  # warm: indexes the store and converts the model if the cache is new
    print(f"warm-up ask printed:\n{answer.rstrip()}\n", flush=True)
    *_, answer = timed(runs["plain"], env)
    print(f"warm-up plain script printed: {answer.strip()!r}", flush=True)
    walls: dict[str, list[float]] = {name: [] for name in runs}
    cpus: dict[str, list[float]] = {name: [] for name in runs}
    for trial in range(args.trials):
        for name in list(runs) if trial % 2 == 0 else list(runs)[::-1]:
            wall, cpu, _ = timed(runs[name], env)
            walls[name].append(wall)
            cpus[name].append(cpu)
    for name, values in walls.items():
        print(
            f"{name:>6}: wall median {statistics.median(values):.2f} s "
            f"(each: {', '.join(f'{v:.2f}' for v in values)}); "
            f"CPU median {statistics.median(cpus[name]):.2f} s (each: {', '.join(f'{v:.2f}' for v in cpus[name])})"
        )
    ratio = statistics.median(walls["ask"]) / statistics.median(walls["plain"])
    cpu_ratio = statistics.median(cpus["ask"]) / statistics.median(cpus["plain"])
    print(
        f"ask / plain script: wall {ratio:.2f}x (goal <= 1.0x): {'met' if ratio <= 1.0 else 'NOT met'}; "
        f"CPU {cpu_ratio:.2f}x"
    )
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} after the trials", flush=True)
    if not args.profile:
        return
    out = Path(args.profile).resolve()
    out.mkdir(parents=True, exist_ok=True)
    for name in ("ask", "plain"):
        command = [runs[name][0], "-X", "importtime", *runs[name][1:]]
        start = time.perf_counter()
        done = subprocess.run(command, env=env, cwd=REPO, capture_output=True, text=True)
        wall = time.perf_counter() - start
        (out / f"{name}_importtime.txt").write_text(done.stderr)
        costs = import_costs(done.stderr)
        imports = sum(c for _, c in import_costs(done.stderr, 10_000))
        print(f"\n{name} under -X importtime: {wall:.2f} s; imports (self time) {imports:.2f} s; by top-level package:")
        for package, seconds in costs:
            print(f"  {package:<28} {seconds:6.2f} s")
    prof = out / "ask.prof"
    command = [runs["ask"][0], "-m", "cProfile", "-o", str(prof), *runs["ask"][1:]]
    start = time.perf_counter()
    subprocess.run(command, env=env, cwd=REPO, capture_output=True, text=True, check=True)
    print(f"\nask under cProfile: {time.perf_counter() - start:.2f} s (wall clock profile); stages, cumulative:")
    for label, seconds, calls in stage_costs(prof):
        print(f"  {label:<52} {seconds:6.2f} s  ({calls} calls)")


if __name__ == "__main__":
    main()
