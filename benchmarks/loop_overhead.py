# SPDX-License-Identifier: Apache-2.0
"""
Loop overhead: time per iteration spent OUTSIDE the LLM and the retriever.

The same N turns (N-1 searches, top_k=5: the question, then distinct titles; then an answer) are made three ways,
with a zero-latency `ScriptedChatGenerator` and an `InMemoryBM25Retriever` over ~500 HotpotQA paragraphs:

- `haystack-agentic`: our loop pipeline (LoopController -> AgenticRouter (tools mode) -> retriever -> ...),
  `Pipeline.run` and `Pipeline.run_async`, without the evidence check (the Agent has none; one MiniLM check costs
  ~150-300 ms CPU a run, see `benchmarks/evidence_check.py speed`); as shipped, its router searches the question
  first with no LLM call, so it makes N-1 LLM calls where the others make N;
- `haystack Agent`: `haystack.components.agents.Agent` with a `search` tool calling the same retriever (the last
  turn is a text reply, which ends an Agent run), `run` and `run_async`;
- `bare loop`: a Python loop calling the generator and the retriever and appending messages (the floor).

Time inside the generator's and the retriever's `run`/`run_async` is measured by timers wrapped around them and
subtracted from each run's wall time; the rest divided by N is the overhead per iteration (the same is done with
process CPU time: `CPU/iter`, less sensitive to other processes on a shared machine). The variants run
interleaved (one run of each in turn, the order rotating), so load from other processes hits them alike; median
of R runs after warm-up runs. The ratio to Haystack's Agent in the same mode is the figure (target <= 1.0).

Run: `python benchmarks/loop_overhead.py [--iterations 5 10] [--runs 50]`
"""

import argparse
import asyncio
import os
import statistics
import time

from _common import Timer, corpus_store
from haystack.components.agents import Agent
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.dataclasses import ChatMessage
from haystack.tools import Tool
from scripted_chat_generator import ScriptedChatGenerator

from haystack_agentic import AgenticRouter, LoopController, build_loop_pipeline

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


class Variant:
    """One way of running the same scripted turns, with the timers around its LLM and retriever."""

    def __init__(self, name: str, run_once, timer: Timer, llm, iterations: int, calls: int | None = None) -> None:
        self.name, self.run_once, self.timer, self.llm, self.iterations = name, run_once, timer, llm, iterations
        self.calls = iterations if calls is None else calls  # LLM calls of a run
        self.overheads: list[float] = []
        self.cpu: list[float] = []
        self.walls: list[float] = []

    def measure(self, keep: bool) -> None:
        """Run once; keep the wall, the overhead (wall minus LLM and retriever time) and process CPU, per turn."""
        self.llm.reset()
        self.timer.reset()
        cpu_start, start = time.process_time(), time.perf_counter()
        self.run_once()
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu_start
        assert len(self.llm.calls) == self.calls, f"{self.name}: {len(self.llm.calls)} LLM calls"
        if keep:
            n = self.iterations
            self.walls.append(wall / n)
            self.overheads.append((wall - self.timer.seconds) / n)
            self.cpu.append((cpu - self.timer.cpu_seconds) / n)

    def median_ms(self, what: str = "overheads") -> float:
        return 1000 * statistics.median(getattr(self, what))


def run_interleaved(variants: list["Variant"], runs: int, warm: int = 5) -> None:
    """Alternate the variants run by run (rotating the order), so load from other processes hits all alike."""
    for i in range(warm + runs):
        shift = i % len(variants)
        for variant in variants[shift:] + variants[:shift]:
            variant.measure(keep=i >= warm)


