# SPDX-License-Identifier: Apache-2.0
"""
Cost growth: controller prompt tokens per turn and per question as the number of turns grows from 1 to 20, and the
evidence recall of a policy that follows what it is shown, with and without result digests (issue 12, goal 4).

Each run makes N-1 searches (distinct HotpotQA titles as queries, top_k=5, over ~500 paragraphs in memory) and
then answers (N LLM calls), with a `ScriptedChatGenerator` that reports prompt tokens as characters / 4 of the
messages it is sent (tool schemas, identical for `tools` and `naive`, are not counted). Our loop runs as shipped: its
router first searches the question itself, with no LLM call, so its first prompt already holds those results
(`naive` does not search the question). Compared:

- `tools`: `AgenticRouter(mode="tools")` in our loop, as shipped: every search result older than the latest reply
  is sent as a digest (short ids, titles, first words), a chunk shown before is referenced, not resent, and the
  model reads a chunk in full with `read_chunk(id)` (`haystack_agentic.llm.result_digests`).
- `full`: the same with `result_digests=False`: every search result stays whole (each chunk cut at
  `LoopController.chunk_preview_chars`, 1500 characters) until the context budget compacts it.
- `json`: `AgenticRouter(mode="json")`: a fresh prompt each turn with the accumulated chunks (capped at
  `chunk_cap`, default here 30; each cut at 600 characters) and the step history.
- `naive`: a bare loop that appends every full search result to the conversation (the same generator and tools).

"turn N" is the prompt of the N-th (last) call; "question" is the sum over the run. The target: `tools` per question
at 10 turns <= 0.5x `naive`. Then both per-turn curves of one `--curve-turns` run (the prompt of each call).

Recall (`--recall-questions`, default all 360 of the shared sample): a title-following policy (search the question,
then each turn the title it was shown most often, among the tool results in the prompt it is sent, not searched
yet; answer after `--recall-turns` turns) over the paragraphs of all sample questions, same `chunk_cap`. Evidence
recall: the share of a question's gold supporting titles that have a chunk among the run's final chunks.
`--tokens conservative` counts with the loop's own estimate (`haystack_agentic.llm.tokens.CONSERVATIVE`: a digit or
punctuation mark is a token) instead of characters / 4.
Run: `python benchmarks/cost_growth.py [--max-turns 20] [--chunk-cap 30] [--recall-questions 360] [--tokens chars]`
"""

import argparse
import inspect
import itertools
import json
import re
from collections import Counter

from _common import DATA, corpus_store
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.dataclasses import ChatMessage
from scripted_chat_generator import ScriptedChatGenerator

from haystack_agentic import AgenticRouter, Answerer, LoopController, build_loop_pipeline
from haystack_agentic.document_stores.sparse_bm25_document_store import SparseBM25DocumentStore
from haystack_agentic.indexing.hotpotqa import hotpotqa_documents, load_hotpotqa_questions
from haystack_agentic.llm.loop_tools import builtin_tools

#: The target ratio of `tools` to `naive` prompt tokens per question at 10 turns.
TARGET_RATIO = 0.5
#: A title as the tool results show it: `title=<title>` up to the end of the line, a digest's ": ", or a marker.
_TITLE = re.compile(r"title=(.*?)(?: \[already shown\]| \[shown earlier\]|: |$)", re.MULTILINE)


def _router(llm, mode: str, digests: bool) -> AgenticRouter:
    # `result_digests` is new (issue 12): run against an older checkout, the benchmark measures its behaviour.
    # The router runs as shipped: its first search is the question (no LLM call), then the script's searches.
    parameters = inspect.signature(AgenticRouter.__init__).parameters
    options = {"result_digests": digests}
    return AgenticRouter(
        chat_generator=llm,
        mode=mode,
        default_top_k=5,
        **{name: value for name, value in options.items() if name in parameters},
    )


def _pipeline(store, llm, mode: str, digests: bool, max_iterations: int, chunk_cap: int):
    return build_loop_pipeline(
        _router(llm, mode, digests),
        InMemoryBM25Retriever(store),
        controller=LoopController(max_iterations=max_iterations, chunk_cap=chunk_cap),
        answerer=Answerer(chat_generator=ScriptedChatGenerator([{"text": "x"}], per_call=True)),
        check_evidence=False,  # the controller's prompts are measured, not whether the evidence suffices
    )


