# SPDX-License-Identifier: Apache-2.0
"""
A real hayhooks server for the serving tests: `python -m haystack_agentic.cli.serve` on 127.0.0.1 and a free port,
serving the test-only scripted loop (`scripted`, LLM latency 0), a slow copy (`slow`, 1 s per LLM call) and the
same YAML as a plain hayhooks YAML pipeline (`plain`). Started once per module, polled until `/status` answers
(with a deadline), stopped afterwards.
"""

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import yaml
from haystack.document_stores.in_memory import InMemoryDocumentStore

from conftest import DOCS  # the unit tests' documents

HERE = Path(__file__).resolve().parent
SCRIPTED_YAML = HERE / "scripted_loop.yml"
SLOW_LATENCY = 1.0
START_DEADLINE = 60.0


#: Scripts for the misbehaving-LLM pipelines: one whose LLM raises, one that only sends malformed tool calls.
BAD_SCRIPTS = {
    "raising": [{"raise": "LLM exploded"}],
    "garbage": [{"tool_calls": [{"tool_name": "search", "arguments": "{not json"}]}],
}


def with_script(script: list) -> str:
    """The scripted YAML with another script for its router's LLM."""
    data = yaml.safe_load(SCRIPTED_YAML.read_text())
    data["components"]["router"]["init_parameters"]["chat_generator"]["init_parameters"]["script"] = script
    return yaml.safe_dump(data)


def free_port() -> int:
    """A TCP port that was free a moment ago on 127.0.0.1."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until_up(url: str, process: subprocess.Popen, deadline: float, log: Path) -> None:
    """Poll `url` until it answers 200, the process dies, or `deadline` (monotonic seconds) passes."""
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"The server exited with {process.returncode}:\n{log.read_text()[-3000:]}")
        try:
            if httpx.get(url, timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"The server did not answer {url} in time:\n{log.read_text()[-3000:]}")


def stop(process: subprocess.Popen) -> None:
    """Stop a server we started: SIGTERM, then SIGKILL if it has not exited within 10 s."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)


@dataclass
class Server:
    """A running server: its base URLs and working directory."""

    url: str
    mcp_url: str
    port: int
    directory: Path
    env: dict


def server_env() -> dict:
    env = dict(os.environ)
    env["HAYSTACK_TELEMETRY_ENABLED"] = "False"
    env["HAYHOOKS_TRACING_ENABLED"] = "false"
    env.pop("OPENAI_API_KEY", None)
    return env


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Server:
    """The serving-test hayhooks server (see the module docstring)."""
    root = tmp_path_factory.mktemp("serve")
    store_path = root / "store.json"
    store = InMemoryDocumentStore()
    store.write_documents(DOCS)
    store.save_to_disk(str(store_path))
    slow_yaml = root / "slow_loop.yml"
    slow_yaml.write_text(SCRIPTED_YAML.read_text().replace("latency: 0.0", f"latency: {SLOW_LATENCY}"))
    extra = []
    for name, script in BAD_SCRIPTS.items():
        (root / f"{name}.yml").write_text(with_script(script))
        extra += ["--pipeline", f"{name}={root / f'{name}.yml'}"]
    directory = root / "pipelines"
    directory.mkdir()
    (directory / "plain.yml").write_text(SCRIPTED_YAML.read_text())
    port, mcp_port = free_port(), free_port()
    log = root / "server.log"
    env = server_env()
    with open(log, "w") as out:
        process = subprocess.Popen(
            [
                sys.executable, "-m", "haystack_agentic.cli.serve",
                "--port", str(port), "--mcp-port", str(mcp_port),
                "--pipeline", f"scripted={SCRIPTED_YAML}", "--pipeline", f"slow={slow_yaml}",
                "--pipelines-dir", str(directory), "--store", str(store_path), *extra,
            ],
            stdout=out, stderr=subprocess.STDOUT, env=env, cwd=root,
        )  # fmt: skip
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + START_DEADLINE
        wait_until_up(f"{url}/status", process, deadline, log)
        wait_until_up(f"http://127.0.0.1:{mcp_port}/status", process, deadline, log)
        # The pipelines deploy in the app's start-up, so /status answering means they are deployed.
        yield Server(url=url, mcp_url=f"http://127.0.0.1:{mcp_port}/mcp", port=port, directory=directory, env=env)
    finally:
        stop(process)
