# SPDX-License-Identifier: Apache-2.0
"""
Tags for Haystack's tracing spans, so Langfuse / OpenTelemetry users see the loop.

Haystack already opens a span for the pipeline run and one per component run (`haystack.component.run`); the
loop's components add what they know to their own span with `tag_current_span`: iteration, action, query,
chunk counts, tokens, terminated_by. Each LLM call gets a span of its own (`haystack_agentic.llm_call`, see
`haystack_agentic/llm/calls.py`). With no tracer enabled all of this is a no-op.
"""

from typing import Any

from haystack import logging, tracing

from haystack_agentic.dataclasses.loop_state import LoopState

logger = logging.getLogger(__name__)

#: Prefix of every tag this package sets.
PREFIX = "haystack_agentic."


def tag_current_span(**tags: Any) -> None:
    """
    Set tags on the active span (the running component's), prefixed with `haystack_agentic.`.

    :param tags: Tag names and values (`None` values are skipped).
    """
    span = tracing.tracer.current_span()
    if span is None:
        return
    for key, value in tags.items():
        if value is not None:
            span.set_tag(PREFIX + key, value)


def trace_turn(component: str, routed: dict[str, Any]) -> dict[str, Any]:
    """
    Tag the span and log one router turn (structured: iteration, action, query, chunks), then return `routed`.

    :param component: The router's class name.
    :param routed: The router's output dict.
    :returns: `routed`, unchanged.
    """
    state = next((v for v in routed.values() if isinstance(v, LoopState)), None)
    if state is None or not state.tool_history:
        return routed
    step = state.tool_history[-1]
    tag_current_span(
        iteration=step.iteration, action=step.action, query=step.query, chunks=len(state.chunks),
        terminated_by=state.terminated_by, collections=",".join(step.collections) or None,
    )  # fmt: skip
    logger.info(
        "{component} turn {iteration}: {action}",
        component=component,
        iteration=step.iteration,
        action=step.action,
        query=step.query,
        chunks=len(state.chunks),
        terminated_by=state.terminated_by,
        collections=list(step.collections),
    )
    return routed