def loop_run(store, question: str, queries: list[str], mode: str, chunk_cap: int, digests: bool = True) -> list[int]:
    if mode == "tools":
        turns = [{"tool_calls": [{"tool_name": "search", "arguments": {"query": q, "top_k": 5}}]} for q in queries]
        turns.append({"tool_calls": [{"tool_name": "answer", "arguments": {"text": "x"}}]})
        llm = ScriptedChatGenerator(turns, per_call=True)  # by call: the free first search is a turn with no call
    else:
        turns = [{"text": json.dumps({"action": "search", "query": q, "reasoning": "need more"})} for q in queries]
        turns.append({"text": json.dumps({"action": "generate", "reasoning": "enough"})})
        llm = ScriptedChatGenerator(turns, per_call=True)
    n = len(queries) + 1
    pipeline = _pipeline(store, llm, mode, digests, n + 2, chunk_cap)  # n calls, the free search, room to spare
    result = pipeline.run({"controller": {"query": question}})["result"]
    assert result["terminated_by"] == "answered", result
    return _prompts(llm)


#: How prompt tokens are counted: "chars" (message characters // 4, what `ScriptedChatGenerator` reports) or
#: "conservative" (`haystack_agentic.llm.tokens.CONSERVATIVE`, the loop's own estimate, which does not undercount).
COUNTING = {"how": "chars"}


