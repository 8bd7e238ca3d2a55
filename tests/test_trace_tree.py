# SPDX-License-Identifier: Apache-2.0
"""
The span tree of a loop run, as a recording tracer that records parent links sees it: one `loop.run` span, one
`loop.iteration` span per router turn under it, and under each iteration its LLM call (traced like a Haystack chat
generator), its searches and its user tool calls. Sync and async, concurrent runs unmixed, content only when
content tracing is on.
"""

import asyncio
import contextlib
import contextvars
import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import QUESTION, answer, search, tool_turn
from haystack import tracing
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.dataclasses import ChatMessage
from haystack.tools import Tool
from haystack.tracing import Span, Tracer
from scripted_chat_generator import ScriptedChatGenerator

from haystack_agentic import AgenticRouter, LoopController, LoopState, build_loop_pipeline

RUN, ITERATION, SEARCH = "haystack_agentic.loop.run", "haystack_agentic.loop.iteration", "haystack_agentic.search"
COMPONENT, TOOL = "haystack.component.run", "haystack.agent.step.tool"
_ids = itertools.count(1)


class RecordedSpan(Span):
    def __init__(self, name: str, tags: dict[str, Any] | None, parent: "RecordedSpan | None") -> None:
        self.name, self.tags, self.parent, self.id = name, dict(tags or {}), parent, next(_ids)
        self.open = True

    def set_tag(self, key: str, value: Any) -> None:
        self.tags[key] = value


class RecordingTracer(Tracer):
    """Records every span with its parent: the `parent_span` passed in, else the active span (a contextvar)."""

    def __init__(self) -> None:
        self.spans: list[RecordedSpan] = []
        self._active: contextvars.ContextVar[RecordedSpan | None] = contextvars.ContextVar("active", default=None)

    @contextlib.contextmanager
    def trace(
        self, operation_name: str, tags: dict[str, Any] | None = None, parent_span: Span | None = None
    ) -> Iterator[Span]:
        parent = parent_span if isinstance(parent_span, RecordedSpan) else self._active.get()
        span = RecordedSpan(operation_name, tags, parent)
        self.spans.append(span)
        token = self._active.set(span)
        try:
            yield span
        finally:
            self._active.reset(token)
            span.open = False

    def current_span(self) -> Span | None:
        return self._active.get()

    def named(self, name: str) -> list[RecordedSpan]:
        return [s for s in self.spans if s.name == name]

    def llm_spans(self) -> list[RecordedSpan]:
        return [s for s in self.named(COMPONENT) if "haystack_agentic.role" in s.tags]

    def tree(self) -> str:
        """The logical tree (our spans and tool spans; Haystack's own component spans left out), one per line."""
        ours = [s for s in self.spans if s.name != COMPONENT or "haystack_agentic.role" in s.tags]
        lines: list[str] = []

        def walk(span: RecordedSpan, depth: int) -> None:
            lines.append("  " * depth + _label(span))
            for child in (s for s in ours if s.parent is span):
                walk(child, depth + 1)

        for root in (s for s in ours if s.name == RUN):
            walk(root, 0)
        return "\n".join(lines)


def _label(span: RecordedSpan) -> str:
    keys = (
        "haystack.component.name",
        "haystack.component.type",
        "haystack_agentic.iteration",
        "haystack_agentic.action",
        "haystack_agentic.query",
        "haystack_agentic.chunks_returned",
        "haystack_agentic.chunks_new",
        "haystack_agentic.chunks",
        "haystack.tool.name",
        "haystack_agentic.model",
        "haystack_agentic.prompt_tokens",
        "haystack_agentic.completion_tokens",
    )
    shown = " ".join(f"{k.split('.')[-1]}={span.tags[k]}" for k in keys if k in span.tags)
    return f"{span.name} {shown}".rstrip()


@pytest.fixture
def tracer():
    recording = RecordingTracer()
    tracing.enable_tracing(recording)
    yield recording
    tracing.disable_tracing()


@pytest.fixture
def content_tracing(monkeypatch):
    monkeypatch.setattr(tracing.tracer, "is_content_tracing_enabled", True)


def year_of(title: str) -> str:
    """Release year of a film."""
    return f"{title} was released in 2014."


