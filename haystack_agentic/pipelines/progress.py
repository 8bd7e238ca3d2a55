# SPDX-License-Identifier: Apache-2.0
"""
Progress of a loop run as it happens: one event per recorded step, then the result.

Progress of a loop run as it happens: one event per recorded step, then the result, read from the states the
`controller` and `router` emit through Haystack's `Pipeline.run_async_generator`.
"""

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from haystack import Pipeline

from haystack_agentic.dataclasses.loop_state import LoopState, ToolStep

#: Components whose outputs carry the `LoopState` while the loop runs.
WATCHED_COMPONENTS = frozenset({"router", "controller"})


@dataclass(frozen=True)
class ProgressEvent:
    """One progress event: `kind` `"step"` (with `step`) or `"result"` (with the loop's `result` dict)."""

    kind: str
    step: ToolStep | None = None
    result: dict[str, Any] | None = None


async def iter_progress(pipeline: Pipeline, data: dict[str, Any]) -> AsyncIterator[ProgressEvent]:
    """
    Run a loop pipeline asynchronously, yielding each new step as it is recorded, then the `"result"` event.

    :param pipeline: A loop pipeline (components `controller`, `router`, `result`).
    :param data: The pipeline inputs, e.g. `{"controller": {"query": "..."}}`.
    :raises Exception: Whatever the pipeline raises.
    """
    sent = 0
    result = None
    async for partial in pipeline.run_async_generator(data, include_outputs_from=set(WATCHED_COMPONENTS)):
        result = partial.get("result", result)
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
    pipeline: Pipeline,
    data: dict[str, Any],
    callback: Callable[[ProgressEvent], None] | None = None,
    *,
    runner: asyncio.Runner | None = None,
) -> dict[str, Any]:
    """
    Run a loop pipeline, calling `callback` (if given) with each progress event; returns the loop's result dict.

    :param pipeline: A loop pipeline (see `iter_progress`).
    :param data: The pipeline inputs, e.g. `{"controller": {"query": "..."}}`.
    :param callback: Called with each `ProgressEvent`, in order.
    :param runner: The `asyncio.Runner` to run on. Pass the same one to every run of a pipeline whose chat generators
        keep an async client: `OpenAIChatGenerator`'s pooled connections belong to the event loop of its first
        request, and a later run on a new loop fails with "Event loop is closed". Default: a new event loop for this
        run (`asyncio.run`), fine for one run per pipeline.
    :raises RuntimeError: If called from a running event loop (use `iter_progress` there).
    """

    async def consume() -> dict[str, Any]:
        final: dict[str, Any] = {}
        async for event in iter_progress(pipeline, data):
            if callback is not None:
                callback(event)
            final = event.result or final
        return final

    return runner.run(consume()) if runner is not None else asyncio.run(consume())
