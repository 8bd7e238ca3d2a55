# SPDX-License-Identifier: Apache-2.0
"""
Loop overhead: time per iteration spent OUTSIDE the LLM and the retriever.

The same tool calls (N-1 searches of distinct queries, top_k=5, then an answer) are made three ways, with a
zero-latency `ScriptedChatGenerator` and an `InMemoryBM25Retriever` over ~500 HotpotQA paragraphs:

- `haystack-agentic`: our loop pipeline (LoopController -> AgenticRouter (tools mode) -> retriever -> ...),
  `Pipeline.run` and `Pipeline.run_async`;
- `haystack Agent`: `haystack.components.agents.Agent` with a `search` tool calling the same retriever (the last
  turn is a text reply, which ends an Agent run), `run` and `run_async`;
- `bare loop`: a Python loop calling the generator and the retriever and appending messages (the floor).

Time inside the generator's and the retriever's `run`/`run_async` is measured by timers wrapped around them and
subtracted from each run's wall time; the rest divided by N is the overhead per iteration. Median of R runs
after warm-up runs; the ratios to the Agent and to the bare loop are the figures.

Run: `python benchmarks/loop_overhead.py [--iterations 5 10] [--runs 50]`
"""

import argparse
import asyncio
import statistics
import time

from _common import Timer, corpus_store
from haystack.components.agents import Agent
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.dataclasses import ChatMessage
from haystack.tools import Tool

from haystack_agentic import AgenticRouter, LoopController, build_loop_pipeline
from haystack_agentic.testing import ScriptedChatGenerator

FORMATTER = LoopController()


def script(queries: list[str], final: dict) -> list[dict]:
    turns = [{"tool_calls": [{"tool_name": "search", "arguments": {"query": q, "top_k": 5}}]} for q in queries]
    return [*turns, final]


def timed_parts(llm, retriever) -> Timer:
    timer = Timer()
    for obj in (llm, retriever):
        timer.wrap(obj, "run")
        timer.wrap(obj, "run_async")
    return timer