def build_variants(store, titles: list[str], question: str, n: int) -> list[Variant]:
    queries = [question, *titles[1 : n - 1]]  # N-1 searches
    loop = asyncio.new_event_loop()
    variants = []

    # haystack-agentic loop pipeline: the router's free first search is the question, the script makes the others
    answer = {"tool_calls": [{"tool_name": "answer", "arguments": {"text": "x"}}]}
    llm = ScriptedChatGenerator(script(queries[1:], answer), per_call=True)  # by call: the free search has none
    retriever = InMemoryBM25Retriever(store, top_k=5)
    timer = timed_parts(llm, retriever)
    pipeline = build_loop_pipeline(
        AgenticRouter(chat_generator=llm),
        retriever,
        controller=LoopController(max_iterations=n + 1, chunk_cap=30),
        check_evidence=False,  # the Agent has no evidence check; its cost is measured by benchmarks/evidence_check.py
    )
    pipeline.warm_up()
    inputs = {"controller": {"query": question}}

    def ours():
        result = pipeline.run(inputs)["result"]
        assert result["terminated_by"] == "answered" and result["iterations"] == n, result["terminated_by"]

    variants.append(Variant("haystack-agentic run", ours, timer, llm, n, calls=n - 1))
    variants.append(
        Variant(
            "haystack-agentic run_async",
            lambda: loop.run_until_complete(pipeline.run_async(inputs)),
            timer,
            llm,
            n,
            calls=n - 1,
        )
    )

    # haystack Agent with the same tool calls (its own retriever: the closures below must not see another's)
    llm = ScriptedChatGenerator(script(queries, {"text": "x"}))
    agent_retriever = InMemoryBM25Retriever(store)
    timer = timed_parts(llm, agent_retriever)

    def search(query: str, top_k: int = 5) -> str:
        return FORMATTER.format_search_result(query, agent_retriever.run(query=query, top_k=top_k)["documents"])

    async def search_async(query: str, top_k: int = 5) -> str:
        docs = (await agent_retriever.run_async(query=query, top_k=top_k))["documents"]
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
    variants.append(Variant("haystack Agent run", lambda: agent.run(messages=messages), timer, llm, n))
    tool_async = Tool(
        name="search", description="Search the corpus.", parameters=params, function=search, async_function=search_async
    )
    agent_async = Agent(chat_generator=llm, tools=[tool_async], system_prompt="Answer with the search tool.")
    agent_async.warm_up()
    variants.append(
        Variant(
            "haystack Agent run_async",
            lambda: loop.run_until_complete(agent_async.run_async(messages=messages)),
            timer,
            llm,
            n,
        )
    )

    # bare Python loop: the floor
    llm = ScriptedChatGenerator(script(queries, {"text": "x"}))
    retriever = InMemoryBM25Retriever(store)
    timer = timed_parts(llm, retriever)

    def bare():
        conversation = [ChatMessage.from_system("Answer with the search tool."), ChatMessage.from_user(question)]
        while True:
            reply = llm.run(messages=conversation, tools=[tool])["replies"][0]
            conversation.append(reply)
            if not reply.tool_calls:
                return reply.text
            for call in reply.tool_calls:
                docs = retriever.run(query=call.arguments["query"], top_k=call.arguments.get("top_k", 5))["documents"]
                text = FORMATTER.format_search_result(call.arguments["query"], docs)
                conversation.append(ChatMessage.from_tool(tool_result=text, origin=call))

    variants.append(Variant("bare loop", bare, timer, llm, n))
    return variants


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--iterations", type=int, nargs="+", default=[5, 10], help="turns per run (searches, answer)")
    parser.add_argument("--runs", type=int, default=50, help="timed runs per variant (median reported)")
    args = parser.parse_args()
    if min(args.iterations) < 2:
        parser.error("--iterations: at least 2 (the question's search, then the answer)")
    store, titles, rows = corpus_store(50)
    question = rows[0]["question"]
    print(f"corpus: {store.count_documents()} paragraphs; question: {question!r}")
    print(f"machine: {os.cpu_count()} CPUs, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} at start\n")
    header = (
        f"{'N':>3}  {'variant':<28} {'overhead/iter (ms)':>19} {'CPU/iter (ms)':>14} {'wall/iter (ms)':>15}"
        f" {'x Agent':>8} {'x Agent CPU':>12} {'target':>7}"
    )
    print(header)
    print("-" * len(header))
    verdicts = []
    for n in args.iterations:
        variants = build_variants(store, titles, question, n)
        run_interleaved(variants, args.runs)
        by_name = {v.name: v for v in variants}
        for v in variants:
            kind = "run_async" if v.name.endswith("run_async") else "run"
            agent = by_name[f"haystack Agent {kind}"]
            x_agent = v.median_ms() / agent.median_ms()
            x_cpu = v.median_ms("cpu") / agent.median_ms("cpu")
            target = "<= 1.0" if v.name.startswith("haystack-agentic") else ""
            print(
                f"{n:>3}  {v.name:<28} {v.median_ms():>19.3f} {v.median_ms('cpu'):>14.3f} {v.median_ms('walls'):>15.3f}"
                f" {x_agent:>8.2f} {x_cpu:>12.2f} {target:>7}"
            )
            if target:
                verdicts.append((n, v.name, x_agent))
        print()
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} at end")
    for n, name, ratio in verdicts:
        print(f"N={n} {name}: {ratio:.2f}x Agent (target <= 1.0x): {'met' if ratio <= 1.0 else 'NOT met'}")


if __name__ == "__main__":
    main()