YEAR_TOOL = Tool(
    name="film_year",
    description="Release year of a film.",
    function=year_of,
    parameters={"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]},
)


def _run(pipeline: Any, question: str, run_async: bool) -> dict[str, Any]:
    data = {"controller": {"query": question}}
    out = asyncio.run(pipeline.run_async(data)) if run_async else pipeline.run(data)
    return out["result"]


@pytest.mark.parametrize("run_async", [False, True], ids=["run", "run_async"])
def test_a_run_is_one_tree_run_iterations_llm_search_tool(store, tracer, run_async):
    turn_one = {
        "tool_calls": [
            {"tool_name": "search", "arguments": {"query": "Adriana Trigiani"}},
            {"tool_name": "film_year", "arguments": {"title": "Big Stone Gap"}},
        ]
    }
    llm = ScriptedChatGenerator([turn_one, answer("Greenwich Village")])
    router = AgenticRouter(chat_generator=llm, tools=[YEAR_TOOL], search_question_first=False)
    pipeline = build_loop_pipeline(router, InMemoryBM25Retriever(store), check_evidence=False)
    result = _run(pipeline, QUESTION, run_async)
    assert result["terminated_by"] == "answered"

    [run] = tracer.named(RUN)
    iterations = tracer.named(ITERATION)
    assert [s.tags["haystack_agentic.iteration"] for s in iterations] == [1, 2]
    assert [s.tags["haystack_agentic.action"] for s in iterations] == ["search,tool", "answer"]
    assert all(s.parent is run for s in iterations)
    assert iterations[0].tags["haystack_agentic.query"] == "Adriana Trigiani"
    assert iterations[1].tags["haystack_agentic.chunks"] > 0

    llm_spans = tracer.llm_spans()
    assert [s.parent for s in llm_spans] == iterations
    for span in llm_spans:
        assert span.tags["haystack.component.type"] == "ScriptedChatGenerator"
        assert span.tags["haystack.component.name"] == "controller.chat_generator"
        assert span.tags["haystack_agentic.model"] == "scripted"
        assert span.tags["haystack_agentic.prompt_tokens"] > 0
        assert span.tags["haystack_agentic.completion_tokens"] > 0
        assert "haystack.component.input" not in span.tags  # content tracing is off
        assert "haystack.component.output" not in span.tags

    [searched] = tracer.named(SEARCH)
    assert searched.parent is iterations[0]
    assert searched.tags["haystack_agentic.query"] == "Adriana Trigiani"
    assert searched.tags["haystack_agentic.chunks_returned"] > 0
    [tool] = tracer.named(TOOL)
    assert tool.tags["haystack.tool.name"] == "film_year"
    assert tool.parent is iterations[0]
    assert not any(s.open for s in tracer.spans)
    assert tracer.tree() == _readme_tree()  # the README shows what is recorded here, for both paths


def _readme_tree() -> str:
    readme = (Path(__file__).parents[1] / "README.md").read_text(encoding="utf-8")
    block = readme.split("<!-- trace-tree -->", 1)[1].split("<!-- /trace-tree -->", 1)[0]
    return block.strip().removeprefix("```").removesuffix("```").strip("\n")


def test_llm_spans_carry_messages_and_replies_with_content_tracing(build_loop, tracer, content_tracing):
    build_loop([search("Adriana Trigiani"), answer("Greenwich Village")]).run()
    first, second = tracer.llm_spans()
    sent = first.tags["haystack.component.input"]["messages"]
    assert all(isinstance(m, ChatMessage) for m in sent)
    assert sent[-1].text == QUESTION
    replies = first.tags["haystack.component.output"]["replies"]
    assert replies[0].tool_calls[0].arguments == {"query": "Adriana Trigiani"}
    assert second.tags["haystack.component.output"]["replies"][0].tool_calls[0].tool_name == "answer"
    [run] = tracer.named(RUN)
    assert run.tags["haystack_agentic.loop.input"] == {"question": QUESTION}


def test_answer_and_fallback_calls_hang_under_their_iteration_and_the_run(build_loop, tracer):
    loop = build_loop([search("Adriana Trigiani")], max_iterations=1, fallback_script=[{"text": "Greenwich"}])
    assert loop.run()["terminated_by"] == "max_iterations"
    [run] = tracer.named(RUN)
    by_role = {s.tags["haystack_agentic.role"]: s for s in tracer.llm_spans()}
    assert by_role["controller"].parent.name == ITERATION
    assert by_role["fallback"].parent is run


def test_concurrent_runs_keep_their_spans_apart(store, tracer):
    templated = {**tool_turn("search", {"query": "{{ question }}"}), "template": True}
    llm = ScriptedChatGenerator([templated, answer("x")])
    pipeline = build_loop_pipeline(
        AgenticRouter(chat_generator=llm, search_question_first=False),
        InMemoryBM25Retriever(store),
        check_evidence=False,
    )
    questions = [f"Adriana Trigiani {n}" for n in range(6)]

    async def all_runs() -> list[dict[str, Any]]:
        return await asyncio.gather(*(pipeline.run_async({"controller": {"query": q}}) for q in questions))

    asyncio.run(all_runs())
    runs = tracer.named(RUN)
    assert len(runs) == len(questions)
    for run in runs:
        iterations = [s for s in tracer.named(ITERATION) if s.parent is run]
        searches = [s for s in tracer.named(SEARCH) if s.parent in iterations]
        assert len(iterations) == 2 and len(searches) == 1
        assert searches[0].tags["haystack_agentic.query"] == iterations[0].tags["haystack_agentic.query"]
    assert sorted(s.tags["haystack_agentic.query"] for s in tracer.named(SEARCH)) == sorted(questions)


def test_no_tracer_no_links_in_the_state_and_links_never_serialised(build_loop):
    assert not tracing.is_tracing_enabled()
    assert LoopController().run(query=QUESTION)["state"].trace is None
    assert build_loop([search("Adriana Trigiani"), answer("Greenwich Village")]).run()["terminated_by"] == "answered"
    recording = RecordingTracer()
    tracing.enable_tracing(recording)
    try:
        state = LoopController().run(query=QUESTION)["state"]
    finally:
        tracing.disable_tracing()
    assert state.trace.run is recording.named(RUN)[0]
    assert "trace" not in state.to_dict()
    assert LoopState.from_dict(state.to_dict()) == state  # links are not compared either


def test_every_search_of_a_turn_hangs_under_that_turn(store, tracer):
    turn = {
        "tool_calls": [
            {"tool_name": "search", "arguments": {"query": "Adriana Trigiani"}},
            {"tool_name": "search", "arguments": {"query": "Greenwich Village"}},
        ]
    }
    llm = ScriptedChatGenerator([turn, answer("x")])
    pipeline = build_loop_pipeline(
        AgenticRouter(chat_generator=llm, search_question_first=False),
        InMemoryBM25Retriever(store),
        check_evidence=False,
    )
    _run(pipeline, QUESTION, run_async=False)
    first, _second = tracer.named(ITERATION)
    assert first.tags["haystack_agentic.query"] == "Adriana Trigiani; Greenwich Village"
    searches = tracer.named(SEARCH)
    assert [s.tags["haystack_agentic.query"] for s in searches] == ["Adriana Trigiani", "Greenwich Village"]
    assert all(s.parent is first for s in searches)
