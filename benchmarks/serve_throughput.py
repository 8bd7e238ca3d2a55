# SPDX-License-Identifier: Apache-2.0
"""
Throughput and latency of the loop served by hayhooks, under concurrent questions, against the ideal.

Starts `python -m haystack_agentic.cli.serve` on 127.0.0.1 (a free port) with the test-only scripted loop
(`tests/serving/scripted_loop.yml`: search the question, then answer) whose LLM sleeps `--latency` seconds per
call, over the shipped HotpotQA sample's paragraphs (BM25). For each concurrency level it sends `--requests`
questions (at most `concurrency` in flight) to `POST /scripted/run` and prints requests per second, median and
p95 latency, and the ideal (LLM calls per question x latency, i.e. no queuing and no overhead).

    .venv/bin/python benchmarks/serve_throughput.py [--latency 0.25] [--levels 1,8,32,64] [--requests 64]
"""

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import corpus_store  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SCRIPTED_YAML = ROOT / "tests" / "serving" / "scripted_loop.yml"
LLM_CALLS_PER_QUESTION = 2  # search, answer


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _start_server(workdir: Path, store, latency: float, workers: int) -> tuple[subprocess.Popen, str]:
    store.save_to_disk(str(workdir / "store.json"))
    yaml_path = workdir / "bench_loop.yml"
    yaml_path.write_text(SCRIPTED_YAML.read_text().replace("latency: 0.0", f"latency: {latency}"))
    port = _free_port()
    env = {**__import__("os").environ, "HAYSTACK_TELEMETRY_ENABLED": "False", "HAYHOOKS_TRACING_ENABLED": "false",
           "HAYHOOKS_LOG_LEVEL": "WARNING"}  # fmt: skip
    log = open(workdir / "server.log", "w")  # noqa: SIM115 - closed with the process
    process = subprocess.Popen(
        [sys.executable, "-m", "haystack_agentic.cli.serve", "--port", str(port), "--mcp-port", "0",
         "--workers", str(workers), "--pipeline", f"scripted={yaml_path}", "--pipelines-dir", str(workdir / "p"),
         "--store", str(workdir / "store.json")],
        stdout=log, stderr=subprocess.STDOUT, env=env, cwd=workdir,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError((workdir / "server.log").read_text()[-3000:])
        try:
            if httpx.get(f"{url}/status", timeout=1).status_code == 200:
                return process, url
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    process.terminate()
    raise RuntimeError("the server did not start in 120 s")


async def _level(url: str, concurrency: int, requests: int, questions: list[str]) -> dict:
    semaphore = asyncio.Semaphore(concurrency)
    latencies: list[float] = []
    failures = 0

    async def one(client: httpx.AsyncClient, question: str) -> None:
        nonlocal failures
        async with semaphore:
            start = time.perf_counter()
            response = await client.post("/scripted/run", json={"query": question})
            latencies.append(time.perf_counter() - start)
            if response.status_code != 200 or response.json()["result"]["answer"] != f"Answer to: {question.strip()}":
                failures += 1

    limits = httpx.Limits(max_connections=concurrency + 4)
    async with httpx.AsyncClient(base_url=url, timeout=300, limits=limits) as client:
        start = time.perf_counter()
        await asyncio.gather(*(one(client, questions[i % len(questions)]) for i in range(requests)))
        wall = time.perf_counter() - start
    latencies.sort()
    return {
        "concurrency": concurrency,
        "requests": requests,
        "throughput": requests / wall,
        "median": statistics.median(latencies),
        "p95": latencies[min(len(latencies) - 1, int(0.95 * len(latencies)))],
        "failures": failures,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--latency", type=float, default=0.25, help="Seconds per scripted LLM call (default 0.25).")
    parser.add_argument("--levels", default="1,8,32,64", help="Concurrency levels (default 1,8,32,64).")
    parser.add_argument("--requests", type=int, default=64, help="Requests per level (default 64).")
    parser.add_argument("--workers", type=int, default=1, help="hayhooks worker processes (default 1).")
    args = parser.parse_args()
    store, _, rows = corpus_store(questions=100)
    questions = [row["question"] for row in rows]
    ideal = LLM_CALLS_PER_QUESTION * args.latency
    with tempfile.TemporaryDirectory() as tmp:
        process, url = _start_server(Path(tmp), store, args.latency, args.workers)
        try:
            asyncio.run(_level(url, 1, 2, questions))  # warm-up
            results = [
                asyncio.run(_level(url, c, max(args.requests, c), questions))
                for c in (int(x) for x in args.levels.split(","))
            ]
        finally:
            process.terminate()
            process.wait(timeout=30)
    print(f"hayhooks, {args.workers} worker(s); scripted LLM {args.latency:.3f} s/call, "
          f"{LLM_CALLS_PER_QUESTION} calls/question -> ideal latency {ideal:.3f} s")  # fmt: skip
    print(f"{'concurrency':>11} {'requests':>8} {'req/s':>8} {'ideal req/s':>11} {'median s':>9} {'p95 s':>7} "
          f"{'median/ideal':>12} {'failures':>8}")  # fmt: skip
    for r in results:
        print(f"{r['concurrency']:>11} {r['requests']:>8} {r['throughput']:>8.1f} {r['concurrency'] / ideal:>11.1f} "
              f"{r['median']:>9.3f} {r['p95']:>7.3f} {r['median'] / ideal:>12.2f} {r['failures']:>8}")  # fmt: skip


if __name__ == "__main__":
    main()
