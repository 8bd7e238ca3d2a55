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

The loop is a `Pipeline` with a cycle, so an iteration is several component visits, each in a span the
pipeline opens under its own run span. A span cannot stay open from one visit to the next (tracers keep the
active span in a stack or a contextvar that each visit's span resets), so every span here is opened and closed
inside one visit, and the links travel with the run's data: `LoopState.trace` (a `TraceLinks`) holds the run's
and the current iteration's span, and spans opened in later visits name them as `parent_span`. Haystack's
tracers that honour `parent_span` (Langfuse's, any that records parents) draw the tree above; the pipeline's own
`haystack.component.run` spans stay where Haystack puts them. Nothing is kept in component attributes, so
concurrent runs never share a parent. With no tracer enabled every helper returns at once.

LLM calls (`haystack_agentic/llm/calls.py`) use `chat_generator_span`: operation `haystack.component.run`, the
real generator's class in `haystack.component.type`, and, only when content tracing is on,
`haystack.component.input` (`{"messages": ...}`) and `haystack.component.output` (`{"replies": ...}`) set with
`set_content_tag`: what Langfuse's tracer turns into a generation with prompt, reply, model and usage.
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

#: Roles whose LLM calls belong to the iteration that asked for them; the others (fallback, grounding, evidence)
#: hang under the run span.
_ITERATION_ROLES = ("controller", "answer")


@dataclass(frozen=True)
class TraceLinks:
    """
    The spans a run's later spans name as their parent (`LoopState.trace`; never serialised, never compared).

    :param run: The run's `haystack_agentic.loop.run` span.
    :param iteration: The current iteration's span, once the first router turn has been taken.
    """

    run: Any = None
    iteration: Any = None


def tag_current_span(**tags: Any) -> None:
    """
    Set tags on the active span (the running component's, or an iteration span), prefixed with `haystack_agentic.`.

    :param tags: Tag names and values (`None` values are skipped).
    """
    span = tracing.tracer.current_span()
    if span is None:
        return
    for key, value in tags.items():
        if value is not None:
            span.set_tag(PREFIX + key, value)


def start_run(state: LoopState) -> LoopState:
    """
    Open (and close) the run's `haystack_agentic.loop.run` span; later spans link to it through `state.trace`.

    Tags: `max_iterations`, `chunk_cap`; content tag `haystack_agentic.loop.input` (`{"question": ...}`).

    :param state: The new run's state.
    :returns: The state carrying the span in `trace`, or `state` itself when no tracer is enabled.
    """
    if not tracing.is_tracing_enabled():
        return state
    tags = {PREFIX + "max_iterations": state.limits.max_iterations, PREFIX + "chunk_cap": state.limits.chunk_cap}
    with tracing.tracer.trace(RUN_SPAN, tags=tags) as span:
        span.set_content_tag(PREFIX + "loop.input", {"question": state.question})
    return state.evolve(trace=TraceLinks(run=span))


@contextlib.contextmanager
def iteration_span(state: LoopState) -> Iterator[LoopState]:
    """
    A `haystack_agentic.loop.iteration` span around one router turn, child of the run span.

    Inside the block it is the active span: the turn's LLM call and user tool calls nest under it, and
    `trace_turn` tags it. The state yielded carries it in `trace.iteration` for the turn's searches.

    :param state: The state the router received.
    :yields: The state to take the turn with.
    """
    if not tracing.is_tracing_enabled():
        yield state
        return
    links = state.trace or TraceLinks()
    tags = {PREFIX + "iteration": state.iteration + 1}
    with tracing.tracer.trace(ITERATION_SPAN, tags=tags, parent_span=links.run) as span:
        yield state.evolve(trace=TraceLinks(run=links.run, iteration=span))


def trace_search(state: LoopState, query: str, found: Sequence[Document], error: str | None) -> None:
    """
    Record one search of a turn as a `haystack_agentic.search` span under its iteration.

    Tags: `iteration`, `query`, `chunks_returned`, `chunks_new` (not in the run's chunks before), `search_error`;
    content tag `haystack_agentic.search.output` (the returned chunk ids). The retriever's own work is timed by
    its component span; this span marks the search in the run's tree.

    :param state: The state before the search's documents were merged.
    :param query: The query searched.
    :param found: The documents the retriever returned.
    :param error: Why the search failed, or `None`.
    """
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


def llm_parent(state: LoopState, role: str) -> Any:
    """
    The span an LLM call of `role` hangs under: its iteration (controller, answer), else the run.

    :param state: The run's state.
    :param role: The LLM role.
    :returns: A span, or `None` (then the tracer's active span).
    """
    links = state.trace
    if links is None:
        return None
    return (links.iteration or links.run) if role in _ITERATION_ROLES else links.run


def chat_generator_span(generator: Any, state: LoopState, role: str, attempt: int) -> Any:
    """
    A span for one LLM call, shaped like the one Haystack's pipeline opens for a chat generator component.

    Operation `haystack.component.run`; tags `haystack.component.name` (`<role>.chat_generator`),
    `haystack.component.type` (the generator's class, e.g. `OpenAIChatGenerator`),
    `haystack.component.fully_qualified_type`, and `haystack_agentic.role` / `iteration` / `attempt`.
    `tag_chat_call` adds the content and the usage.

    :param generator: The chat generator.
    :param state: The run's state (for the parent span and the iteration).
    :param role: The LLM role.
    :param attempt: 1-based attempt number.
    :returns: The span's context manager.
    """
    cls = type(generator)
    tags = {
        "haystack.component.name": f"{role}.chat_generator",
        "haystack.component.type": cls.__name__,
        "haystack.component.fully_qualified_type": generate_qualified_class_name(cls),
        PREFIX + "role": role,
        PREFIX + "iteration": state.iteration + 1,
        PREFIX + "attempt": attempt,
    }
    return tracing.tracer.trace("haystack.component.run", tags=tags, parent_span=llm_parent(state, role))


def tag_chat_call(
    span: Any, generator: Any, kwargs: dict[str, Any], replies: list[ChatMessage], usage: dict[str, Any]
) -> None:
    """
    Tag an LLM call's span: model, tokens (also as OpenTelemetry GenAI attributes), and with content tracing on the
    generator's input (`messages`, `generation_kwargs`) and output (`replies`), as Haystack's pipeline tags a chat
    generator component.

    :param span: The call's span.
    :param generator: The chat generator.
    :param kwargs: The keyword arguments the generator was called with.
    :param replies: Its replies.
    :param usage: This call's `prompt_tokens` / `completion_tokens`.
    """
    meta = (replies[0].meta or {}) if replies else {}
    model = meta.get("model") or getattr(generator, "model", None)
    if model:
        span.set_tag(PREFIX + "model", model)
        span.set_tag("gen_ai.request.model", model)
    span.set_tag("gen_ai.operation.name", "chat")
    for ours, gen_ai in (("prompt_tokens", "gen_ai.usage.input_tokens"),
                         ("completion_tokens", "gen_ai.usage.output_tokens")):  # fmt: skip
        span.set_tag(PREFIX + ours, usage.get(ours, 0))
        span.set_tag(gen_ai, usage.get(ours, 0))
    if tracing.tracer.is_content_tracing_enabled:
        sent = {k: v for k, v in kwargs.items() if k in ("messages", "generation_kwargs")}
        span.set_content_tag("haystack.component.input", sent)
        span.set_content_tag("haystack.component.output", {"replies": replies})


def trace_turn(component: str, routed: dict[str, Any]) -> dict[str, Any]:
    """
    Tag the active span (the iteration's) and log one router turn (structured: iteration, action, query, chunks),
    then return `routed`.

    :param component: The router's class name.
    :param routed: The router's output dict.
    :returns: `routed`, unchanged.
    """
    state = next((v for v in routed.values() if isinstance(v, LoopState)), None)
    if state is None or not state.tool_history:
        return routed
    step = state.tool_history[-1]
    turn = [s for s in state.tool_history if s.iteration == step.iteration]
    queries = [s.query for s in turn if s.query]
    tag_current_span(
        iteration=step.iteration, action=",".join(dict.fromkeys(s.action for s in turn)),
        query="; ".join(queries) or None, chunks=len(state.chunks),
        terminated_by=state.outcome.terminated_by, collections=",".join(step.collections) or None,
    )  # fmt: skip
    logger.info(
        "{component} turn {iteration}: {action}",
        component=component,
        iteration=step.iteration,
        action=step.action,
        query=step.query,
        chunks=len(state.chunks),
        terminated_by=state.outcome.terminated_by,
        collections=list(step.collections),
    )
    return routed
