# SPDX-License-Identifier: Apache-2.0
"""The loop is visible to tracing users: spans carry loop tags, each LLM call has a chat-generator-like span."""

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import answer, search
from haystack import tracing
from haystack.tracing import Span, Tracer


class RecordingSpan(Span):
    def __init__(self, name: str, tags: dict[str, Any] | None) -> None:
        self.name = name
        self.tags = dict(tags or {})

    def set_tag(self, key: str, value: Any) -> None:
        self.tags[key] = value


class RecordingTracer(Tracer):
    def __init__(self) -> None:
        self.spans: list[RecordingSpan] = []
        self.stack: list[RecordingSpan] = []

    @contextlib.contextmanager
    def trace(
        self, operation_name: str, tags: dict[str, Any] | None = None, parent_span: Span | None = None
    ) -> Iterator[Span]:
        span = RecordingSpan(operation_name, tags)
        self.spans.append(span)
        self.stack.append(span)
        try:
            yield span
        finally:
            self.stack.pop()

    def current_span(self) -> Span | None:
        return self.stack[-1] if self.stack else None


@pytest.fixture
def tracer():
    recording = RecordingTracer()
    tracing.enable_tracing(recording)
    yield recording
    tracing.disable_tracing()


def test_spans_for_turns_llm_calls_and_the_result(build_loop, tracer):
    result = build_loop([search("Adriana Trigiani"), answer("Greenwich Village")]).run()
    assert result["terminated_by"] == "answered"
    llm_spans = [s for s in tracer.spans if s.name == "haystack.component.run" and "haystack_agentic.role" in s.tags]
    assert [s.tags["haystack_agentic.role"] for s in llm_spans] == ["controller", "controller"]
    assert [s.tags["haystack_agentic.iteration"] for s in llm_spans] == [1, 2]
    assert all("haystack_agentic.prompt_tokens_total" in s.tags for s in llm_spans)
    turns = [s.tags for s in tracer.spans if "haystack_agentic.action" in s.tags]
    assert [(t["haystack_agentic.iteration"], t["haystack_agentic.action"]) for t in turns] == [
        (1, "search"),
        (2, "answer"),
    ]
    assert turns[0]["haystack_agentic.query"] == "Adriana Trigiani"
    final = [
        s.tags
        for s in tracer.spans
        if "haystack_agentic.terminated_by" in s.tags and "haystack_agentic.llm_calls" in s.tags
    ]
    assert final and final[-1]["haystack_agentic.terminated_by"] == "answered"
    assert final[-1]["haystack_agentic.llm_calls"] == 2


@pytest.mark.integration  # the packaged MiniLM (the evidence check's embeddings)
def test_search_spans_carry_query_and_chunk_counts(store, tracer):
    from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
    from scripted_chat_generator import ScriptedChatGenerator

    from haystack_agentic import AgenticRouter, build_loop_pipeline
    from haystack_agentic.components.retrievers.safe_retriever import SafeRetriever

    llm = ScriptedChatGenerator([search("Adriana Trigiani"), answer("x")])
    router = AgenticRouter(chat_generator=llm, search_question_first=False)
    pipeline = build_loop_pipeline(router, SafeRetriever(InMemoryBM25Retriever(store)))
    pipeline.run({"controller": {"query": "q"}})
    searches = [s.tags for s in tracer.spans if "haystack_agentic.chunks_found" in s.tags]
    assert len(searches) == 1
    assert searches[0]["haystack_agentic.query"] == "Adriana Trigiani"
    assert searches[0]["haystack_agentic.chunks_found"] > 0
