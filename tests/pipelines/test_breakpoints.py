# SPDX-License-Identifier: Apache-2.0
"""Breakpoints and snapshots: break the loop mid-run, save the snapshot to a file, resume it in a fresh pipeline."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import QUESTION, SCRIPTED_MODULE, answer, load_yaml, search
from haystack import Pipeline
from haystack.core.errors import BreakpointException
from haystack.dataclasses.breakpoints import Breakpoint

from haystack_agentic.pipelines.snapshots import load_snapshot, resume_from_snapshot, resume_from_snapshot_async

ROOT = Path(__file__).resolve().parents[2]
HOPS = [search("Big Stone Gap film director"), search("Adriana Trigiani"), answer("Greenwich Village")]


@pytest.fixture(autouse=True)
def _no_allow_list_in_the_environment(monkeypatch):
    """Resuming must work with what the package allows, not with the user's environment."""
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

    fresh = load_yaml(loop.pipeline.dumps())
    resumed = resume_from_snapshot(fresh, path)["result"]
    assert resumed == uninterrupted
    assert [s["query"] for s in resumed["tool_history"] if s["action"] == "search"] == [
        "Big Stone Gap film director",
        "Adriana Trigiani",
    ]


async def test_resume_from_snapshot_async(build_loop, tmp_path):
    loop = build_loop(HOPS)
    uninterrupted = loop.run()
    path = _break_at_second_search(loop.pipeline, tmp_path)
    fresh = load_yaml(loop.pipeline.dumps())
    resumed = (await resume_from_snapshot_async(fresh, load_snapshot(path)))["result"]
    assert resumed == uninterrupted


def test_resuming_trusts_the_loop_state_module_and_no_other(build_loop, tmp_path):
    """Haystack's own resume refuses the snapshot's `LoopState` until `resume_from_snapshot` trusts its module (and
    nothing else: the pipeline's YAML stays refused without `allowed_modules`). A fresh process: no earlier resume."""
    loop = build_loop(HOPS)
    path = _break_at_second_search(loop.pipeline, tmp_path)
    (tmp_path / "loop.yml").write_text(loop.pipeline.dumps(), encoding="utf-8")
    code = f"""
        from pathlib import Path
        from haystack import Pipeline
        from haystack_agentic import allowed_modules_for, load_snapshot, resume_from_snapshot
        text = Path({str(tmp_path / "loop.yml")!r}).read_text()
        fresh = Pipeline.loads(text, allowed_modules=[*allowed_modules_for(text), {SCRIPTED_MODULE!r}])
        try:
            fresh.run({{}}, pipeline_snapshot=load_snapshot({path!r}))
            print("plain resume ran")
        except Exception as exc:
            print("plain resume refused" if "loop_state" in str(exc) else repr(exc))
        print(resume_from_snapshot(fresh, {path!r})["result"]["iterations"])
        try:
            Pipeline.loads(text)
            print("loaded")
        except Exception as exc:
            print(type(exc).__name__)
    """
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])},  # the scripted generator
    )
    assert result.stdout.split() == ["plain", "resume", "refused", "3", "DeserializationError"], result.stderr[-3000:]
