# SPDX-License-Identifier: Apache-2.0
"""Resuming a loop pipeline from a Haystack pipeline snapshot (`LoopState` deserialises because importing
`haystack_agentic` trusts `ALLOWED_MODULES` process-wide)."""

import asyncio
from pathlib import Path
from typing import Any

from haystack import Pipeline
from haystack.core.pipeline.breakpoint import load_pipeline_snapshot
from haystack.dataclasses.breakpoints import Breakpoint, PipelineSnapshot

#: Read a snapshot file written at a breakpoint (`FileNotFoundError`; `ValueError` if it is not a snapshot).
load_snapshot = load_pipeline_snapshot


def resume_from_snapshot(
    pipeline: Pipeline, snapshot: PipelineSnapshot | Path | str, *, break_point: Breakpoint | None = None
) -> dict[str, Any]:
    """
    Resume a loop pipeline from a snapshot: `pipeline.run({}, pipeline_snapshot=...)`.

    :param pipeline: The pipeline the snapshot was taken from, or an equal one (e.g. loaded from its YAML).
    :param snapshot: A `PipelineSnapshot` or the path of its JSON file.
    :param break_point: Another breakpoint to stop at after resuming, or `None`.
    :returns: The pipeline's outputs (`["result"]` is the loop's result).
    :raises BreakpointException: When `break_point` is reached.
    :raises PipelineInvalidPipelineSnapshotError: If the snapshot names components the pipeline does not have.
    """
    if not isinstance(snapshot, PipelineSnapshot):
        snapshot = load_pipeline_snapshot(snapshot)
    return pipeline.run({}, pipeline_snapshot=snapshot, break_point=break_point)


async def resume_from_snapshot_async(
    pipeline: Pipeline, snapshot: PipelineSnapshot | Path | str, *, break_point: Breakpoint | None = None
) -> dict[str, Any]:
    """`resume_from_snapshot` in a worker thread (`Pipeline.run_async` cannot resume from a snapshot)."""
    return await asyncio.to_thread(resume_from_snapshot, pipeline, snapshot, break_point=break_point)
