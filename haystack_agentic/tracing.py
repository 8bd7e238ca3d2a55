# SPDX-License-Identifier: Apache-2.0
"""
The loop's spans, for Langfuse / OpenTelemetry users: one tree per run, like Haystack's `Agent` gives.

```
haystack_agentic.loop.run                     (the controller's first visit)
└─ haystack_agentic.loop.iteration            (one per router turn: iteration, action, query, chunk counts)
   ├─ haystack.component.run                  (each LLM call, traced like a Haystack chat generator)
   ├─ haystack.agent.step.tool                (each user tool call, Haystack's own tool span)
   └─ haystack_agentic.search                 (each search of the turn: query, chunks returned / new / kept)
```

A span cannot stay open across the loop's component visits, so each is closed within one and `LoopState.trace` (a
`TraceLinks`) carries the run's and the iteration's span, which later spans name as `parent_span`.
"""

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from haystack import Document, logging, tracing
from haystack.core.serialization import generate_qualified_class_name
from haystack.dataclasses import ChatMessage

from haystack_agentic.dataclasses.loop_state import LoopState

logger = logging.getLogger(__name__)

#: Prefix of every tag this package sets.
PREFIX = "haystack_agentic."

#: Span operation names.
RUN_SPAN = "haystack_agentic.loop.run"
ITERATION_SPAN = "haystack_agentic.loop.iteration"
SEARCH_SPAN = "haystack_agentic.search"

#: Roles whose LLM calls hang under their iteration; the others' hang under the run span.
_ITERATION_ROLES = ("controller", "answer")


@dataclass(frozen=True)
class TraceLinks:
    """The run's span and the current iteration's, which later spans name as parent (never serialised)."""

    run: Any = None
    iteration: Any = None


def tag_current_span(**tags: Any) -> None:
    """Set tags (`None` values skipped) on the active span, prefixed with `haystack_agentic.`."""
    span = tracing.tracer.current_span()
    if span is None:
        return
    for key, value in tags.items():
        if value is not None:
            span.set_tag(PREFIX + key, value)


def start_run(state: LoopState) -> LoopState:
    """Open (and close) the run's span; returns the state carrying it in `trace` (itself when no tracer is on)."""
    if not tracing.is_tracing_enabled():
        return state
    tags = {PREFIX + "max_iterations": state.limits.max_iterations, PREFIX + "chunk_cap": state.limits.chunk_cap}
    with tracing.tracer.trace(RUN_SPAN, tags=tags) as span:
        span.set_content_tag(PREFIX + "loop.input", {"question": state.question})
    return state.evolve(trace=TraceLinks(run=span))


@contextlib.contextmanager
def iteration_span(state: LoopState) -> Iterator[LoopState]:
    """An iteration span around one router turn; yields the state carrying it in `trace.iteration`."""
    if not tracing.is_tracing_enabled():
        yield state
        return
    links = state.trace or TraceLinks()
    tags = {PREFIX + "iteration": state.iteration + 1}
    with tracing.tracer.trace(ITERATION_SPAN, tags=tags, parent_span=links.run) as span:
        yield state.evolve(trace=TraceLinks(run=links.run, iteration=span))


def trace_search(state: LoopState, query: str, found: Sequence[Document], error: str | None) -> None:
    """Record one search (`state`: before its documents were merged; `error`: why it failed) as a search span."""
    if not tracing.is_tracing_enabled():
        return
    links = state.trace or TraceLinks()
    known = {doc.id for doc in state.chunks}
    tags = {
        PREFIX + "iteration": state.iteration + 1,
        PREFIX + "query": query,
        PREFIX + "chunks_returned": len(found),
        PREFIX + "chunks_new": sum(1 for doc in found if doc.id not in known),
    }
    if error:
        tags[PREFIX + "search_error"] = error
    with tracing.tracer.trace(SEARCH_SPAN, tags=tags, parent_span=links.iteration or links.run) as span:
        span.set_content_tag(PREFIX + "search.output", {"chunk_ids": [doc.id for doc in found]})


def chat_generator_span(generator: Any, state: LoopState, role: str, attempt: int) -> Any:
    """The span (context manager) of one LLM call, shaped like Haystack's for a chat generator component."""
    cls = type(generator)
    tags = {
        "haystack.component.name": f"{role}.chat_generator",
        "haystack.component.type": cls.__name__,
        "haystack.component.fully_qualified_type": generate_qualified_class_name(cls),
        PREFIX + "role": role,
        PREFIX + "iteration": state.iteration + 1,
        PREFIX + "attempt": attempt,
    }
    links = state.trace or TraceLinks()
    parent = (links.iteration or links.run) if role in _ITERATION_ROLES else links.run
    return tracing.tracer.trace("haystack.component.run", tags=tags, parent_span=parent)


def tag_chat_call(
    span: Any, generator: Any, kwargs: dict[str, Any], replies: list[ChatMessage], usage: dict[str, Any]
) -> None:
    """Tag an LLM call's span: model, `usage` tokens (ours and GenAI's), with content tracing its input and replies."""
    meta = (replies[0].meta or {}) if replies else {}
    model = meta.get("model") or getattr(generator, "model", None)
    if model:
        span.set_tag(PREFIX + "model", model)
        span.set_tag("gen_ai.request.model", model)
    span.set_tag("gen_ai.operation.name", "chat")
    for ours, gen_ai in (
        ("prompt_tokens", "gen_ai.usage.input_tokens"),
        ("completion_tokens", "gen_ai.usage.output_tokens"),
    ):
        span.set_tag(PREFIX + ours, usage.get(ours, 0))
        span.set_tag(gen_ai, usage.get(ours, 0))
    if tracing.tracer.is_content_tracing_enabled:
        sent = {k: v for k, v in kwargs.items() if k in ("messages", "generation_kwargs")}
        span.set_content_tag("haystack.component.input", sent)
        span.set_content_tag("haystack.component.output", {"replies": replies})


def trace_turn(component: str, routed: dict[str, Any]) -> dict[str, Any]:
    """Tag the active (iteration) span with one router turn and log it; returns the router's output unchanged."""
    state = next((v for v in routed.values() if isinstance(v, LoopState)), None)
    if state is None or not state.tool_history:
        return routed
    step = state.tool_history[-1]
    turn = [s for s in state.tool_history if s.iteration == step.iteration]
    queries = [s.query for s in turn if s.query]
    common: dict[str, Any] = {
        "iteration": step.iteration,
        "chunks": len(state.chunks),
        "terminated_by": state.outcome.terminated_by,
    }
    tag_current_span(
        action=",".join(dict.fromkeys(s.action for s in turn)),
        query="; ".join(queries) or None,
        collections=",".join(step.collections) or None,
        **common,
    )
    logger.info(
        "{component} turn {iteration}: {action}",
        component=component,
        action=step.action,
        query=step.query,
        collections=list(step.collections),
        **common,
    )
    return routed
