# SPDX-License-Identifier: Apache-2.0
"""
Memory: the server with the embedded model and 100k chunks, per concurrent run, and a leak check.

1. `server`: `haystack-agentic serve` (the packaged offline default: bridge-entity routing, SmolLM2-135M answers,
   `SparseBM25DocumentStore`) on 127.0.0.1 with a saved store of `--chunks` chunks (the shipped HotpotQA paragraphs
   repeated to the size). RSS of the server (and its children) after start, after one question (model loaded, BM25
   matrix and title index built), and the peak while `--server-concurrency` questions run at once; per concurrent
   run = (peak - after one question) / concurrency.
2. `in-process`: the same store in one process, the loop pipeline (`AgenticRouter`, tools mode) driven by a
   zero-latency `ScriptedChatGenerator` (3 searches of top_k=5, then an answer): the peak RSS above the baseline
   for 1 and 64 concurrent runs (`Pipeline.run_async` + `asyncio.gather`), sampled every millisecond.
3. `leak check`: `--questions` sequential questions on that pipeline; RSS after every 100; the growth from the
   first hundred to the last is the figure (target: none beyond allocator noise, < 5 MB).

Run: `python benchmarks/memory.py [--chunks 100000] [--questions 1000] [--server-concurrency 4] [--skip-server]`
"""

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the scripted LLM

LEAK_TARGET_MB = 5.0


def _mb(value: float) -> float:
    return value / 2**20


def tree_rss(process: psutil.Process) -> int:
    """RSS of a process and its children, in bytes."""
    total = 0
    for proc in [process, *process.children(recursive=True)]:
        try:
            total += proc.memory_info().rss
        except psutil.NoSuchProcess:
            continue
    return total


class PeakSampler:
    """Samples a process tree's RSS every millisecond in a thread; `peak` is the highest seen."""

    def __init__(self, process: psutil.Process) -> None:
        self.process, self.peak = process, tree_rss(process)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, tree_rss(self.process))
            time.sleep(0.001)

    def __enter__(self) -> "PeakSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, tree_rss(self.process))


def build_store(chunks: int):
    import random

    from store_latency import synth_chunks

    from haystack_agentic.document_stores.sparse_bm25_document_store import SparseBM25DocumentStore

    store = SparseBM25DocumentStore()
    docs = synth_chunks(chunks, random.Random(0), embed=False)
    for i in range(0, len(docs), 5000):
        store.write_documents(docs[i : i + 5000])
    return store


def server_scenario(chunks: int, concurrency: int, questions: list[str]) -> dict:
    from serve_throughput import free_port

    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        build_store(chunks).save_to_disk(str(workdir / "store.json"))
        port = free_port()
        env = {**os.environ, "HAYSTACK_TELEMETRY_ENABLED": "False", "HAYHOOKS_LOG_LEVEL": "WARNING"}
        log = open(workdir / "server.log", "w")
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "haystack_agentic.cli.serve",
                "--port",
                str(port),
                "--mcp-port",
                "0",
                "--llm",
                "embedded",
                "--store",
                str(workdir / "store.json"),
                "--pipelines-dir",
                str(workdir / "p"),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=workdir,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 1200  # loading 100k chunks on a busy 2-core machine is slow
            while True:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError((workdir / "server.log").read_text()[-3000:])
                try:
                    if httpx.get(f"{url}/status", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    time.sleep(0.2)
            server = psutil.Process(process.pid)
            started = tree_rss(server)

            async def ask(client: httpx.AsyncClient, question: str) -> str:
                response = await client.post("/agentic_rag/run", json={"query": question})
                response.raise_for_status()
                return response.json()["result"]["result"]["terminated_by"]

            async def batch(items: list[str]) -> list[str]:
                async with httpx.AsyncClient(base_url=url, timeout=600) as client:
                    return await asyncio.gather(*(ask(client, q) for q in items))

            started_s = time.monotonic() - (deadline - 1200)
            first = time.perf_counter()
            asyncio.run(batch(questions[:1]))
            first_s = time.perf_counter() - first
            loaded = tree_rss(server)
            with PeakSampler(server) as sampler:
                start = time.perf_counter()
                ended = asyncio.run(batch(questions[1 : 1 + concurrency]))
                seconds = time.perf_counter() - start
            return {
                "started_mb": _mb(started),
                "loaded_mb": _mb(loaded),
                "peak_mb": _mb(sampler.peak),
                "per_run_mb": _mb(sampler.peak - loaded) / concurrency,
                "first_question_s": first_s,
                "start_s": started_s,
                "concurrent_s": seconds,
                "ended": ended,
            }
        finally:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=30)
            log.close()


