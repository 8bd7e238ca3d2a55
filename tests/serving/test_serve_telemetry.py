# SPDX-License-Identifier: Apache-2.0
"""
Nothing of ours sends Haystack telemetry unless the user turns it on (issue 39): a real `serve` on 127.0.0.1 with
the telemetry client intercepted in every Python process it runs (a `sitecustomize` on `PYTHONPATH` replaces
`posthog.capture`, Haystack's only sender, with a recorder), one run and one chat request.
"""

import subprocess
import sys
import textwrap

import httpx
import pytest

from .conftest import SCRIPTED_YAML, serve_process, server_env, write_test_store

#: Installed by Python at start-up in every process with this folder on `PYTHONPATH` (the server's children too).
SITECUSTOMIZE = """
import os
import posthog

_LOG = os.environ["TELEMETRY_TEST_LOG"]


def _record(*args, **kwargs):
    with open(_LOG, "a", encoding="utf-8") as out:
        out.write(f"event {os.getpid()} {kwargs.get('event')}\\n")


posthog.capture = _record
with open(_LOG, "a", encoding="utf-8") as out:
    out.write(f"intercepting {os.getpid()}\\n")
"""

#: A pipeline run in a plain process: what Haystack reports when nothing turns its telemetry off.
ONE_RUN = """
from haystack import Pipeline
from haystack.components.builders import PromptBuilder
pipeline = Pipeline()
pipeline.add_component("prompt", PromptBuilder("{{ x }}"))
pipeline.run({"prompt": {"x": "hi"}})
"""


def _intercepting_env(tmp_path) -> tuple[dict, object]:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
    log = tmp_path / "telemetry.log"
    env = server_env()
    env.pop("HAYSTACK_TELEMETRY_ENABLED", None)  # the user did not set it
    env["PYTHONPATH"] = f"{site}:{env['PYTHONPATH']}"
    env["TELEMETRY_TEST_LOG"] = str(log)
    return env, log


def _events(log) -> list[str]:
    return [line for line in log.read_text(encoding="utf-8").splitlines() if line.startswith("event ")]


def test_the_interception_sees_haystacks_telemetry_in_a_plain_process(tmp_path):
    """The control: without our entry points, Haystack's default sends a pipeline-run event, and we see it."""
    env, log = _intercepting_env(tmp_path)
    subprocess.run([sys.executable, "-c", textwrap.dedent(ONE_RUN)], env=env, cwd=tmp_path, check=True, timeout=300)
    assert any("Pipeline run" in event for event in _events(log)), log.read_text(encoding="utf-8")


@pytest.mark.integration  # a real server
@pytest.mark.slow  # start-up takes 10-60 s
def test_serve_sends_no_telemetry_for_a_run_and_a_chat_request(tmp_path):
    env, log = _intercepting_env(tmp_path)
    args = ["--pipeline", f"scripted={SCRIPTED_YAML}", "--store", str(write_test_store(tmp_path / "store.json"))]
    with serve_process(tmp_path, args, env=env) as server:
        run = httpx.post(f"{server.url}/scripted/run", json={"query": "Who directed Big Stone Gap?"}, timeout=60)
        assert run.status_code == 200, run.text
        chat = httpx.post(
            f"{server.url}/v1/chat/completions",
            timeout=60,
            json={"model": "scripted", "messages": [{"role": "user", "content": "Who directed Big Stone Gap?"}]},
        )
        assert chat.status_code == 200, chat.text
        assert chat.json()["choices"][0]["message"]["content"]
    lines = log.read_text(encoding="utf-8").splitlines()
    assert any(line.startswith("intercepting") for line in lines)  # the served process was watched
    assert _events(log) == []
