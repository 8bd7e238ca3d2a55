# SPDX-License-Identifier: Apache-2.0
"""
Resuming a loop pipeline from a Haystack pipeline snapshot.

`Pipeline.run` takes no `allowed_modules`, so resuming trusts the one module of `LoopState` process-wide
(docs/decisions.md, "Resuming snapshots").
"""

import asyncio
from pathlib import Path
from typing import Any

from haystack import Pipeline
from haystack.core.pipeline.breakpoint import load_pipeline_snapshot
from haystack.core.serialization import allow_deserialization_module
from haystack.dataclasses.breakpoints import Breakpoint, PipelineSnapshot

from haystack_agentic.dataclasses.loop_state import LoopState

#: Read a snapshot file written at a breakpoint (`FileNotFoundError`; `ValueError` if it is not a snapshot).
load_snapshot = load_pipeline_snapshot


def resume_from_snapshot(
    pipeline: Pipeline, snapshot: PipelineSnapshot | Path | str, *, break_point: Breakpoint | None = None
) -> dict[str, Any]:
    """
    Resume a loop pipeline from a snapshot.

    It calls `pipeline.run({}, pipeline_snapshot=...)`. Haystack's run takes no `allowed_modules`, so this trusts
    `LoopState`'s module (and no other) process-wide, from the first resume on.

    :param pipeline: The pipeline the snapshot was taken from, or an equal one (e.g. loaded from its YAML).
    :param snapshot: A `PipelineSnapshot` or the path of its JSON file.
    :param break_point: Another breakpoint to stop at after resuming, or `None`.
    :returns: The pipeline's outputs (`["result"]` is the loop's result).
    :raises BreakpointException: When `break_point` is reached.
    :raises PipelineInvalidPipelineSnapshotError: If the snapshot names components the pipeline does not have.
    """
    if not isinstance(snapshot, PipelineSnapshot):
        snapshot = load_pipeline_snapshot(snapshot)
    allow_deserialization_module(LoopState.__module__)  # the loop's state in the snapshot's inputs; a dataclass
    return pipeline.run({}, pipeline_snapshot=snapshot, break_point=break_point)


async def resume_from_snapshot_async(
    pipeline: Pipeline, snapshot: PipelineSnapshot | Path | str, *, break_point: Breakpoint | None = None
) -> dict[str, Any]:
    """`resume_from_snapshot` in a worker thread (`Pipeline.run_async` cannot resume from a snapshot)."""
    return await asyncio.to_thread(resume_from_snapshot, pipeline, snapshot, break_point=break_point)
