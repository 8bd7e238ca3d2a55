# SPDX-License-Identifier: Apache-2.0
"""
The span tree of a run as OpenTelemetry exports it (the SDK's in-memory exporter): real parent/child links.

Haystack 3 ships no OpenTelemetry tracer, so the adapter is written here, the way Haystack 2's `OpenTelemetryTracer`
was (spans started as current, tags coerced with `coerce_tag_value`), in two flavours: one that honours
`parent_span`, and Haystack 2's, which ignored it and followed the active context only (the README says what each
draws).
"""

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import QUESTION, answer, search
from haystack import tracing
from haystack.tracing import Span, Tracer
from haystack.tracing.utils import coerce_tag_value

otel_trace = pytest.importorskip("opentelemetry.trace")
sdk_trace = pytest.importorskip("opentelemetry.sdk.trace")
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402


class OTelSpan(Span):
    def __init__(self, span: Any) -> None:
        self._span = span

    def set_tag(self, key: str, value: Any) -> None:
        self._span.set_attribute(key, coerce_tag_value(value))

    def raw_span(self) -> Any:
        return self._span


class OTelTracer(Tracer):
    def __init__(self, tracer: Any, honour_parent: bool) -> None:
        self._tracer, self._honour_parent = tracer, honour_parent

    @contextlib.contextmanager
    def trace(
        self, operation_name: str, tags: dict[str, Any] | None = None, parent_span: Span | None = None
    ) -> Iterator[Span]:
        context = None
        if self._honour_parent and isinstance(parent_span, OTelSpan):
            context = otel_trace.set_span_in_context(parent_span.raw_span())
        with self._tracer.start_as_current_span(operation_name, context=context) as raw:
            span = OTelSpan(raw)
            span.set_tags(tags or {})
            yield span

    def current_span(self) -> Span | None:
        current = otel_trace.get_current_span()
        return None if isinstance(current, otel_trace.NonRecordingSpan) else OTelSpan(current)


@pytest.fixture
def exported():
    exporter = InMemorySpanExporter()
    provider = sdk_trace.TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield exporter, provider
    tracing.disable_tracing()


def _spans(exporter: InMemorySpanExporter) -> tuple[dict[int, Any], Any]:
    spans = exporter.get_finished_spans()
    return {s.context.span_id: s for s in spans}, spans


def _parent(by_id: dict[int, Any], span: Any) -> Any:
    return by_id.get(span.parent.span_id) if span.parent is not None else None


def _one(spans: Any, name: str, **attributes: Any) -> list[Any]:
    return [s for s in spans if s.name == name and all(s.attributes.get(k) == v for k, v in attributes.items())]


def test_opentelemetry_exports_the_tree_with_real_parent_links(build_loop, exported):
    exporter, provider = exported
    tracing.enable_tracing(OTelTracer(provider.get_tracer("test"), honour_parent=True))
    assert build_loop([search("Adriana Trigiani"), answer("Greenwich Village")]).run(QUESTION)["answer"]
    by_id, spans = _spans(exporter)
    assert len({s.context.trace_id for s in spans}) == 1  # one trace for the run
    [run] = _one(spans, "haystack_agentic.loop.run")
    iterations = _one(spans, "haystack_agentic.loop.iteration")
    assert [s.attributes["haystack_agentic.iteration"] for s in iterations] == [1, 2]
    assert all(_parent(by_id, s) is run for s in iterations)
    llm = _one(spans, "haystack.component.run", **{"haystack_agentic.role": "controller"})
    assert [_parent(by_id, s) for s in llm] == iterations
    assert llm[0].attributes["haystack.component.type"] == "ScriptedChatGenerator"
    assert llm[0].attributes["gen_ai.usage.input_tokens"] > 0
    [searched] = _one(spans, "haystack_agentic.search")
    assert _parent(by_id, searched) is iterations[0]
    assert searched.attributes["haystack_agentic.query"] == "Adriana Trigiani"


def test_a_tracer_ignoring_parent_span_nests_by_component_visit(build_loop, exported):
    exporter, provider = exported
    tracing.enable_tracing(OTelTracer(provider.get_tracer("test"), honour_parent=False))
    build_loop([search("Adriana Trigiani"), answer("Greenwich Village")]).run(QUESTION)
    by_id, spans = _spans(exporter)
    iterations = _one(spans, "haystack_agentic.loop.iteration")
    assert {_parent(by_id, s).attributes["haystack.component.name"] for s in iterations} == {"router"}
    llm = _one(spans, "haystack.component.run", **{"haystack_agentic.role": "controller"})
    assert [_parent(by_id, s) for s in llm] == iterations  # the LLM call still nests in its turn
    [searched] = _one(spans, "haystack_agentic.search")
    assert _parent(by_id, searched).attributes["haystack.component.name"] == "controller"
