# SPDX-License-Identifier: Apache-2.0
"""The misbehaving-LLM policies of docs/robustness.md: retries, timeouts, empty and reasoning-only replies."""

import asyncio
import threading
import time

import httpx
import pytest
from conftest import actions, answer, search
from haystack import component
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.dataclasses import ChatMessage, ReasoningContent
from scripted_chat_generator import ScriptedChatGenerator

from haystack_agentic import AgenticRouter, FallbackSynthesizer, LoopController, build_loop_pipeline
from haystack_agentic.dataclasses.loop_state import LoopState
from haystack_agentic.grounding.citations import strip_markers
from haystack_agentic.llm.calls import call_generator, call_generator_async
from haystack_agentic.llm.retries import is_transient


class HTTPError(Exception):
    def __init__(self, status_code: int) -> None:
        super().__init__(f"HTTP {status_code}")
        self.status_code = status_code


@component
class FlakyGenerator:
    """Raises the given exceptions first, then answers "ok"; optionally sleeps per call."""

    def __init__(self, failures: list[BaseException], sleep: float = 0.0) -> None:
        self.failures = list(failures)
        self.sleep = sleep
        self.calls = 0

    @component.output_types(replies=list[ChatMessage])
    def run(self, messages: list[ChatMessage], generation_kwargs=None, tools=None):
        self.calls += 1
        time.sleep(self.sleep)
        if self.failures:
            raise self.failures.pop(0)
        return {"replies": [ChatMessage.from_assistant("ok")]}


@pytest.mark.parametrize(
    "exc, transient",
    [
        (TimeoutError("slow"), True),
        (ConnectionError("reset"), True),
        (httpx.ReadTimeout("read timed out"), True),  # a client library's own class, matched by isinstance
        (type("ReadTimeout", (Exception,), {})("only named like one"), False),
        (HTTPError(503), True),
        (HTTPError(429), True),
        (HTTPError(400), False),
        (ValueError("bad request"), False),
        (RuntimeError("wrapped"), False),
    ],
)
def test_is_transient(exc, transient):
    assert is_transient(exc) is transient


def test_a_cause_chain_is_inspected():
    try:
        try:
            msg = "inner"
            raise TimeoutError(msg)
        except TimeoutError as inner:
            msg = "Pipeline component failed"
            raise RuntimeError(msg) from inner
    except RuntimeError as outer:
        assert is_transient(outer)


def test_transient_failures_are_retried_with_backoff_then_succeed():
    generator = FlakyGenerator([TimeoutError("slow"), HTTPError(503)])
    call = call_generator(generator, LoopState(question="q"), "controller", [ChatMessage.from_user("q")], backoff=0.01)
    assert call.error is None and call.text == "ok"
    assert generator.calls == 3
    assert call.state.usage["controller"]["calls"] == 3  # every attempt counts


def test_retries_are_bounded_and_the_last_error_is_kept():
    generator = FlakyGenerator([TimeoutError(str(i)) for i in range(5)])
    call = call_generator(
        generator, LoopState(question="q"), "answer", [ChatMessage.from_user("q")], max_retries=2, backoff=0.01
    )
    assert generator.calls == 3 and isinstance(call.error, TimeoutError) and str(call.error) == "2"


def test_a_permanent_failure_is_not_retried():
    generator = FlakyGenerator([ValueError("bad request")])
    call = call_generator(generator, LoopState(question="q"), "answer", [ChatMessage.from_user("q")], backoff=0.01)
    assert generator.calls == 1 and isinstance(call.error, ValueError)


def test_timeout_sync_and_async():
    slow = FlakyGenerator([], sleep=0.5)
    call = call_generator(
        slow, LoopState(question="q"), "answer", [ChatMessage.from_user("q")], timeout=0.05, max_retries=0
    )
    assert isinstance(call.error, TimeoutError) and "0.05 s" in str(call.error)
    call = asyncio.run(
        call_generator_async(
            slow,
            LoopState(question="q"),
            "answer",
            [ChatMessage.from_user("q")],
            timeout=0.05,
            max_retries=1,
            backoff=0.01,
        )
    )
    assert isinstance(call.error, TimeoutError)


