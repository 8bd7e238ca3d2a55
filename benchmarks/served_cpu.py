# SPDX-License-Identifier: Apache-2.0
"""
CPU a served question, in process, by part: ours, Haystack's own cost for ours' graph (the floor), and `Agent`.

What `benchmarks/serve_throughput.py` serves, without HTTP: the loop pipeline around the scripted LLM (search the
question, then answer; zero latency) over every shipped HotpotQA paragraph (BM25, sentence spans stored), each
question through `Pipeline.run_async` and `result_to_dict` as the hayhooks wrapper runs it, one question at a time;
and Haystack's `Agent` with the same scripted LLM and retriever as a `ComponentTool`, as that benchmark serves it.

- **ours**: process CPU per question, questions never asked before (their chunks not cached);
- **floor**: the same pipeline with every component replaying the outputs it gave for one recorded question (its
  own work is zero; Haystack still schedules the same 8 component runs and copies the same inputs and outputs):
  what Haystack costs for this graph and these outputs (components that output less would lower it; the recorded
  question's result is near the median size);
- **floor, one-leaf result**: the floor with the result component replaying one value per output instead of the
  recorded result: the share of the floor that is Haystack copying the result's values one by one;
- **Agent**: the whole question (its LLM call, its tool call through `ToolInvoker`, the retriever).

Runs are interleaved (one batch of each in turn); the medians and the ratios to the Agent are the figures. Parts
of ours (`--parts`, a separate pass) come from `_common.Timer`s (process CPU, so the BM25 search in the store's
executor thread counts for the retriever) around each component and around Haystack's copies.

Run: `python benchmarks/served_cpu.py [--questions 40] [--runs 5] [--parts]`
"""

import argparse
import asyncio
import collections
import gc
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import haystack.core.pipeline.pipeline as haystack_pipeline
from _common import Timer, corpus_store
from haystack.components.agents import Agent
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.dataclasses import ChatMessage
from haystack.tools import ComponentTool
from scripted_chat_generator import ScriptedChatGenerator
from serve_throughput import AGENT_SCRIPT, scripted_loop_yaml

from haystack_agentic.components.loop.loop_result_builder import result_to_dict
from haystack_agentic.components.preprocessors.sentence_span_annotator import SentenceSpanAnnotator
from haystack_agentic.components.retrievers.safe_retriever import SafeRetriever
from haystack_agentic.document_stores.sparse_bm25_document_store import SparseBM25DocumentStore
from haystack_agentic.serving.agentic_loop_wrapper import load_served_pipeline


class Replay:
    """Each component of `pipeline` answers with the outputs it gave, visit by visit, for one recorded question."""

    def __init__(self, pipeline: Any, question: str, loop: asyncio.AbstractEventLoop) -> None:
        self.pipeline, self.recorded, self.visits = pipeline, collections.defaultdict(list), collections.Counter()
        self.real = {name: instance.run_async for name, instance in pipeline.graph.nodes(data="instance")}
        for name, run_async in self.real.items():
            self._set(name, self._recording(name, run_async))
        loop.run_until_complete(pipeline.run_async({"controller": {"query": question}}))
        self.use_real()

    def _set(self, name: str, run_async: Any) -> None:
        self.pipeline.get_component(name).__dict__["run_async"] = run_async  # shadows the class's method

    def _recording(self, name: str, run_async: Any) -> Any:
        async def record(**inputs: Any) -> Any:
            outputs = await run_async(**inputs)
            self.recorded[name].append(outputs)
            return outputs

        return record

    def use_real(self) -> None:
        for name, run_async in self.real.items():
            self._set(name, run_async)

    def use_replay(self, one_leaf_result: bool = False) -> None:
        for name in self.real:
            recorded = self.recorded[name]
            if one_leaf_result and name == "result":
                recorded = [dict.fromkeys(outputs, "x") for outputs in recorded]
            self._set(name, self._replaying(name, recorded))

    def _replaying(self, name: str, recorded: list[Any]) -> Any:
        async def replay(**_: Any) -> Any:
            self.visits[name] += 1
            return recorded[self.visits[name] - 1]

        return replay