def _prompts(llm: ScriptedChatGenerator) -> list[int]:
    """Prompt tokens of each call the generator got (it records (messages, kwargs, tools)); schemas not counted."""
    from scripted_chat_generator import message_chars

    from haystack_agentic.llm.tokens import CONSERVATIVE

    if COUNTING["how"] == "conservative":
        return [CONSERVATIVE.count(messages) for messages, _kwargs, _tools in llm.calls]
    return [sum(message_chars(m) for m in messages) // 4 for messages, _kwargs, _tools in llm.calls]


def naive_run(store, question: str, queries: list[str]) -> list[int]:
    retriever = InMemoryBM25Retriever(store)
    turns = [{"tool_calls": [{"tool_name": "search", "arguments": {"query": q, "top_k": 5}}]} for q in queries]
    llm = ScriptedChatGenerator([*turns, {"text": "x"}])
    tools = builtin_tools(20)
    conversation = [ChatMessage.from_system("Answer with the search tool."), ChatMessage.from_user(question)]
    while True:
        reply = llm.run(messages=conversation, tools=tools)["replies"][0]
        conversation.append(reply)
        if not reply.tool_calls:
            return _prompts(llm)
        for call in reply.tool_calls:
            docs = retriever.run(query=call.arguments["query"], top_k=5)["documents"]
            text = "\n\n".join(f"{d.meta.get('title')}\n{d.content}" for d in docs)
            conversation.append(ChatMessage.from_tool(tool_result=text, origin=call))


class TitleFollower(ScriptedChatGenerator):
    """
    A controller that acts on what it is sent: it searches the question (unless the router did, with no LLM call),
    then each turn the title shown most often (first shown first on ties) in the tool results of its prompt that it
    has not searched yet; it answers at the last of `turns` turns or when no title is left.
    """

    def __init__(self, turns: int) -> None:
        super().__init__([{"text": "x"}])
        self.turns = turns

    def _next_turn(self, messages, generation_kwargs, tools):
        messages = list(messages)
        with self._lock:
            self.calls.append((messages, generation_kwargs, tools))
        index = sum(1 for m in messages if m.is_from("assistant"))
        searched = {c.arguments.get("query") for m in messages for c in m.tool_calls if c.tool_name == "search"}
        question = next(m.text for m in messages if m.is_from("user"))
        shown = Counter(t.strip() for m in messages for r in m.tool_call_results for t in _TITLE.findall(r.result))
        order = {title: i for i, title in enumerate(reversed(list(shown)))}
        ranked = sorted((t for t in shown if t not in searched), key=lambda t: (-shown[t], -order[t]))
        query = question if index == 0 else (ranked[0] if ranked else None)
        if index >= self.turns - 1 or query is None:
            return {"tool_calls": [{"tool_name": "answer", "arguments": {"text": "x"}}]}, index
        return {"tool_calls": [{"tool_name": "search", "arguments": {"query": query, "top_k": 5}}]}, index


def recall_runs(questions: int, turns: int, chunk_cap: int, digests: bool) -> tuple[float, float, float]:
    """Evidence recall (mean over questions), prompt tokens per question and at the last turn (means)."""
    rows = load_hotpotqa_questions(DATA)
    # BM25 over a sparse matrix: the same results as InMemoryDocumentStore (same recall and tokens on 20 questions
    # here), ~13x faster for this run (3,572 chunks: 1.8 s a question with InMemoryDocumentStore, 0.14 s with it).
    store = SparseBM25DocumentStore(index=f"recall-{len(rows)}")  # stores of one index share their documents
    if not store.count_documents():
        store.write_documents(hotpotqa_documents(rows, title_in_content=True))
    recalls, totals, lasts = [], [], []
    for row in rows[:questions]:
        llm = TitleFollower(turns)
        result = _pipeline(store, llm, "tools", digests, turns + 1, chunk_cap).run(
            {"controller": {"query": row["question"]}}
        )["result"]
        gold = {title for title, _ in row["supporting_facts"]}
        found = {d.meta.get("title") for d in result["documents"]}
        recalls.append(len(gold & found) / len(gold))
        prompts = _prompts(llm)
        totals.append(sum(prompts))
        lasts.append(prompts[-1])
    n = len(recalls)
    return sum(recalls) / n, sum(totals) / n, sum(lasts) / n


def _curve(name: str, prompts: list[int]) -> str:
    steps = [b - a for a, b in itertools.pairwise(prompts)]
    return (
        f"{name:>6}: "
        + " ".join(f"{p:>6}" for p in prompts)
        + "\n"
        + f"{'+turn':>6}:        "
        + " ".join(f"{d:>6}" for d in steps)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--max-turns", type=int, default=20)
    parser.add_argument("--chunk-cap", type=int, default=30)
    parser.add_argument("--curve-turns", type=int, default=20, help="turns of the run whose per-turn curves print")
    parser.add_argument("--recall-questions", type=int, default=360, help="0: skip the recall runs")
    parser.add_argument("--recall-turns", type=int, default=10)
    parser.add_argument(
        "--tokens",
        choices=("chars", "conservative"),
        default="chars",
        help="chars: characters / 4 (default); conservative: the loop's own token estimate",
    )
    args = parser.parse_args()
    COUNTING["how"] = args.tokens
    store, titles, rows = corpus_store(50)
    question = rows[0]["question"]
    print(
        f"corpus: {store.count_documents()} paragraphs, chunk_cap {args.chunk_cap}, top_k 5 per search, "
        f"tokens counted as {args.tokens}\n"
    )
    header = (
        f"{'turns':>5} | {'turn N prompt tokens: tools':>28} {'full':>7} {'json':>7} {'naive':>7} | "
        f"{'per question: tools':>20} {'full':>8} {'json':>8} {'naive':>8} {'tools/naive':>11}"
    )
    print(header)
    print("-" * len(header))
    at_ten = None
    for n in range(1, args.max_turns + 1):
        queries = titles[1:n]
        tools = loop_run(store, question, queries, "tools", args.chunk_cap)
        full = loop_run(store, question, queries, "tools", args.chunk_cap, digests=False)
        js = loop_run(store, question, queries, "json", args.chunk_cap)
        naive = naive_run(store, question, queries)
        ratio = sum(tools) / sum(naive)
        at_ten = ratio if n == 10 else at_ten
        print(
            f"{n:>5} | {tools[-1]:>28} {full[-1]:>7} {js[-1]:>7} {naive[-1]:>7} | "
            f"{sum(tools):>20} {sum(full):>8} {sum(js):>8} {sum(naive):>8} {ratio:>11.2f}"
        )
    if at_ten is not None:
        verdict = "met" if at_ten <= TARGET_RATIO else "NOT met"
        print(
            f"\nratio at 10 turns, tools / naive prompt tokens per question: {at_ten:.2f} "
            f"(target <= {TARGET_RATIO:.2f}: {verdict})"
        )
    queries = titles[1 : args.curve_turns]
    print(
        f"\nper-turn prompt tokens of one {args.curve_turns}-turn run (the prompt of call 1, 2, ...; "
        "+turn: growth from the previous call)"
    )
    print(_curve("tools", loop_run(store, question, queries, "tools", args.chunk_cap)))
    print(_curve("naive", naive_run(store, question, queries)))
    if args.recall_questions:
        print(
            f"\nevidence recall: title-following policy, {args.recall_turns} turns, chunk_cap {args.chunk_cap}, "
            f"first {args.recall_questions} questions of the sample"
        )
        for name, digests in (("digests", True), ("full", False)):
            recall, total, last = recall_runs(args.recall_questions, args.recall_turns, args.chunk_cap, digests)
            print(
                f"{name:>8}: recall {recall:.4f}, prompt tokens per question {total:,.0f}, at the last turn {last:,.0f}"
            )


if __name__ == "__main__":
    main()
