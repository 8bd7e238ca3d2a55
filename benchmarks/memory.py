# SPDX-License-Identifier: Apache-2.0
"""
Memory: peak RSS of one loop run and of 64 concurrent runs (`Pipeline.run_async` + `asyncio.gather`) on one
shared pipeline instance.

Set-up: the whole HotpotQA sample (~3,570 paragraphs) in an `InMemoryDocumentStore`, BM25, `AgenticRouter` in
tools mode driven by a zero-latency `ScriptedChatGenerator` (3 searches of top_k=5, then an answer), chunk cap 30.
Each scenario runs in a fresh subprocess: RSS is read after set-up and one warm-up run (the baseline), then a
thread samples RSS every millisecond during the measured runs; the figure is the sampled peak minus the baseline
(the process's `ru_maxrss` high-water mark is printed too). The LLM's and store's own memory is in the baseline.

Run: `python benchmarks/memory.py [--concurrency 1 64]`
"""

import argparse
import asyncio
import json
import resource
import subprocess
import sys
import threading
import time

import psutil


def measure(concurrency: int) -> dict:
    from _common import corpus_store
    from haystack.components.retrievers.in_memory import InMemoryBM25Retriever

    from haystack_agentic import AgenticRouter, LoopController, build_loop_pipeline
    from haystack_agentic.testing import ScriptedChatGenerator

    store, titles, rows = corpus_store(10_000)
    turns = [{"tool_calls": [{"tool_name": "search", "arguments": {"query": t, "top_k": 5}}]} for t in titles[1:4]]
    turns.append({"tool_calls": [{"tool_name": "answer", "arguments": {"text": "x"}}]})
    llm = ScriptedChatGenerator(turns)
    pipeline = build_loop_pipeline(
        AgenticRouter(chat_generator=llm), InMemoryBM25Retriever(store), controller=LoopController(10, 30)
    )
    pipeline.warm_up()
    questions = [r["question"] for r in rows]

    async def runs(k: int) -> list:
        tasks = [pipeline.run_async({"controller": {"query": questions[i % len(questions)]}}) for i in range(k)]
        return await asyncio.gather(*tasks)

    asyncio.run(runs(1))  # warm-up
    llm.calls.clear()
    process = psutil.Process()
    baseline = process.memory_info().rss
    peak = baseline
    stop = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not stop.is_set():
            peak = max(peak, process.memory_info().rss)
            time.sleep(0.001)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    started = time.perf_counter()
    outputs = asyncio.run(runs(concurrency))
    seconds = time.perf_counter() - started
    stop.set()
    sampler.join()
    peak = max(peak, process.memory_info().rss)
    ended = [o["result"]["result"]["terminated_by"] for o in outputs]
    assert ended == ["answered"] * concurrency, ended
    return {
        "concurrency": concurrency,
        "baseline_mb": baseline / 2**20,
        "peak_mb": peak / 2**20,
        "delta_mb": (peak - baseline) / 2**20,
        "ru_maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "seconds": seconds,
        "documents": store.count_documents(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 64])
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.child)))
        return
    header = f"{'concurrent runs':>15} {'baseline MB':>12} {'peak MB':>8} {'peak - baseline MB':>19} {'per run MB':>11} {'ru_maxrss MB':>13} {'wall s':>7}"
    print(header)
    print("-" * len(header))
    for k in args.concurrency:
        out = subprocess.run(
            [sys.executable, __file__, "--child", str(k)], capture_output=True, text=True, check=True
        ).stdout
        r = json.loads(out.strip().splitlines()[-1])
        print(
            f"{k:>15} {r['baseline_mb']:>12.1f} {r['peak_mb']:>8.1f} {r['delta_mb']:>19.2f} "
            f"{r['delta_mb'] / k:>11.3f} {r['ru_maxrss_mb']:>13.1f} {r['seconds']:>7.2f}"
        )
    print(f"\n({r['documents']} documents in the store)")


if __name__ == "__main__":
    main()