def build(store: Any, store_dir: Path) -> tuple[Any, Agent]:
    """The served loop pipeline and the Agent, over `store`'s paragraphs (sentence spans stored)."""
    documents = SentenceSpanAnnotator().run(documents=store.filter_documents())["documents"]
    sparse = SparseBM25DocumentStore(index="served-cpu")
    sparse.write_documents(documents)
    sparse.save_to_disk(str(store_dir / "store.json"))
    (store_dir / "loop.yml").write_text(scripted_loop_yaml(0.0))
    pipeline = load_served_pipeline(store_dir / "loop.yml", store_path=store_dir / "store.json")
    retriever = SafeRetriever(InMemoryBM25Retriever(sparse, top_k=5))
    tool = ComponentTool(component=retriever, name="search", description="Search the corpus.")
    agent = Agent(chat_generator=ScriptedChatGenerator(AGENT_SCRIPT, latency=0.0), tools=[tool])
    agent.warm_up()
    return pipeline, agent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=int, default=40, help="Questions a batch (default 40).")
    parser.add_argument("--runs", type=int, default=5, help="Batches of each variant (default 5).")
    parser.add_argument("--parts", action="store_true", help="Then one more batch of ours, timed by part.")
    args = parser.parse_args()
    store, _, rows = corpus_store(questions=100_000)  # every paragraph of the shipped sample
    questions = [row["question"] for row in rows]
    needed = 1 + args.questions * (args.runs + 1 + int(args.parts))
    if needed > len(questions):
        parser.error(f"--questions x (--runs + 1 + --parts) must be below {len(questions)} (each ours' are new)")
    # the served YAML names the scripted LLM, which the server is told to trust the same way (`serve_throughput.py`)
    os.environ["HAYSTACK_DESERIALIZATION_ALLOWLIST"] = ScriptedChatGenerator.__module__
    pipeline, agent = build(store, Path(tempfile.mkdtemp(prefix="served-cpu-")))
    loop = asyncio.new_event_loop()
    replay = Replay(pipeline, questions[0], loop)
    batches = iter(questions[i : i + args.questions] for i in range(1, needed, args.questions))

    async def ours(batch: list[str]) -> None:
        for question in batch:
            result_to_dict((await pipeline.run_async({"controller": {"query": question}}))["result"])

    async def floor(batch: list[str]) -> None:
        for question in batch:
            replay.visits.clear()
            await pipeline.run_async({"controller": {"query": question}})

    async def haystack_agent(batch: list[str]) -> None:
        for question in batch:
            result = await agent.run_async(messages=[ChatMessage.from_user(question)])
            envelope = {"result": {"answer": result["last_message"].text}}  # what the served Agent returns
            assert envelope["result"]["answer"], envelope

    variants = {
        "ours": (ours, replay.use_real),
        "floor": (floor, replay.use_replay),
        "floor, one-leaf result": (floor, lambda: replay.use_replay(one_leaf_result=True)),
        "Agent": (haystack_agent, replay.use_real),
    }
    gc.collect()
    gc.freeze()  # as the served app does (`serving/app.py`): no full collection of the start-up objects mid-run
    warm_up = next(batches)  # first-call costs (templates, the Agent's tool executor, caches of these questions)
    loop.run_until_complete(ours(warm_up))
    loop.run_until_complete(haystack_agent(warm_up))
    cpu: dict[str, list[float]] = {name: [] for name in variants}
    for run in range(args.runs):
        batch = next(batches)
        names = list(variants)[run % len(variants) :] + list(variants)[: run % len(variants)]  # order rotates
        for name in names:
            measured, prepare = variants[name]
            prepare()
            start = time.process_time()
            loop.run_until_complete(measured(batch))
            cpu[name].append(1000 * (time.process_time() - start) / len(batch))
    replay.use_real()
    agent_ms = statistics.median(cpu["Agent"])
    print(f"{store.count_documents()} paragraphs, scripted LLM (zero latency), one question at a time")
    print(f"{'variant':>24} {'CPU ms/q median':>16} {'x Agent':>8}  runs")
    for name, values in cpu.items():
        median = statistics.median(values)
        runs = " ".join(f"{value:.2f}" for value in values)
        print(f"{name:>24} {median:>16.2f} {median / agent_ms:>8.2f}  {runs}")
    floor_share = statistics.median(cpu["floor"]) / agent_ms
    print(f"goal: ours <= 1.5x Agent; the floor alone is {floor_share:.2f}x")
    if args.parts:
        print_parts(pipeline, loop, ours, next(batches))


def print_parts(pipeline: Any, loop: asyncio.AbstractEventLoop, ours: Any, batch: list[str]) -> None:
    """One batch of ours with timers around each component, `result_to_dict` and Haystack's copies."""
    timers = {f"component {name}": Timer() for name, _ in pipeline.graph.nodes(data="instance")}
    for name, _ in pipeline.graph.nodes(data="instance"):
        timers[f"component {name}"].wrap(pipeline.get_component(name), "run_async")
    timers["Haystack's copies (inputs, result)"] = Timer()
    timers["Haystack's copies (inputs, result)"].wrap(haystack_pipeline, "_deepcopy_with_exceptions")
    timers["result_to_dict"] = Timer()
    timers["result_to_dict"].wrap(sys.modules[__name__], "result_to_dict")  # the name `ours` looks up
    start = time.process_time()
    loop.run_until_complete(ours(batch))
    total = time.process_time() - start
    print(f"parts of ours ({len(batch)} new questions, {1000 * total / len(batch):.2f} ms/q):")
    for label, timer in sorted(timers.items(), key=lambda item: -item[1].cpu_seconds):
        print(f"  {label:>40} {1000 * timer.cpu_seconds / len(batch):6.2f} ms/q")
    rest = total - sum(timer.cpu_seconds for timer in timers.values())
    print(f"  {'the rest (scheduler, tasks, spans)':>40} {1000 * rest / len(batch):6.2f} ms/q")


if __name__ == "__main__":
    main()
