# SPDX-License-Identifier: Apache-2.0
"""
A real hayhooks server for the serving tests: `python -m haystack_agentic.cli.serve` on 127.0.0.1 and a free port,
serving the test-only scripted loop (`scripted`, LLM latency 0), a slow copy (`slow`, 1 s per LLM call), copies
whose LLM misbehaves (`raising`, `garbage`), one whose pipeline itself crashes (`crashing`, one run per component),
one with an answer LLM that streams its answer (`streaming`), others whose answer LLM marks chunks
(`MARKED_ANSWERS`), the same whose result has citations (`cited`, made by
the test double `citing_result.CitingResultBuilder`, its second citation unsupported), one whose controller needs
the chat history (`history`) and the same YAML as a plain hayhooks YAML pipeline (`plain`). Started once per
session, polled until `/status`
answers (with a deadline), stopped after the session. `serve_process` starts other configurations the same way.
"""

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import yaml
from citing_result import CITING_TYPE, with_citations  # tests/citing_result.py
from conftest import DOCS, SCRIPTED_MODULE  # the unit tests' documents
from haystack.document_stores.in_memory import InMemoryDocumentStore

from haystack_agentic import allowed_modules_for
from haystack_agentic.grounding.markers import strip_markers

HERE = Path(__file__).resolve().parent
SCRIPTED_YAML = HERE / "scripted_loop.yml"
SLOW_LATENCY = 1.0
START_DEADLINE = 120.0  # a deadline, not a wait: start-up takes ~10 s alone, ~60 s on a loaded 2-core machine


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


#: The answer LLM's reply in the `streaming` pipeline (written token by token).
STREAMED_ANSWER = "Adriana Trigiani is based in Greenwich Village, New York City."

#: Answer LLM replies that mark their chunks in different ways, one `streaming`-like pipeline each (the real citation
#: step, which leaves the model's markers out and cites from the chunks): the model marks chunk [3] only; an earlier
#: sentence only; the last sentence only. `streaming` itself is the reply that marks nothing.
MARKED_ANSWERS = {
    "marks-3": "Adriana Trigiani is based in Greenwich Village, New York City [3].",
    "marks-earlier": "Adriana Trigiani directed Big Stone Gap [1]. She is based in Greenwich Village, New York City.",
    "loop-cites-earlier": (
        "She is based in Greenwich Village, New York City. Adriana Trigiani directed Big Stone Gap [2]."
    ),
}

#: The controller of the `history` pipeline: it searches for the entity named by the assistant in the conversation
#: it receives (so it needs the earlier turns), then answers from the search result. One assistant message is in
#: the history, so its first turn is turn 1 (turn 0, giving up, is what it plays when no history reached it).
HISTORY_SCRIPT = [
    {"tool_calls": [{"tool_name": "give_up", "arguments": {"reason": "no history reached me"}}]},
    {
        "template": True,
        "tool_calls": [
            {
                "tool_name": "search",
                "arguments": {
                    "query": (
                        "{% for m in messages %}{% if m.role == 'assistant' and m.text %}{{ m.text }}"
                        "{% endif %}{% endfor %}"
                    )
                },
            }
        ],
    },
    {
        "template": True,
        "tool_calls": [
            {
                "tool_name": "answer",
                "arguments": {
                    "text": (
                        "{% if 'Greenwich Village' in last_message %}Greenwich Village{% else %}not found{% endif %}"
                    )
                },
            }
        ],
    },
]


