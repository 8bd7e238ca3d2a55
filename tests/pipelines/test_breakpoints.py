# SPDX-License-Identifier: Apache-2.0
"""Breakpoints and snapshots: break the loop mid-run, save the snapshot to a file, resume it in a fresh pipeline."""

import json

import pytest
from conftest import QUESTION, answer, search
from haystack import Pipeline
from haystack.core.errors import BreakpointException, DeserializationError
from haystack.dataclasses.breakpoints import Breakpoint

from haystack_agentic import ALLOWED_MODULES
from haystack_agentic.pipelines.snapshots import load_snapshot, resume_from_snapshot, resume_from_snapshot_async
from haystack_agentic.grounding.citations import strip_markers

HOPS = [search("Big Stone Gap film director"), search("Adriana Trigiani"), answer("Greenwich Village")]


@pytest.fixture(autouse=True)
def _no_allow_list_in_the_environment(monkeypatch):
    """Resuming must work with the package's allow-list alone, not with the user's environment."""
    monkeypatch.delenv("HAYSTACK_DESERIALIZATION_ALLOWLIST", raising=False)
    monkeypatch.setenv("HAYSTACK_PIPELINE_SNAPSHOT_SAVE_ENABLED", "true")


def _break_at_second_search(pipeline: Pipeline, directory) -> str:
    """Run until the retriever's second visit (iteration 2); the path of the snapshot file written there."""
    point = Breakpoint(component_name="retriever", visit_count=1, snapshot_file_path=str(directory))
    with pytest.raises(BreakpointException) as caught:
        pipeline.run({"controller": {"query": QUESTION}}, break_point=point)
    assert caught.value.pipeline_snapshot_file_path is not None
    return caught.value.pipeline_snapshot_file_path


def test_a_loop_resumed_from_a_snapshot_file_in_a_fresh_pipeline_gives_the_uninterrupted_result(build_loop, tmp_path):
    loop = build_loop(HOPS)
    uninterrupted = loop.run()
    assert uninterrupted["iterations"] == 3
    path = _break_at_second_search(loop.pipeline, tmp_path)
    snapshot = json.loads(open(path, encoding="utf-8").read())
    assert snapshot["break_point"]["component_name"] == "retriever"
    assert snapshot["pipeline_state"]["component_visits"]["retriever"] == 1

    fresh = Pipeline.loads(loop.pipeline.dumps(), allowed_modules=ALLOWED_MODULES)
    resumed = resume_from_snapshot(fresh, path)["result"]
    assert resumed == uninterrupted
    assert [s["query"] for s in resumed["tool_history"] if s["action"] == "search"] == [
        "Big Stone Gap film director", "Adriana Trigiani"]


async def test_resume_from_snapshot_async(build_loop, tmp_path):
    loop = build_loop(HOPS)
    uninterrupted = loop.run()
    path = _break_at_second_search(loop.pipeline, tmp_path)
    fresh = Pipeline.loads(loop.pipeline.dumps(), allowed_modules=ALLOWED_MODULES)
    resumed = (await resume_from_snapshot_async(fresh, load_snapshot(path)))["result"]
    assert resumed == uninterrupted


def test_plain_haystack_resume_works_after_the_import(build_loop, tmp_path):
    """`import haystack_agentic` trusts its own modules: Haystack's own resume needs no allow-list."""
    loop = build_loop(HOPS)
    path = _break_at_second_search(loop.pipeline, tmp_path)
    result = loop.pipeline.run({}, pipeline_snapshot=load_snapshot(path))["result"]
    assert strip_markers(result["answer"]) == "Greenwich Village"