def in_process_scenarios(chunks: int, concurrency_levels: list[int], sequential: int) -> dict:
    from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
    from scripted_chat_generator import ScriptedChatGenerator
    from store_latency import DATA

    from haystack_agentic import AgenticRouter, LoopController, build_loop_pipeline
    from haystack_agentic.indexing.hotpotqa import load_hotpotqa_questions

    process = psutil.Process()
    before_store = process.memory_info().rss
    store = build_store(chunks)
    titles = sorted({d.meta["title"] for d in store.filter_documents()})
    turns = [{"tool_calls": [{"tool_name": "search", "arguments": {"query": t, "top_k": 5}}]} for t in titles[1:4]]
    turns.append({"tool_calls": [{"tool_name": "answer", "arguments": {"text": "x"}}]})
    llm = ScriptedChatGenerator(turns)
    # Without the evidence check: its MiniLM is part of the server figure above; here the loop's own memory is
    # measured (and the scripted answer "x" would be refused by the check, ending the runs `gave_up`).
    pipeline = build_loop_pipeline(
        AgenticRouter(chat_generator=llm),
        InMemoryBM25Retriever(store, top_k=5),
        controller=LoopController(10, 30),
        check_evidence=False,
    )
    pipeline.warm_up()
    questions = [r["question"] for r in load_hotpotqa_questions(DATA)]

    async def runs(k: int, offset: int = 0) -> list:
        tasks = [
            pipeline.run_async({"controller": {"query": questions[(offset + i) % len(questions)]}}) for i in range(k)
        ]
        outputs = await asyncio.gather(*tasks)
        llm.calls.clear()  # the scripted LLM records every call: not the loop's memory
        return [o["result"]["terminated_by"] for o in outputs]

    asyncio.run(runs(2))  # warm-up: builds the BM25 matrix
    out: dict = {"store_mb": _mb(process.memory_info().rss - before_store), "levels": []}
    for k in concurrency_levels:
        baseline = process.memory_info().rss
        with PeakSampler(process) as sampler:
            ended = asyncio.run(runs(k))
        assert ended == ["answered"] * k, ended
        out["levels"].append(
            {
                "concurrency": k,
                "baseline_mb": _mb(baseline),
                "peak_mb": _mb(sampler.peak),
                "per_run_mb": _mb(sampler.peak - baseline) / k,
            }
        )
    loop = asyncio.new_event_loop()
    rss = []
    for i in range(sequential):
        output = loop.run_until_complete(pipeline.run_async({"controller": {"query": questions[i % len(questions)]}}))
        llm.calls.clear()
        assert output["result"]["terminated_by"] == "answered"
        if (i + 1) % 100 == 0:
            rss.append(_mb(process.memory_info().rss))
    loop.close()
    out["sequential_rss_mb"] = rss
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 64])
    parser.add_argument("--questions", type=int, default=1000, help="sequential questions of the leak check")
    parser.add_argument("--server-concurrency", type=int, default=4)
    parser.add_argument("--skip-server", action="store_true")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(in_process_scenarios(args.chunks, args.concurrency, args.questions)))
        return
    print(
        f"machine: {os.cpu_count()} CPUs, {_mb(psutil.virtual_memory().total) / 1024:.0f} GB RAM, load average "
        f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}; {args.chunks:,} chunks"
    )
    from store_latency import DATA

    from haystack_agentic.indexing.hotpotqa import load_hotpotqa_questions

    questions = [r["question"] for r in load_hotpotqa_questions(DATA)]
    if not args.skip_server:
        s = server_scenario(args.chunks, args.server_concurrency, questions)
        print(
            f"server (embedded SmolLM2, {args.chunks:,} chunks): RSS after start ({s['start_s']:.0f} s) "
            f"{s['started_mb']:.0f} MB, after one "
            f"question {s['loaded_mb']:.0f} MB ({s['first_question_s']:.1f} s), peak with "
            f"{args.server_concurrency} concurrent questions {s['peak_mb']:.0f} MB ({s['concurrent_s']:.1f} s): "
            f"{s['per_run_mb']:.1f} MB per concurrent run; ended {s['ended']}"
        )
    cmd = [
        sys.executable,
        __file__,
        "--child",
        "--chunks",
        str(args.chunks),
        "--questions",
        str(args.questions),
        "--concurrency",
        *map(str, args.concurrency),
    ]
    r = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1])
    print(
        f"in-process, scripted LLM: the {args.chunks:,}-chunk store adds {r['store_mb']:.0f} MB (documents, BM25 "
        "statistics and matrix)"
    )
    for level in r["levels"]:
        print(
            f"  {level['concurrency']:>3} concurrent runs: baseline {level['baseline_mb']:.0f} MB, peak "
            f"{level['peak_mb']:.0f} MB, {level['per_run_mb']:.3f} MB per run"
        )
    rss = r["sequential_rss_mb"]
    if rss:
        growth = rss[-1] - rss[0]
        print(
            f"  leak check, {args.questions} sequential questions, RSS every 100: "
            f"{', '.join(f'{x:.0f}' for x in rss)} MB"
        )
        print(
            f"  growth from question 100 to {args.questions}: {growth:+.1f} MB (target < {LEAK_TARGET_MB:.0f} MB): "
            f"{'met' if growth < LEAK_TARGET_MB else 'NOT met'}"
        )


if __name__ == "__main__":
    main()