def with_answer_llm(text: str) -> str:
    """The scripted YAML with an answer LLM that rewrites every draft into `text`."""
    data = yaml.safe_load(SCRIPTED_YAML.read_text())
    llm = dict(data["components"]["router"]["init_parameters"]["chat_generator"])
    llm["init_parameters"] = {**llm["init_parameters"], "script": [{"text": text}], "per_call": True}
    data["components"]["answerer"]["init_parameters"]["chat_generator"] = llm
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
            msg = f"The server exited with {process.returncode}:\n{log.read_text()[-3000:]}"
            raise RuntimeError(msg)
        try:
            if httpx.get(url, timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    msg = f"The server did not answer {url} in time:\n{log.read_text()[-3000:]}"
    raise RuntimeError(msg)


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
    process: subprocess.Popen | None = None
    log: Path | None = None


def server_env() -> dict:
    env = dict(os.environ)
    env["HAYSTACK_TELEMETRY_ENABLED"] = "False"
    # The scripted test LLM of the served YAMLs: the user's trust (`serve` and its loaders trust none of it).
    env["HAYSTACK_DESERIALIZATION_ALLOWLIST"] = SCRIPTED_MODULE
    env["HAYHOOKS_TRACING_ENABLED"] = "false"
    env.pop("OPENAI_API_KEY", None)
    # The server imports this checkout's package (the virtualenv's editable install may point at another one) and
    # the test doubles in tests/ (the scripted LLM of the served YAMLs).
    paths = [str(HERE.parent), str(HERE.parent.parent), env.get("PYTHONPATH")]
    env["PYTHONPATH"] = os.pathsep.join(filter(None, paths))
    return env


def citing_env() -> dict:
    """`server_env()` with the citation test double (in `tests/`, on the path) allowed in YAML."""
    env = server_env()
    allowed = env.get("HAYSTACK_DESERIALIZATION_ALLOWLIST")
    env["HAYSTACK_DESERIALIZATION_ALLOWLIST"] = ",".join(filter(None, [allowed, CITING_TYPE.rsplit(".", 1)[0]]))
    return env


def write_test_store(path: Path) -> Path:
    """Save the unit tests' documents as an in-memory store file at `path`."""
    store = InMemoryDocumentStore()
    store.write_documents(DOCS)
    store.save_to_disk(str(path))
    return path


@contextmanager
def serve_process(root: Path, args: list[str], env: dict | None = None, health: str = "/status") -> Iterator[Server]:
    """
    Run `python -m haystack_agentic.cli.serve` with `args` (plus a free `--port` and `--mcp-port`) in `root`, wait
    until its HTTP `health` path and the MCP port's `/status` answer 200, yield it, then stop it by pid.
    """
    log = root / "server.log"
    env = env or server_env()
    for attempt in range(3):  # a port free a moment ago can be taken before the server binds it: new ports then
        port, mcp_port = free_port(), free_port()
        with open(log, "w") as out:
            process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "haystack_agentic.cli.serve",
                    "--port",
                    str(port),
                    "--mcp-port",
                    str(mcp_port),
                    *args,
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=root,
            )
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + START_DEADLINE
        try:
            wait_until_up(f"{url}{health}", process, deadline, log)
            wait_until_up(f"http://127.0.0.1:{mcp_port}/status", process, deadline, log)
            break
        except RuntimeError:
            stop(process)
            if attempt == 2 or "address already in use" not in log.read_text():
                raise
    try:
        yield Server(
            url=url,
            mcp_url=f"http://127.0.0.1:{mcp_port}/mcp",
            port=port,
            directory=root,
            env=env,
            process=process,
            log=log,
        )
    finally:
        stop(process)


def bad_script_pipelines(root: Path) -> list[str]:
    """`--pipeline` arguments for the misbehaving-LLM pipelines (`BAD_SCRIPTS`), their YAML written into `root`."""
    extra = []
    for name, script in BAD_SCRIPTS.items():
        (root / f"{name}.yml").write_text(with_script(script))
        extra += ["--pipeline", f"{name}={root / f'{name}.yml'}"]
    return extra


@pytest.fixture(scope="session")
def server(tmp_path_factory) -> Server:
    """The serving-test hayhooks server (see the module docstring)."""
    root = tmp_path_factory.mktemp("serve")
    slow_yaml = root / "slow_loop.yml"
    slow_yaml.write_text(SCRIPTED_YAML.read_text().replace("latency: 0.0", f"latency: {SLOW_LATENCY}"))
    crashing = yaml.safe_load(SCRIPTED_YAML.read_text())
    crashing["max_runs_per_component"] = 1
    (root / "crashing.yml").write_text(yaml.safe_dump(crashing))
    directory = root / "pipelines"
    directory.mkdir()
    (directory / "plain.yml").write_text(SCRIPTED_YAML.read_text())
    (root / "streaming.yml").write_text(with_answer_llm(STREAMED_ANSWER))
    (root / "history.yml").write_text(with_script(HISTORY_SCRIPT))
    marked = []
    for name, text in MARKED_ANSWERS.items():
        (root / f"{name}.yml").write_text(with_answer_llm(text))
        marked += ["--pipeline", f"{name}={root / f'{name}.yml'}"]
    cited = with_citations(yaml.safe_load(with_answer_llm(STREAMED_ANSWER)), unsupported=[2])
    (root / "cited.yml").write_text(yaml.safe_dump(cited))
    args = [
        "--pipeline",
        f"scripted={SCRIPTED_YAML}",
        "--pipeline",
        f"slow={slow_yaml}",
        "--pipeline",
        f"crashing={root / 'crashing.yml'}",
        *bad_script_pipelines(root),
        "--pipeline",
        f"streaming={root / 'streaming.yml'}",
        "--pipeline",
        f"history={root / 'history.yml'}",
        "--pipeline",
        f"cited={root / 'cited.yml'}",
        *marked,
        "--pipelines-dir",
        str(directory),
        "--store",
        str(write_test_store(root / "store.json")),
    ]
    env = citing_env()  # `plain.yml` is hayhooks' to load, with no allow-list: the user trusts the modules it names
    env["HAYSTACK_DESERIALIZATION_ALLOWLIST"] += "," + ",".join(allowed_modules_for(SCRIPTED_YAML.read_text()))
    with serve_process(root, args, env) as running:
        # The pipelines deploy in the app's start-up, so /status answering means they are deployed.
        yield running


def spoken(text: str | None) -> str | None:
    """An answer or chat reply without its `[n]` markers and Sources block: what the scripted LLM said."""
    if text is None:
        return None
    return strip_markers(text.split("\n\nSources:", 1)[0])