def bench(name: str, run_once, timer: Timer, llm, iterations: int, runs: int, warm: int = 5) -> dict:
    overheads, walls = [], []
    for i in range(warm + runs):
        llm.reset()
        timer.reset()
        start = time.perf_counter()
        run_once()
        wall = time.perf_counter() - start
        if i >= warm:
            walls.append(wall / iterations)
            overheads.append((wall - timer.seconds) / iterations)
    expected_llm = iterations
    assert len(llm.calls) == expected_llm, f"{name}: {len(llm.calls)} LLM calls, expected {expected_llm}"
    return {"name": name, "overhead_ms": 1000 * statistics.median(overheads), "wall_ms": 1000 * statistics.median(walls)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--iterations", type=int, nargs="+", default=[5, 10], help="LLM turns per run")
    parser.add_argument("--runs", type=int, default=50, help="timed runs per variant (median reported)")
    args = parser.parse_args()
    store, titles, rows = corpus_store(50)
    question = rows[0]["question"]
    print(f"corpus: {store.count_documents()} paragraphs; question: {question!r}\n")
    header = f"{'N':>3}  {'variant':<28} {'overhead/iter (ms)':>19} {'wall/iter (ms)':>15} {'x Agent':>8} {'x bare':>7}"
    print(header)
    print("-" * len(header))
    for n in args.iterations:
        queries = titles[1:n]  # N-1 searches
        results = []

        # haystack-agentic loop pipeline
        llm = ScriptedChatGenerator(script(queries, {"tool_calls": [{"tool_name": "answer", "arguments": {"text": "x"}}]}))
        retriever = InMemoryBM25Retriever(store)
        timer = timed_parts(llm, retriever)
        pipeline = build_loop_pipeline(
            AgenticRouter(chat_generator=llm), retriever, controller=LoopController(max_iterations=n + 1, chunk_cap=30)
        )
        pipeline.warm_up()
        inputs = {"controller": {"query": question}}

        def ours():
            result = pipeline.run(inputs)["result"]["result"]
            assert result["terminated_by"] == "answered" and result["iterations"] == n, result["terminated_by"]

        results.append(bench("haystack-agentic run", ours, timer, llm, n, args.runs))
        loop = asyncio.new_event_loop()
        results.append(
            bench("haystack-agentic run_async", lambda: loop.run_until_complete(pipeline.run_async(inputs)), timer, llm, n, args.runs)
        )

        # haystack Agent with the same tool calls
        llm = ScriptedChatGenerator(script(queries, {"text": "x"}))
        retriever = InMemoryBM25Retriever(store)
        timer = timed_parts(llm, retriever)

        def search(query: str, top_k: int = 5) -> str:
            return FORMATTER.format_search_result(query, retriever.run(query=query, top_k=top_k)["documents"])

        async def search_async(query: str, top_k: int = 5) -> str:
            docs = (await retriever.run_async(query=query, top_k=top_k))["documents"]
            return FORMATTER.format_search_result(query, docs)

        params = {
            "type": "object",
            "properties": {"query": {"type": "string"}, "top_k": {"type": "integer"}},
            "required": ["query"],
        }
        tool = Tool(name="search", description="Search the corpus.", parameters=params, function=search)
        agent = Agent(chat_generator=llm, tools=[tool], system_prompt="Answer with the search tool.")
        agent.warm_up()
        messages = [ChatMessage.from_user(question)]
        results.append(bench("haystack Agent run", lambda: agent.run(messages=messages), timer, llm, n, args.runs))
        tool_async = Tool(
            name="search", description="Search the corpus.", parameters=params, function=search, async_function=search_async
        )
        agent_async = Agent(chat_generator=llm, tools=[tool_async], system_prompt="Answer with the search tool.")
        agent_async.warm_up()
        try:
            results.append(
                bench(
                    "haystack Agent run_async",
                    lambda: loop.run_until_complete(agent_async.run_async(messages=messages)),
                    timer,
                    llm,
                    n,
                    args.runs,
                )
            )
        except Exception as exc:  # noqa: BLE001 - report and go on
            print(f"(haystack Agent run_async with an async tool failed: {type(exc).__name__}: {exc})")

        # bare Python loop: the floor
        llm = ScriptedChatGenerator(script(queries, {"text": "x"}))
        retriever = InMemoryBM25Retriever(store)
        timer = timed_parts(llm, retriever)
        tools = [tool]

        def bare():
            conversation = [ChatMessage.from_system("Answer with the search tool."), ChatMessage.from_user(question)]
            while True:
                reply = llm.run(messages=conversation, tools=tools)["replies"][0]
                conversation.append(reply)
                if not reply.tool_calls:
                    return reply.text
                for call in reply.tool_calls:
                    docs = retriever.run(query=call.arguments["query"], top_k=call.arguments.get("top_k", 5))["documents"]
                    text = FORMATTER.format_search_result(call.arguments["query"], docs)
                    conversation.append(ChatMessage.from_tool(tool_result=text, origin=call))

        results.append(bench("bare loop", bare, timer, llm, n, args.runs))
        loop.close()

        agent_ms = {"run": results[2]["overhead_ms"]}
        if len(results) == 5:
            agent_ms["run_async"] = results[3]["overhead_ms"]
        bare_ms = results[-1]["overhead_ms"]
        for r in results:
            kind = "run_async" if r["name"].endswith("run_async") else "run"
            x_agent = r["overhead_ms"] / agent_ms.get(kind, agent_ms["run"])
            print(
                f"{n:>3}  {r['name']:<28} {r['overhead_ms']:>19.3f} {r['wall_ms']:>15.3f} {x_agent:>8.2f} "
                f"{r['overhead_ms'] / bare_ms:>7.1f}"
            )
        print()


if __name__ == "__main__":
    main()
