# SPDX-License-Identifier: Apache-2.0
"""
Fuzz the real server: at least 1,000 generated malformed requests (see `fuzz_requests.py`) to every endpoint
`haystack-agentic serve` exposes, deployment routes included (the server runs with `--allow-deploy` and a key, and
most requests carry it). No answer may be a 5xx or a broken connection, and the server must still answer after.

`FUZZ_EXAMPLES` (default 1100) sets the number of requests, `FUZZ_RANDOM=1` draws new ones each run (default: the
same ones every run); `FUZZ_API_KEY=0` runs the server as `serve` starts by default instead (no key, no
deployment: the deploy routes answer 404); the counts per status code are printed (`pytest -s`).
"""

import os

import httpx
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from .conftest import SCRIPTED_YAML, bad_script_pipelines, serve_process, spoken, write_test_store
from .fuzz_requests import FuzzLog, any_request, send

pytestmark = pytest.mark.integration

KEY = "fuzz-key-0123456789"
EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "1100"))
WITH_KEY = os.environ.get("FUZZ_API_KEY", "1") != "0"
QUESTION = "Where is Adriana Trigiani based?"


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzz")
    directory = root / "pipelines"
    directory.mkdir()
    (directory / "plain.yml").write_text(SCRIPTED_YAML.read_text())
    args = [
        "--pipeline",
        f"scripted={SCRIPTED_YAML}",
        *bad_script_pipelines(root),
        "--pipelines-dir",
        str(directory),
        "--store",
        str(write_test_store(root / "store.json")),
    ]
    if WITH_KEY:
        args += ["--allow-deploy", "--api-key", KEY]
    with serve_process(root, args, health="/health" if WITH_KEY else "/status") as server:
        yield server


def test_no_malformed_request_gets_a_5xx_and_the_server_survives(fuzzed):
    log = FuzzLog()
    mcp_base = fuzzed.mcp_url.removesuffix("/mcp")
    auths = st.sampled_from([f"Bearer {KEY}"] * 12 + [None, "Bearer wrong", f"Basic {KEY}"])

    with httpx.Client(timeout=20) as client:

        @settings(
            max_examples=EXAMPLES,
            phases=[Phase.generate],
            deadline=None,
            database=None,
            derandomize=not os.environ.get("FUZZ_RANDOM"),
            suppress_health_check=list(HealthCheck),
        )
        @given(request=any_request, auth=auths)
        def one_request(request, auth):
            send(client, mcp_base if request.mcp else fuzzed.url, request, log, auth)

        one_request()

        print(f"\n{EXAMPLES} requests, server {'with' if WITH_KEY else 'without'} --api-key\n" + log.summary())
        assert log.total >= 1000
        assert {"run", "chat", "chat-stream", "mcp", "mcp-sse-messages", "deploy"} <= log.by_endpoint.keys()
        assert not log.failures, "\n".join(log.failures[:20])
        # Alive after: health, a real question, and MCP.
        assert client.get(f"{fuzzed.url}/health").status_code == 200
        reply = client.post(
            f"{fuzzed.url}/scripted/run", json={"query": QUESTION}, headers={"authorization": f"Bearer {KEY}"}
        )
        assert (
            reply.status_code == 200 and spoken(reply.json()["result"]["result"]["answer"]) == f"Answer to: {QUESTION}"
        )
        assert client.get(f"{mcp_base}/status").status_code == 200
