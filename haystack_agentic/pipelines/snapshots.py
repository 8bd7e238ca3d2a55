# SPDX-License-Identifier: Apache-2.0
"""
Resuming a loop pipeline from a Haystack pipeline snapshot (a `Breakpoint`'s, or a crash's); README "Breakpoints and
snapshots" has a runnable example. The snapshot's `LoopState` deserialises because importing `haystack_agentic`
trusts `ALLOWED_MODULES` process-wide (`Pipeline.run` takes no `allowed_modules`).
"""

import asyncio
from pathlib import Path
from typing import Any

from haystack import Pipeline, logging
from haystack.core.pipeline.breakpoint import load_pipeline_snapshot
from haystack.dataclasses.breakpoints import Breakpoint, PipelineSnapshot

logger = logging.getLogger(__name__)


def load_snapshot(path: Path | str) -> PipelineSnapshot:
    """
    Read a snapshot file written at a breakpoint.

    :param path: The JSON file (`BreakpointException.pipeline_snapshot_file_path`).
    :returns: The snapshot.
    :raises FileNotFoundError: If there is no such file.
    :raises ValueError: If it is not a pipeline snapshot.
    """
    return load_pipeline_snapshot(path)


def resume_from_snapshot(
    pipeline: Pipeline, snapshot: PipelineSnapshot | Path | str, *, break_point: Breakpoint | None = None
) -> dict[str, Any]:
    """
    Resume a loop pipeline from a snapshot: `pipeline.run({}, pipeline_snapshot=...)`.

    :param pipeline: The loop pipeline the snapshot was taken from, or an equal one (e.g. loaded from its YAML).
    :param snapshot: A `PipelineSnapshot` or the path of its JSON file.
    :param break_point: Another breakpoint to stop at after resuming, or `None`.
    :returns: The pipeline's outputs (`["result"]` is the loop's result).
    :raises BreakpointException: When `break_point` is reached.
    :raises PipelineInvalidPipelineSnapshotError: If the snapshot names components the pipeline does not have.
    """
    if not isinstance(snapshot, PipelineSnapshot):
        snapshot = load_snapshot(snapshot)
    return pipeline.run({}, pipeline_snapshot=snapshot, break_point=break_point)


async def resume_from_snapshot_async(
    pipeline: Pipeline, snapshot: PipelineSnapshot | Path | str, *, break_point: Breakpoint | None = None
) -> dict[str, Any]:
    """
    Async twin of `resume_from_snapshot`, in a worker thread (`Pipeline.run_async` cannot resume from a snapshot).

    :returns: The pipeline's outputs.
    """
    return await asyncio.to_thread(resume_from_snapshot, pipeline, snapshot, break_point=break_point)
