# SPDX-License-Identifier: Apache-2.0
"""
Progress of a loop run as it happens: one event per recorded step, then the result, read from the states the
`controller` and `router` emit through Haystack's `Pipeline.run_async_generator`.
"""

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from haystack import Pipeline, logging

from haystack_agentic.dataclasses.loop_state import LoopState, ToolStep

logger = logging.getLogger(__name__)

#: Components whose outputs carry the `LoopState` while the loop runs.
WATCHED_COMPONENTS = frozenset({"router", "controller"})


@dataclass(frozen=True)
class ProgressEvent:
    """
    One progress event of a run.

    :param kind: `"step"` (a step was recorded) or `"result"` (the run ended).
    :param step: The step, for `"step"` events.
    :param result: The loop's result dict, for the `"result"` event.
    """

    kind: str
    step: ToolStep | None = None
    result: dict[str, Any] | None = None


async def iter_progress(pipeline: Pipeline, data: dict[str, Any]) -> AsyncIterator[ProgressEvent]:
    """
    Run a loop pipeline asynchronously, yielding each new step as it is recorded, then the result.

    :param pipeline: A loop pipeline (components `controller`, `router`, `result`).
    :param data: The pipeline inputs, e.g. `{"controller": {"query": "..."}}`.
    :returns: An async iterator of `ProgressEvent`s; the last one is the `"result"` event.
    :raises Exception: Whatever the pipeline raises.
    """
    sent = 0
    result = None
    async for partial in pipeline.run_async_generator(data, include_outputs_from=set(WATCHED_COMPONENTS)):
        if "result" in partial:
            result = partial["result"]
        for name in WATCHED_COMPONENTS & partial.keys():
            for value in partial[name].values():
                if isinstance(value, LoopState) and len(value.tool_history) > sent:
                    for step in value.tool_history[sent:]:
                        yield ProgressEvent("step", step=step)
                    sent = len(value.tool_history)
    if result is not None:
        for step_dict in result["tool_history"][sent:]:  # steps recorded after the last watched output
            yield ProgressEvent("step", step=ToolStep.from_dict(step_dict))
        yield ProgressEvent("result", result=result)


def run_with_progress(
    pipeline: Pipeline, data: dict[str, Any], callback: Callable[[ProgressEvent], None] | None = None
) -> dict[str, Any]:
    """
    Run a loop pipeline, calling `callback` with each progress event; return the result.

    :param pipeline: A loop pipeline.
    :param data: The pipeline inputs.
    :param callback: Called with every `ProgressEvent` (steps in order, then the result), or `None`.
    :returns: The loop's result dict.
    :raises RuntimeError: If called from a running event loop (use `iter_progress` there).
    """

    async def consume() -> dict[str, Any]:
        final: dict[str, Any] = {}
        async for event in iter_progress(pipeline, data):
            if callback is not None:
                callback(event)
            if event.kind == "result" and event.result is not None:
                final = event.result
        return final

    return asyncio.run(consume())
