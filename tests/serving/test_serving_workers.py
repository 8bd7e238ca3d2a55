# SPDX-License-Identifier: Apache-2.0
"""
`haystack-agentic serve --workers 2`: stateless HTTP workers (each loads its own pipeline, building the app from
our factory) and one MCP process beside them (our MCP runner), all on 127.0.0.1, started for this module and
stopped afterwards. The server runs with an API key (from the environment, as the workers and the MCP process
get it) and without `--allow-deploy`.
"""

import asyncio
import json
import subprocess
import sys
import time

import httpx
import pytest
from conftest import DOCS
from haystack.document_stores.in_memory import InMemoryDocumentStore
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from .conftest import SCRIPTED_YAML, SLOW_LATENCY, START_DEADLINE, free_port, server_env, spoken, stop, wait_until_up

pytestmark = pytest.mark.integration

QUESTION = "Where is Adriana Trigiani based?"
KEY = "workers-key-0123456789"
AUTH = {"authorization": f"Bearer {KEY}"}


@pytest.fixture(scope="module")
def workers(tmp_path_factory):
    root = tmp_path_factory.mktemp("workers")
    store_path = root / "store.json"
    store = InMemoryDocumentStore()
    store.write_documents(DOCS)
    store.save_to_disk(str(store_path))
    slow_yaml = root / "slow_loop.yml"
    slow_yaml.write_text(SCRIPTED_YAML.read_text().replace("latency: 0.0", f"latency: {SLOW_LATENCY}"))
    port, mcp_port = free_port(), free_port()
    log = root / "server.log"
    with open(log, "w") as out:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "haystack_agentic.cli.serve",
                "--workers",
                "2",
                "--port",
                str(port),
                "--mcp-port",
                str(mcp_port),
                "--pipeline",
                f"scripted={SCRIPTED_YAML}",
                "--pipeline",
                f"slow={slow_yaml}",
                "--pipelines-dir",
                str(root / "pipelines"),
                "--store",
                str(store_path),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**server_env(), "HAYSTACK_AGENTIC_API_KEY": KEY},
            cwd=root,
        )
    try:
        deadline = time.monotonic() + START_DEADLINE
        url = f"http://127.0.0.1:{port}"
        wait_until_up(f"{url}/health", process, deadline, log)
        wait_until_up(f"http://127.0.0.1:{mcp_port}/status", process, deadline, log)
        yield url, f"http://127.0.0.1:{mcp_port}/mcp", process
    finally:
        stop(process)
    # The MCP process and the workers go with the supervisor.
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"http://127.0.0.1:{mcp_port}/status", timeout=1.0)
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"http://127.0.0.1:{port}/status", timeout=1.0)


@pytest.mark.slow  # asserts on wall-clock time
async def test_concurrent_questions_across_workers_keep_their_own_trace(workers):
    url, _, _ = workers
    questions = [f"Question {i}: where is Adriana Trigiani based?" for i in range(8)]
    async with httpx.AsyncClient(base_url=url, timeout=60, headers=AUTH) as client:
        start = time.perf_counter()
        responses = await asyncio.gather(*(client.post("/slow/run", json={"query": q}) for q in questions))
        elapsed = time.perf_counter() - start
    assert elapsed < 2 * SLOW_LATENCY + 1.5
    for question, response in zip(questions, responses, strict=True):
        assert response.status_code == 200, response.text
        result = response.json()["result"]["result"]
        assert spoken(result["answer"]) == f"Answer to: {question}"
        assert result["tool_history"][0]["query"] == question


def test_bad_request_is_a_4xx_on_every_worker(workers):
    url, _, _ = workers
    for _ in range(4):
        assert httpx.post(f"{url}/scripted/run", json={"query": "  "}, headers=AUTH, timeout=10).status_code == 422


async def test_mcp_runs_beside_the_workers(workers):
    _, mcp_url, _ = workers
    async with httpx.AsyncClient(headers=AUTH, timeout=30) as http:
        async with streamable_http_client(mcp_url, http_client=http) as (read, write, _):
            async with ClientSession(read, write) as session:
                await session.initialize()
                names = {tool.name for tool in (await session.list_tools()).tools}
                assert {"scripted", "slow"} <= names
                assert not {"deploy_pipeline", "undeploy_pipeline"} & names
                files = {"pipeline_wrapper.py": ""}
                assert (await session.call_tool("deploy_pipeline", {"name": "x", "files": files})).isError
                called = await session.call_tool("scripted", {"query": QUESTION})
                assert spoken(json.loads(called.content[0].text)["result"]["answer"]) == f"Answer to: {QUESTION}"


def test_every_worker_keeps_deployment_off_and_asks_for_the_key(workers):
    url, mcp_url, _ = workers
    for _ in range(4):  # several connections: requests reach both workers
        assert httpx.post(f"{url}/deploy_files", json={}, headers=AUTH, timeout=10).status_code == 404
        assert httpx.post(f"{url}/undeploy/scripted", headers=AUTH, timeout=10).status_code == 404
        assert httpx.post(f"{url}/scripted/run", json={"query": QUESTION}, timeout=10).status_code == 401
    assert httpx.post(mcp_url + "/", json={}, timeout=10).status_code == 401
