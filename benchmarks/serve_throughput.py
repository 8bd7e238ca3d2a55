# SPDX-License-Identifier: Apache-2.0
"""
Throughput and latency of the loop served by hayhooks, under concurrent questions, against the ideal.

Starts `python -m haystack_agentic.cli.serve` on 127.0.0.1 (a free port) with the loop pipeline as the package
builds it (`build_loop_pipeline`: AgenticRouter in tools mode, the packaged `SafeRetriever` + BM25 over a
`SparseBM25DocumentStore`; no evidence check), driven by a `ScriptedChatGenerator` that searches the question, then answers, and
sleeps `--latency` seconds per call; the store holds every paragraph of the shipped HotpotQA sample. For each
concurrency level it sends `--requests` questions (at most `concurrency` in flight) to `POST /scripted/run` and
prints requests per second, median and p95 latency, the wall time of the level against the ideal (LLM calls
per question x latency x requests / concurrency: no queuing, no overhead), and the server's CPU time per
question (user + system, from psutil). A last level with a zero-latency LLM gives the requests/s ceiling.

    python benchmarks/serve_throughput.py [--latency 0.2] [--levels 1,8,32,64] [--requests 64]
"""

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import corpus_store  # noqa: E402
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever  # noqa: E402

from haystack_agentic import AgenticRouter, LoopController, build_loop_pipeline  # noqa: E402
from haystack_agentic.components.retrievers.safe_retriever import SafeRetriever  # noqa: E402
from haystack_agentic.document_stores.sparse_bm25_document_store import SparseBM25DocumentStore  # noqa: E402
from haystack_agentic.pipelines.default_pipelines import servable  # noqa: E402
from haystack_agentic.testing import ScriptedChatGenerator  # noqa: E402

LLM_CALLS_PER_QUESTION = 2  # search, answer
TARGET = 1.15  # wall of 64 concurrent questions / ideal


def scripted_loop_yaml(latency: float) -> str:
    """The served pipeline: the package's loop graph around a scripted LLM (search the question, then answer)."""
    script = [
        {"template": True, "tool_calls": [{"tool_name": "search", "arguments": {"query": "{{ question }}"}}]},
        {"template": True, "tool_calls": [{"tool_name": "answer", "arguments": {"text": "Answer to: {{ question }}"}}]},
    ]
    llm = ScriptedChatGenerator(script, latency=latency)
    retriever = SafeRetriever(InMemoryBM25Retriever(SparseBM25DocumentStore(index="serve-bench")))
    controller = LoopController(max_iterations=4)
    # Without the evidence check: the goal is the loop's and the server's overhead (the MiniLM check costs ~150 ms
    # CPU a question on its own, `benchmarks/evidence_check.py speed`, and refuses some scripted answers).
    pipeline = build_loop_pipeline(
        AgenticRouter(chat_generator=llm), retriever, controller=controller, check_evidence=False
    )
    pipeline.metadata = {"llm": f"scripted ({latency} s/call)", "policy": "search the question, then answer"}
    return servable(pipeline).dumps()


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _start_server(workdir: Path, store, latency: float, workers: int) -> tuple[subprocess.Popen, str]:
    store.save_to_disk(str(workdir / "store.json"))
    yaml_path = workdir / "bench_loop.yml"
    yaml_path.write_text(scripted_loop_yaml(latency))
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


async def _level(url: str, concurrency: int, requests: int, questions: list[str], server: psutil.Process) -> dict:
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
        await client.get("/status")  # open a connection before the clock starts
        cpu = _cpu_seconds(server)
        start = time.perf_counter()
        await asyncio.gather(*(one(client, questions[i % len(questions)]) for i in range(requests)))
        wall = time.perf_counter() - start
        cpu = _cpu_seconds(server) - cpu
    latencies.sort()
    return {
        "concurrency": concurrency,
        "requests": requests,
        "throughput": requests / wall,
        "median": statistics.median(latencies),
        "p95": latencies[min(len(latencies) - 1, int(0.95 * len(latencies)))],
        "failures": failures,
        "wall": wall,
        "cpu_per_question": cpu / requests,
    }


def _cpu_seconds(server: psutil.Process) -> float:
    """User + system CPU seconds of the server process and its children (hayhooks workers)."""
    total = 0.0
    for process in [server, *server.children(recursive=True)]:
        try:
            times = process.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += times.user + times.system
    return total


def _run_levels(latency: float, levels: list[int], requests: int, workers: int, store, questions) -> list[dict]:
    with tempfile.TemporaryDirectory() as tmp:
        process, url = _start_server(Path(tmp), store, latency, workers)
        server = psutil.Process(process.pid)
        try:
            asyncio.run(_level(url, 8, 16, questions, server))  # warm-up (builds the BM25 matrix)
            return [asyncio.run(_level(url, c, max(requests, c), questions, server)) for c in levels]
        finally:
            process.terminate()
            process.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--latency", type=float, default=0.2, help="Seconds per scripted LLM call (default 0.2).")
    parser.add_argument("--levels", default="1,8,32,64", help="Concurrency levels (default 1,8,32,64).")
    parser.add_argument("--requests", type=int, default=64, help="Requests per level (default 64).")
    parser.add_argument("--ceiling-requests", type=int, default=256, help="Requests of the zero-latency level.")
    parser.add_argument("--workers", type=int, default=1, help="hayhooks worker processes (default 1).")
    args = parser.parse_args()
    store, _, rows = corpus_store(questions=100_000)  # every paragraph of the shipped sample
    questions = [row["question"] for row in rows]
    ideal = LLM_CALLS_PER_QUESTION * args.latency
    print(f"machine: {os.cpu_count()} CPUs, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} at start")
    levels = [int(x) for x in args.levels.split(",")]
    results = _run_levels(args.latency, levels, args.requests, args.workers, store, questions)
    ceiling = _run_levels(0.0, [64], args.ceiling_requests, args.workers, store, questions)[0]
    print(f"hayhooks, {args.workers} worker(s), {store.count_documents()} paragraphs; scripted LLM "
          f"{args.latency:.3f} s/call, {LLM_CALLS_PER_QUESTION} calls/question "
          f"-> ideal latency {ideal:.3f} s")  # fmt: skip
    print(f"{'concurrency':>11} {'requests':>8} {'req/s':>8} {'median s':>9} {'p95 s':>7} {'wall s':>7} "
          f"{'ideal wall s':>12} {'wall/ideal':>10} {'CPU ms/q':>9} {'failures':>8}")  # fmt: skip
    for r in results:
        ideal_wall = ideal * -(-r["requests"] // r["concurrency"])
        print(f"{r['concurrency']:>11} {r['requests']:>8} {r['throughput']:>8.1f} {r['median']:>9.3f} {r['p95']:>7.3f} "
              f"{r['wall']:>7.3f} {ideal_wall:>12.3f} {r['wall'] / ideal_wall:>10.2f} "
              f"{1000 * r['cpu_per_question']:>9.2f} {r['failures']:>8}")  # fmt: skip
    print(f"zero-latency LLM, concurrency 64, {ceiling['requests']} requests: {ceiling['throughput']:.1f} req/s, "
          f"CPU {1000 * ceiling['cpu_per_question']:.2f} ms/question, failures {ceiling['failures']}")
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} at end")
    for r in results:
        if r["concurrency"] == 64:
            ratio = r["wall"] / (ideal * -(-r["requests"] // 64))
            print(f"64 concurrent questions: wall/ideal {ratio:.2f} (target <= {TARGET}): "
                  f"{'met' if ratio <= TARGET else 'NOT met'}")


if __name__ == "__main__":
    main()
