# SPDX-License-Identifier: Apache-2.0
"""
Cost growth: controller prompt tokens per turn and per question as the number of turns grows from 1 to 20.

Each run makes N-1 searches (distinct HotpotQA titles as queries, top_k=5, over ~500 paragraphs in memory) and
then answers, with a `ScriptedChatGenerator` that reports prompt tokens as characters / 4 of the messages it is
sent (tool schemas, identical for `tools` and `naive`, are not counted). Compared:

- `tools`: `AgenticRouter(mode="tools")` in our loop: the conversation carries every search result (each chunk
  cut at `LoopController.chunk_preview_chars`, 1500 characters).
- `json`: `AgenticRouter(mode="json")`: a fresh prompt each turn with the accumulated chunks (capped at
  `chunk_cap`, default here 30; each cut at 600 characters) and the step history.
- `naive`: a bare loop that appends every full search result to the conversation (the same generator and tools).

"turn N" is the prompt of the N-th (last) call; "question" is the sum over the run.
Run: `python benchmarks/cost_growth.py [--max-turns 20] [--chunk-cap 30]`
"""

import argparse
import json

from _common import corpus_store
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.dataclasses import ChatMessage

from haystack_agentic import AgenticRouter, Answerer, LoopController, build_loop_pipeline
from haystack_agentic.components.routers.agentic_router import _builtin_tools
from haystack_agentic.testing import ScriptedChatGenerator


def loop_run(store, question: str, queries: list[str], mode: str, chunk_cap: int) -> list[int]:
    if mode == "tools":
        turns = [{"tool_calls": [{"tool_name": "search", "arguments": {"query": q, "top_k": 5}}]} for q in queries]
        turns.append({"tool_calls": [{"tool_name": "answer", "arguments": {"text": "x"}}]})
        llm = ScriptedChatGenerator(turns)
    else:
        turns = [{"text": json.dumps({"action": "search", "query": q, "reasoning": "need more"})} for q in queries]
        turns.append({"text": json.dumps({"action": "generate", "reasoning": "enough"})})
        llm = ScriptedChatGenerator(turns, per_call=True)
    n = len(queries) + 1
    pipeline = build_loop_pipeline(
        AgenticRouter(chat_generator=llm, mode=mode, default_top_k=5),
        InMemoryBM25Retriever(store),
        controller=LoopController(max_iterations=n + 1, chunk_cap=chunk_cap),
        answerer=Answerer(chat_generator=ScriptedChatGenerator([{"text": "x"}], per_call=True)),
    )
    result = pipeline.run({"controller": {"query": question}})["result"]
    assert result["terminated_by"] == "answered", result
    return [m.meta["usage"]["prompt_tokens"] for m in _replies(llm)]


def _replies(llm: ScriptedChatGenerator):
    # The generator records (messages, kwargs, tools) per call; recompute its own estimate (message chars // 4).
    from haystack_agentic.testing.scripted_chat_generator import _message_chars

    out = []
    for messages, _kwargs, tools in llm.calls:
        chars = sum(_message_chars(m) for m in messages)
        out.append(ChatMessage.from_assistant("", meta={"usage": {"prompt_tokens": chars // 4}}))
    return out


def naive_run(store, question: str, queries: list[str]) -> list[int]:
    retriever = InMemoryBM25Retriever(store)
    turns = [{"tool_calls": [{"tool_name": "search", "arguments": {"query": q, "top_k": 5}}]} for q in queries]
    llm = ScriptedChatGenerator([*turns, {"text": "x"}])
    tools = _builtin_tools(20)
    conversation = [ChatMessage.from_system("Answer with the search tool."), ChatMessage.from_user(question)]
    prompts = []
    while True:
        reply = llm.run(messages=conversation, tools=tools)["replies"][0]
        prompts.append(reply.meta["usage"]["prompt_tokens"])
        conversation.append(reply)
        if not reply.tool_calls:
            return prompts
        for call in reply.tool_calls:
            docs = retriever.run(query=call.arguments["query"], top_k=5)["documents"]
            text = "\n\n".join(f"{d.meta.get('title')}\n{d.content}" for d in docs)
            conversation.append(ChatMessage.from_tool(tool_result=text, origin=call))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--max-turns", type=int, default=20)
    parser.add_argument("--chunk-cap", type=int, default=30)
    args = parser.parse_args()
    store, titles, rows = corpus_store(50)
    question = rows[0]["question"]
    print(f"corpus: {store.count_documents()} paragraphs, chunk_cap {args.chunk_cap}, top_k 5 per search\n")
    header = f"{'turns':>5} | {'turn N prompt tokens: tools':>28} {'json':>7} {'naive':>7} | {'per question: tools':>20} {'json':>8} {'naive':>8}"
    print(header)
    print("-" * len(header))
    for n in range(1, args.max_turns + 1):
        queries = titles[1:n]
        tools = loop_run(store, question, queries, "tools", args.chunk_cap)
        js = loop_run(store, question, queries, "json", args.chunk_cap)
        naive = naive_run(store, question, queries)
        print(
            f"{n:>5} | {tools[-1]:>28} {js[-1]:>7} {naive[-1]:>7} | {sum(tools):>20} {sum(js):>8} {sum(naive):>8}"
        )


if __name__ == "__main__":
    main()