class OneSlotGenerator:
    """A local server with one slot: each call holds the slot until `release` is set; counts calls running at once."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.lock = threading.Lock()
        self.calls = self.running = self.most_at_once = 0

    def _enter(self) -> None:
        with self.lock:
            self.calls += 1
            self.running += 1
            self.most_at_once = max(self.most_at_once, self.running)

    def _leave(self) -> None:
        with self.lock:
            self.running -= 1

    def run(self, messages: list[ChatMessage], generation_kwargs=None, tools=None):
        self._enter()
        try:
            self.release.wait(10)
            return {"replies": [ChatMessage.from_assistant("ok")]}
        finally:
            self._leave()


class AsyncOneSlotGenerator(OneSlotGenerator):
    """The same with `run_async`."""

    async def run_async(self, messages: list[ChatMessage], generation_kwargs=None, tools=None):
        self._enter()
        try:  # cancelled at the time limit: the client closes the connection, the slot is free again
            await asyncio.sleep(10)
            return {"replies": [ChatMessage.from_assistant("ok")]}
        finally:
            self._leave()


def _slow_call(generator, run_async: bool):
    options = {"timeout": 0.1, "max_retries": 2, "backoff": 0.01}
    state, messages = LoopState(question="q"), [ChatMessage.from_user("q")]
    if run_async:
        return asyncio.run(call_generator_async(generator, state, "answer", messages, **options))
    return call_generator(generator, state, "answer", messages, **options)


@pytest.mark.parametrize("run_async", [False, True])
def test_a_call_abandoned_at_its_timeout_is_not_retried_while_it_still_runs(run_async):
    # A sync `run` cannot be stopped: a retry would be a second call beside it (a one-slot server queues both).
    generator = OneSlotGenerator()
    try:
        call = _slow_call(generator, run_async)
        assert isinstance(call.error, TimeoutError) and "0.1 s" in str(call.error)
        assert (generator.calls, generator.most_at_once, call.state.usage["answer"]["calls"]) == (1, 1, 1)
    finally:
        generator.release.set()


def test_a_cancelled_async_call_is_retried_one_at_a_time():
    # `run_async` overrunning is cancelled (nothing left running): its timeout is retried like any transient failure.
    generator = AsyncOneSlotGenerator()
    call = _slow_call(generator, run_async=True)
    assert isinstance(call.error, TimeoutError)
    assert (generator.calls, generator.most_at_once, call.state.usage["answer"]["calls"]) == (3, 1, 3)


@pytest.mark.integration  # the packaged MiniLM (the evidence check's embeddings)
def test_generator_that_keeps_failing_ends_the_run_with_error(store, monkeypatch):
    slept = []
    monkeypatch.setattr(time, "sleep", slept.append)  # keep the test fast; record backoffs
    generator = FlakyGenerator([ConnectionError("down")] * 10)
    router = AgenticRouter(chat_generator=generator, max_retries=2, timeout=None, search_question_first=False)
    result = build_loop_pipeline(router, InMemoryBM25Retriever(store)).run({"controller": {"query": "q"}})
    result = result["result"]
    assert result["terminated_by"] == "error" and "ConnectionError: down" in result["error"]
    assert generator.calls == 3
    assert result["usage"]["controller"]["calls"] == 3
    assert [s for s in slept if s] == [0.5, 1.0]  # exponential backoff from DEFAULT_BACKOFF (0 s: the fake LLM)


def test_reasoning_only_reply_is_an_empty_reply(build_loop):
    thinking = ChatMessage.from_assistant(reasoning=ReasoningContent(reasoning_text="Let me think..."))
    loop = build_loop([{"empty": True}, answer("Greenwich Village")])
    # Replace the first scripted turn with a reasoning-only reply.
    original_run = loop.llm.run

    def run(messages, generation_kwargs=None, tools=None, streaming_callback=None):
        if not any(m.role.value == "assistant" for m in messages):
            return {"replies": [thinking]}
        return original_run(messages, generation_kwargs=generation_kwargs, tools=tools)

    loop.llm.run = run
    result = loop.run()
    assert strip_markers(result["answer"]) == "Greenwich Village"
    assert result["tool_history"][0]["result"] == "empty reply (reasoning only)"


def test_blank_answer_twice_hands_over_to_the_fallback_with_the_chunks(build_loop):
    loop = build_loop(
        [search("Adriana Trigiani"), answer("   "), answer("")],
        fallback_script=[{"text": "Greenwich Village"}],
    )
    result = loop.run()
    assert actions(result) == ["search", "invalid", "search", "invalid"]  # a suggested search between them
    assert (result["terminated_by"], strip_markers(result["answer"])) == ("max_iterations", "Greenwich Village")
    assert len(loop.fallback_llm.calls) == 1


def test_one_empty_reply_then_an_answer_is_fine(build_loop):
    result = build_loop([{"empty": True}, answer("Greenwich Village")]).run()
    assert (result["terminated_by"], strip_markers(result["answer"])) == ("answered", "Greenwich Village")


def test_roles_serialise_retry_settings(allow_deserialization):
    router = AgenticRouter(chat_generator=ScriptedChatGenerator([{"text": "x"}]), max_retries=5, timeout=12.5)
    again = AgenticRouter.from_dict(router.to_dict())
    assert (again.max_retries, again.timeout) == (5, 12.5)
    fallback = FallbackSynthesizer.from_dict(FallbackSynthesizer(max_retries=0, timeout=1.0).to_dict())
    assert (fallback.max_retries, fallback.timeout) == (0, 1.0)
    assert LoopController().max_iterations == 10


# --- bad questions -----------------------------------------------------------------------------------------


def test_question_control_characters_are_removed_and_scripts_kept():
    controller = LoopController()
    state = controller.run(query="Who directed \x1b[2J\x1b[31mBig Stone Gap?\x00")["state"]
    assert state.question == "Who directed  [2J [31mBig Stone Gap?"
    for question in ("《石门》的导演住在纽约哪个区？", "من أخرج فيلم بيج ستون جاب؟", "Кто режиссёр?"):
        assert controller.run(query=question)["state"].question == question


def test_question_over_the_limit_is_a_clear_error():
    controller = LoopController(max_question_chars=50)
    with pytest.raises(ValueError, match="is 60 characters long; the limit is 50"):
        controller.run(query="x" * 60)
    assert controller.run(query="x" * 50)["state"].question == "x" * 50
    with pytest.raises(ValueError):
        LoopController(max_question_chars=0)


def test_non_latin_question_runs_through_the_loop(build_loop):
    result = build_loop([search("Adriana Trigiani"), answer("格林威治村")]).run(query="导演住在哪里？")
    assert (result["terminated_by"], strip_markers(result["answer"])) == ("answered", "格林威治村")


# --- context budget ------------------------------------------------------------------------------------------


def test_controller_prompt_stays_within_the_budget_however_many_searches(build_loop, store):
    from haystack import Document

    long_docs = [
        Document(id=f"long{i}", content=f"Paragraph {i}. " + "word " * 400, meta={"title": f"Long {i}"})
        for i in range(30)
    ]
    store.write_documents(long_docs)
    budget = 3000
    script = [search(f"Paragraph {i} word") for i in range(12)] + [answer("done")]
    loop = build_loop(script, max_iterations=14, chunk_cap=30, router_kwargs={"context_budget_tokens": budget})
    result = loop.run()
    assert result["terminated_by"] == "answered"
    from haystack_agentic.llm.tokens import CONSERVATIVE

    sizes = [CONSERVATIVE.count(messages, tools) for messages, _, tools in loop.llm.calls]
    assert max(sizes) <= budget
    last_prompt = loop.llm.calls[-1][0]
    results = [m.tool_call_result.result for m in last_prompt if m.tool_call_result]
    compacted = [r for r in results if r.startswith("[compacted to save context]")]
    assert compacted and "Chunk ids:" in compacted[0]
    assert len(results) == 12  # every search still answered in the conversation (digested, not dropped)


def test_format_chunks_leaves_out_the_lowest_ranks_first():
    from haystack import Document

    from haystack_agentic.llm.prompts import format_chunks

    docs = [Document(content="x" * 400) for _ in range(10)]
    text = format_chunks(docs, max_chars=1000, budget_tokens=250)  # 1000 characters
    assert text.startswith("[1] ") and "[2] " in text and "[3] " not in text
    assert len(format_chunks(docs[:1], max_chars=1000, budget_tokens=20)) <= 80


def test_several_tool_calls_run_in_order_and_answer_stops_the_rest(build_loop):
    from haystack.tools import Tool

    seen = []
    note = Tool(
        name="note",
        description="Take a note.",
        parameters={"type": "object", "properties": {}},
        function=lambda: seen.append("note") or "noted",
    )
    turn = {
        "tool_calls": [
            {"tool_name": "note", "arguments": {}},
            {"tool_name": "answer", "arguments": {"text": "Greenwich Village"}},
            {"tool_name": "search", "arguments": {"query": "never run"}},
        ]
    }
    loop = build_loop([turn], router_kwargs={"tools": [note]})
    result = loop.run()
    assert seen == ["note"]
    assert (result["terminated_by"], strip_markers(result["answer"]), result["iterations"]) == (
        "answered",
        "Greenwich Village",
        1,
    )
    assert actions(result) == ["tool", "answer"]  # the search after the answer never ran
    assert result["documents"] == []


# --- failing stores ----------------------------------------------------------------------------------------


@component
class FlakyRetriever:
    """Fails for the queries in `failing`, sleeps `sleep` seconds for "slow", answers the rest from a store."""

    def __init__(self, store, failing: set[str], sleep: float = 0.0) -> None:
        self.inner = InMemoryBM25Retriever(store)
        self.failing = failing
        self.sleep = sleep

    @component.output_types(documents=list)
    def run(self, query: str, filters: dict | None = None, top_k: int | None = None):
        if query in self.failing:
            msg = f"store down for {query!r}"
            raise ConnectionError(msg)
        if query == "slow":
            time.sleep(self.sleep)
        return self.inner.run(query=query, filters=filters, top_k=top_k)


def _safe_loop(store, script, failing, **controller_kwargs):
    from haystack_agentic.components.retrievers.safe_retriever import SafeRetriever

    llm = ScriptedChatGenerator(script)
    retriever = SafeRetriever(FlakyRetriever(store, failing, sleep=0.5), timeout=0.1)
    return build_loop_pipeline(  # store failures, not evidence, are under test here
        AgenticRouter(chat_generator=llm, search_question_first=False),
        retriever,
        controller=LoopController(**controller_kwargs),
        check_evidence=False,
    )


def test_consecutive_search_failures_end_the_run_with_error(store):
    script = [search("a"), search("b"), search("c"), answer("never")]
    pipeline = _safe_loop(store, script, failing={"a", "b", "c"}, max_search_failures=3)
    result = pipeline.run({"controller": {"query": "q"}})["result"]
    assert result["terminated_by"] == "error"
    assert "3 searches failed in a row" in result["error"] and "store down for 'c'" in result["error"]
    assert [s["result"] for s in result["tool_history"]][:3] == [
        f"search failed: ConnectionError: store down for {q!r}" for q in "abc"
    ]


def test_a_successful_search_resets_the_failure_count(store):
    script = [search("a"), search("Adriana Trigiani"), search("b"), answer("Greenwich Village")]
    pipeline = _safe_loop(store, script, failing={"a", "b"}, max_search_failures=2)
    result = pipeline.run({"controller": {"query": "q"}})["result"]
    assert (result["terminated_by"], strip_markers(result["answer"])) == ("answered", "Greenwich Village")


def test_a_slow_search_times_out_into_a_tool_error(store):
    pipeline = _safe_loop(store, [search("slow"), answer("from nothing")], failing=set())
    result = pipeline.run({"controller": {"query": "q"}})["result"]
    assert (
        result["tool_history"][0]["result"] == "search failed: TimeoutError: the retriever did not answer within 0.1 s"
    )
    assert result["terminated_by"] == "answered"


def test_a_query_run_writes_nothing_to_the_store(store, build_loop):
    before = {d.id: d.to_dict() for d in store.filter_documents()}
    build_loop([search("Adriana Trigiani"), search("Greenwich Village"), answer("x")]).run()
    assert {d.id: d.to_dict() for d in store.filter_documents()} == before


def test_answer_and_fallback_prompts_respect_their_context_budget(build_loop, store):
    from haystack import Document

    store.write_documents([Document(id=f"big{i}", content="Trigiani " + "filler " * 500) for i in range(6)])
    loop = build_loop(
        [search("Trigiani filler"), {"empty": True}, {"empty": True}],
        chunk_cap=10,
        fallback_script=[{"text": "ok"}],
        fallback_kwargs={"context_budget_tokens": 400, "chunk_chars": 4000},
    )
    result = loop.run()
    assert strip_markers(result["answer"]) == "ok"
    prompt = loop.fallback_llm.calls[0][0][-1].text
    assert len(prompt) < 400 * 4 + 600  # the chunks within the budget, plus the instructions and the question
    assert "[1]" in prompt


# --- one retry policy -----------------------------------------------------------------------------------------


def test_async_retries_follow_the_same_policy(monkeypatch):
    slept = []

    async def fake_sleep(seconds):
        slept.append(seconds)

    monkeypatch.setattr(asyncio, "sleep", fake_sleep)
    generator = FlakyGenerator([TimeoutError("a"), HTTPError(502), HTTPError(503)])
    call = asyncio.run(
        call_generator_async(generator, LoopState(question="q"), "answer", [ChatMessage.from_user("q")], backoff=0.5)
    )
    assert generator.calls == 3 and isinstance(call.error, HTTPError) and call.error.status_code == 503
    assert slept == [0.5, 1.0]
    assert call.state.usage["answer"]["calls"] == 3
    assert call.state.usage["answer"]["prompt_tokens"] == 0  # failed attempts count no tokens


def test_a_generator_that_retries_by_itself_is_not_retried_again():
    generator = FlakyGenerator([ConnectionError("down")] * 3)
    generator.max_retries = 5  # like OpenAIChatGenerator's client retries
    call = call_generator(generator, LoopState(question="q"), "answer", [ChatMessage.from_user("q")], backoff=0.01)
    assert generator.calls == 1 and isinstance(call.error, ConnectionError)
    generator.max_retries = 0  # its own retries off: the loop's policy applies
    call = call_generator(generator, LoopState(question="q"), "answer", [ChatMessage.from_user("q")], backoff=0.01)
    assert generator.calls == 1 + 3 and call.error is None


def test_retry_policy_refuses_negative_settings():
    from haystack_agentic.llm.retries import RetryPolicy

    with pytest.raises(ValueError, match="max_retries must be 0 or more"):
        RetryPolicy(max_retries=-1, backoff=0.5, is_failure=bool)
    with pytest.raises(ValueError, match="backoff must be 0 or more"):
        RetryPolicy(max_retries=1, backoff=-1, is_failure=bool)


def test_an_unknown_call_option_is_a_type_error():
    with pytest.raises(TypeError, match=r"Unknown LLM call option\(s\) \['max_retry'\]"):
        call_generator(FlakyGenerator([]), LoopState(question="q"), "answer", [ChatMessage.from_user("q")], max_retry=3)


def test_a_first_attempt_that_succeeds_does_not_set_up_tenacity(monkeypatch):
    from haystack_agentic.llm import retries

    def refuse(**_):
        msg = "tenacity set up for a call that did not fail"
        raise AssertionError(msg)

    monkeypatch.setattr(retries, "Retrying", refuse)
    monkeypatch.setattr(retries, "AsyncRetrying", refuse)
    policy = retries.RetryPolicy(max_retries=2, backoff=0.0, is_failure=lambda outcome: outcome == "failed")
    assert policy.run(lambda: "ok") == "ok"

    async def ok():
        return "ok"

    assert asyncio.run(policy.run_async(ok)) == "ok"


def test_the_last_result_of_a_retry_with_no_finished_attempt_is_a_clear_error():
    from tenacity import RetryCallState, Retrying

    from haystack_agentic.llm.retries import _last_result

    state = RetryCallState(Retrying(), fn=None, args=(), kwargs={})
    with pytest.raises(RuntimeError, match="No attempt has finished yet"):
        _last_result(state)
    state.set_result("failed")
    assert _last_result(state) == "failed"
