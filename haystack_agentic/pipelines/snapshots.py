# SPDX-License-Identifier: Apache-2.0
"""
Resuming a loop pipeline from a Haystack pipeline snapshot (a `Breakpoint`'s, or a crash's) with the package's
allow-list.

A snapshot holds the inputs waiting at each component; for the loop that is a `LoopState`, a class from
`haystack_agentic`, and Haystack's `Pipeline.run(pipeline_snapshot=...)` only imports allow-listed modules when it
reads them back. `Pipeline.run` takes no `allowed_modules` argument (only `Pipeline.loads` does). Importing
`haystack_agentic` trusts `ALLOWED_MODULES` through Haystack's public `allow_deserialization_module`, so Haystack's own
resume works; these helpers add any further patterns the same (process-wide) way.

### Usage example
```python
import os

from haystack.core.errors import BreakpointException
from haystack.dataclasses.breakpoints import Breakpoint

from haystack_agentic.pipelines.snapshots import resume_from_snapshot

os.environ["HAYSTACK_PIPELINE_SNAPSHOT_SAVE_ENABLED"] = "true"  # Haystack writes snapshot files only then
try:  # stop before the retriever's second search (visit_count counts from 0)
    pipeline.run({"controller": {"query": "Who directed Big Stone Gap?"}},
                 break_point=Breakpoint("retriever", visit_count=1, snapshot_file_path="snapshots"))
except BreakpointException as stopped:
    path = stopped.pipeline_snapshot_file_path
result = resume_from_snapshot(pipeline, path)["result"]  # the same pipeline, or a freshly loaded one
```
"""

import asyncio
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from haystack import Pipeline, logging
from haystack.core.serialization import allow_deserialization_module
from haystack.core.pipeline.breakpoint import load_pipeline_snapshot
from haystack.dataclasses.breakpoints import Breakpoint, PipelineSnapshot

from haystack_agentic import ALLOWED_MODULES

logger = logging.getLogger(__name__)


@contextmanager
def allowed_modules_context(allowed_modules: Iterable[str] = ALLOWED_MODULES) -> Iterator[None]:
    """
    Let Haystack deserialise classes from `allowed_modules` inside the `with` block (this context only).

    The patterns are added to Haystack's process-wide allow-list with its public `allow_deserialization_module`
    (Haystack has no public per-call scope outside `Pipeline.loads`): importing `haystack_agentic` already trusts
    `ALLOWED_MODULES`, so the default adds nothing; other patterns stay trusted until the process exits.

    :param allowed_modules: Module patterns (default: `ALLOWED_MODULES`).
    """
    for pattern in allowed_modules:
        allow_deserialization_module(pattern)
    yield


def load_snapshot(path: Path | str, allowed_modules: Iterable[str] = ALLOWED_MODULES) -> PipelineSnapshot:
    """
    Read a snapshot file written at a breakpoint (Haystack's `load_pipeline_snapshot`, with the allow-list).

    :param path: The JSON file (`BreakpointException.pipeline_snapshot_file_path`).
    :param allowed_modules: Module patterns its values may come from (default: `ALLOWED_MODULES`).
    :returns: The snapshot.
    :raises FileNotFoundError: If there is no such file.
    :raises ValueError: If it is not a pipeline snapshot.
    """
    with allowed_modules_context(allowed_modules):
        return load_pipeline_snapshot(path)


def _snapshot(snapshot: PipelineSnapshot | Path | str, allowed_modules: Iterable[str]) -> PipelineSnapshot:
    return snapshot if isinstance(snapshot, PipelineSnapshot) else load_snapshot(snapshot, allowed_modules)


def resume_from_snapshot(
    pipeline: Pipeline,
    snapshot: PipelineSnapshot | Path | str,
    *,
    break_point: Breakpoint | None = None,
    allowed_modules: Iterable[str] = ALLOWED_MODULES,
) -> dict[str, Any]:
    """
    Resume a loop pipeline from a snapshot: `pipeline.run({}, pipeline_snapshot=...)` with the allow-list.

    :param pipeline: The loop pipeline the snapshot was taken from, or an equal one (e.g. loaded again from its
        YAML in another process).
    :param snapshot: A `PipelineSnapshot` or the path of its JSON file.
    :param break_point: Another breakpoint to stop at after resuming (not the snapshot's own), or `None`.
    :param allowed_modules: Module patterns the snapshot's values may come from (default: `ALLOWED_MODULES`).
    :returns: The pipeline's outputs, as `pipeline.run` returns them (`["result"]` is the loop's result).
    :raises BreakpointException: When `break_point` is reached.
    :raises PipelineInvalidPipelineSnapshotError: If the snapshot names components the pipeline does not have.
    """
    with allowed_modules_context(allowed_modules):
        return pipeline.run({}, pipeline_snapshot=_snapshot(snapshot, allowed_modules), break_point=break_point)


async def resume_from_snapshot_async(
    pipeline: Pipeline,
    snapshot: PipelineSnapshot | Path | str,
    *,
    break_point: Breakpoint | None = None,
    allowed_modules: Iterable[str] = ALLOWED_MODULES,
) -> dict[str, Any]:
    """
    Async twin of `resume_from_snapshot`. Haystack 3's `Pipeline.run_async` cannot resume from a snapshot, so this
    runs `resume_from_snapshot` in a worker thread (the event loop stays free).

    :param pipeline: The loop pipeline (see `resume_from_snapshot`).
    :param snapshot: A `PipelineSnapshot` or the path of its JSON file.
    :param break_point: Another breakpoint to stop at after resuming, or `None`.
    :param allowed_modules: Module patterns the snapshot's values may come from (default: `ALLOWED_MODULES`).
    :returns: The pipeline's outputs.
    """
    return await asyncio.to_thread(
        resume_from_snapshot, pipeline, snapshot, break_point=break_point, allowed_modules=allowed_modules
    )
