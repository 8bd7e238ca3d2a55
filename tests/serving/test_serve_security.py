# SPDX-License-Identifier: Apache-2.0
"""
What `haystack-agentic serve` exposes, attacked as a stranger would: runtime deployment (upload and run code) is
off by default on HTTP and MCP; `--allow-deploy` needs a key; with a key, nothing but the health checks answers
without it. Real servers on 127.0.0.1, started and stopped here (the default one is the `server` fixture).
"""

import json
import subprocess
import sys

import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from haystack_agentic import allowed_modules_for

from .conftest import SCRIPTED_YAML, serve_process, server_env, spoken, write_test_store

pytestmark = pytest.mark.integration

KEY = "test-key-0123456789abcdef"
QUESTION = "Where is Adriana Trigiani based?"
DEPLOY_TOOLS = {"deploy_pipeline", "undeploy_pipeline"}
JSON_RPC_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


def wrapper_code(marker) -> str:
    """A `pipeline_wrapper.py` that proves it ran: importing it writes `marker`."""
    return (
        f"from pathlib import Path\nPath({str(marker)!r}).write_text('ran')\n"
        "from hayhooks import BasePipelineWrapper\n\n"
        "class PipelineWrapper(BasePipelineWrapper):\n"
        "    def setup(self):\n        self.pipeline = None\n\n"
        "    def run_api(self, query: str) -> str:\n        return 'pwned: ' + query\n"
    )


async def mcp_session_call(url: str, headers: dict | None, call):
    async with httpx.AsyncClient(headers=headers or {}, timeout=30) as http:
        async with streamable_http_client(url, http_client=http) as (read, write, _):
            async with ClientSession(read, write) as session:
                await session.initialize()
                return await call(session)


def mcp_raw(url: str, method: str, params: dict | None = None, headers: dict | None = None) -> httpx.Response:
    """One JSON-RPC request over the streamable HTTP transport, without the SDK (stateless server)."""
    body = {"jsonrpc": "2.0", "id": 1, "method": method, **({"params": params} if params is not None else {})}
    return httpx.post(url + "/", json=body, headers={**JSON_RPC_HEADERS, **(headers or {})}, timeout=30)


def sse_result(response: httpx.Response) -> dict:
    """The JSON-RPC message in an SSE (or JSON) reply."""
    if response.headers.get("content-type", "").startswith("application/json"):
        return response.json()
    data = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
    return json.loads([d for d in data if d][-1])


# --- default: runtime deployment is off -------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/deploy_files", "/deploy-yaml", "/undeploy/scripted"])
def test_deploy_routes_answer_404_by_default(server, tmp_path, path):
    marker = tmp_path / "ran"
    body = {"name": "evil", "files": {"pipeline_wrapper.py": wrapper_code(marker)}, "source_code": "x: 1"}
    response = httpx.post(f"{server.url}{path}", json=body, timeout=30)
    assert response.status_code == 404, response.text
    assert not marker.exists()
    assert httpx.post(f"{server.url}/scripted/run", json={"query": QUESTION}, timeout=30).status_code == 200


def test_openapi_does_not_list_the_deploy_routes(server):
    paths = httpx.get(f"{server.url}/openapi.json", timeout=10).json()["paths"]
    assert not {"/deploy_files", "/deploy-yaml", "/undeploy/{pipeline_name}"} & paths.keys()
    assert "/scripted/run" in paths


async def test_mcp_neither_lists_nor_accepts_the_deploy_tools(server, tmp_path):
    marker = tmp_path / "ran"

    async def call(session):
        names = {tool.name for tool in (await session.list_tools()).tools}
        deploy = await session.call_tool(
            "deploy_pipeline",
            {
                "name": "evil",
                "files": {"pipeline_wrapper.py": wrapper_code(marker)},
                "save_files": False,
                "overwrite": False,
            },
        )
        undeploy = await session.call_tool("undeploy_pipeline", {"pipeline_name": "scripted"})
        still = await session.call_tool("scripted", {"query": QUESTION})
        return names, deploy, undeploy, still

    names, deploy, undeploy, still = await mcp_session_call(server.mcp_url, None, call)
    assert not DEPLOY_TOOLS & names
    assert {"scripted", "get_all_pipeline_statuses"} <= names  # the pipelines and the read-only tools stay
    for refused in (deploy, undeploy):
        assert refused.isError and "cannot be deployed or undeployed" in refused.content[0].text  # hayhooks' refusal
    assert not marker.exists()
    assert (
        not still.isError and spoken(json.loads(still.content[0].text)["result"]["answer"]) == f"Answer to: {QUESTION}"
    )


def test_mcp_deploy_tools_are_absent_over_raw_json_rpc(server, tmp_path):
    marker = tmp_path / "ran"
    listed = sse_result(mcp_raw(server.mcp_url, "tools/list", {}))
    assert not DEPLOY_TOOLS & {tool["name"] for tool in listed["result"]["tools"]}
    files = {"pipeline_wrapper.py": wrapper_code(marker)}
    arguments = {"name": "evil", "files": files, "save_files": False, "overwrite": False}
    called = sse_result(mcp_raw(server.mcp_url, "tools/call", {"name": "deploy_pipeline", "arguments": arguments}))
    assert called["result"]["isError"] is True
    assert not marker.exists()


# --- --allow-deploy needs a key ---------------------------------------------------------------------------


def _serve_exit(args: list[str], env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "haystack_agentic.cli.serve", "--pipeline", f"s={SCRIPTED_YAML}", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env or server_env(),
    )


def test_allow_deploy_without_a_key_refuses_to_start():
    done = _serve_exit(["--allow-deploy", "--port", "1", "--mcp-port", "0"])
    assert done.returncode == 2
    assert "--allow-deploy" in done.stderr and "API key" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_weak_key_refuses_to_start():  # more bad keys: test_security_helpers.py
    done = _serve_exit(["--api-key", "short", "--port", "1", "--mcp-port", "0"])
    assert done.returncode == 2 and "API key" in done.stderr


# --- with a key --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def keyed(tmp_path_factory):
    """A server with `--allow-deploy` and an API key from the environment."""
    root = tmp_path_factory.mktemp("keyed")
    env = {**server_env(), "HAYSTACK_AGENTIC_API_KEY": KEY}
    # hayhooks' deploy-yaml loads with no allow-list and `serve` exports none: the user trusts what they deploy
    trusted = allowed_modules_for(SCRIPTED_YAML.read_text())
    env["HAYSTACK_DESERIALIZATION_ALLOWLIST"] = ",".join([env["HAYSTACK_DESERIALIZATION_ALLOWLIST"], *trusted])
    args = [
        "--pipeline",
        f"scripted={SCRIPTED_YAML}",
        "--store",
        str(write_test_store(root / "store.json")),
        "--pipelines-dir",
        str(root / "pipelines"),
        "--allow-deploy",
    ]
    with serve_process(root, args, env=env, health="/health") as server:
        yield server


AUTH = {"authorization": f"Bearer {KEY}"}


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"authorization": "Bearer wrong-key-0123456789"},
        {"authorization": KEY},
        {"authorization": f"Basic {KEY}"},
        {"authorization": f"Bearer {KEY}x"},
    ],
)
@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("POST", "/scripted/run", {"query": QUESTION}),
        ("POST", "/v1/chat/completions", {"model": "scripted", "messages": [{"role": "user", "content": QUESTION}]}),
        ("GET", "/v1/models", None),
        ("GET", "/status", None),
        ("GET", "/openapi.json", None),
        ("POST", "/deploy-yaml", {"name": "y", "source_code": SCRIPTED_YAML.read_text()}),
        ("POST", "/undeploy/scripted", None),
    ],
)
def test_without_the_key_every_route_is_401(keyed, method, path, body, headers):
    response = httpx.request(method, f"{keyed.url}{path}", json=body, headers=headers, timeout=30)
    assert response.status_code == 401, response.text
    assert "Authorization: Bearer" in response.json()["detail"]
    assert response.headers["www-authenticate"].startswith("Bearer")


def test_mcp_without_the_key_is_401_and_status_stays_open(keyed):
    base = keyed.mcp_url.removesuffix("/mcp")
    assert mcp_raw(keyed.mcp_url, "tools/list", {}).status_code == 401
    assert httpx.post(f"{base}/messages/?session_id=x", json={}, timeout=10).status_code == 401
    assert httpx.get(f"{base}/sse", timeout=10).status_code == 401
    assert httpx.get(f"{base}/status", timeout=10).json() == {"status": "ok"}


def test_health_answers_without_the_key_and_says_nothing_else(keyed):
    response = httpx.get(f"{keyed.url}/health", timeout=10)
    assert response.status_code == 200 and response.json() == {"status": "ok"}


def test_with_the_key_run_and_chat_work_and_an_unlisted_origin_gets_no_cors(keyed):
    run = httpx.post(f"{keyed.url}/scripted/run", json={"query": QUESTION}, headers=AUTH, timeout=30)
    assert run.status_code == 200 and spoken(run.json()["result"]["result"]["answer"]) == f"Answer to: {QUESTION}"
    chat = httpx.post(
        f"{keyed.url}/v1/chat/completions",
        headers=AUTH,
        timeout=30,
        json={"model": "scripted", "messages": [{"role": "user", "content": QUESTION}]},
    )
    assert spoken(chat.json()["choices"][0]["message"]["content"]) == f"Answer to: {QUESTION}"
    preflight = httpx.options(
        f"{keyed.url}/scripted/run",
        timeout=10,
        headers={"origin": "http://example.org", "access-control-request-method": "POST"},
    )
    assert "access-control-allow-origin" not in preflight.headers  # no --cors-origin: no cross-origin reads


async def test_mcp_with_the_key_lists_the_deploy_tools_when_deploy_is_allowed(keyed):
    async def call(session):
        return {tool.name for tool in (await session.list_tools()).tools}

    assert DEPLOY_TOOLS | {"scripted"} <= await mcp_session_call(keyed.mcp_url, AUTH, call)


def test_with_the_key_deployment_works_and_a_refused_yaml_is_a_422(keyed, tmp_path):
    marker = tmp_path / "ran"
    files = {"pipeline_wrapper.py": wrapper_code(marker)}
    deployed = httpx.post(
        f"{keyed.url}/deploy_files",
        headers=AUTH,
        timeout=60,
        json={"name": "uploaded", "files": files, "save_files": False},
    )
    assert deployed.status_code == 200, deployed.text
    assert marker.read_text() == "ran"  # --allow-deploy does run uploaded code: hence the key
    yaml_deploy = httpx.post(
        f"{keyed.url}/deploy-yaml",
        headers=AUTH,
        timeout=60,
        json={"name": "yaml_deployed", "source_code": SCRIPTED_YAML.read_text()},
    )
    assert yaml_deploy.status_code == 200, yaml_deploy.text
    result = httpx.post(f"{keyed.url}/yaml_deployed/run", json={"query": QUESTION}, headers=AUTH, timeout=30)
    assert spoken(result.json()["result"]["result"]["answer"]) == f"Answer to: {QUESTION}"
    refused = "components:\n  x:\n    type: os.system\n    init_parameters: {}\nconnections: []\n"
    refused += "inputs: {q: x.command}\noutputs: {r: x.r}\n"
    response = httpx.post(
        f"{keyed.url}/deploy-yaml", headers=AUTH, timeout=60, json={"name": "refused", "source_code": refused}
    )
    assert response.status_code == 422, response.text
    assert "allowlist" in response.text and "os" in response.text
    broken = httpx.post(
        f"{keyed.url}/deploy-yaml", headers=AUTH, timeout=60, json={"name": "broken", "source_code": ": : :"}
    )
    assert broken.status_code == 422, broken.text
    undeployed = httpx.post(f"{keyed.url}/undeploy/uploaded", headers=AUTH, timeout=30)
    assert undeployed.status_code == 200
    assert httpx.post(f"{keyed.url}/uploaded/run", json={"query": "x"}, headers=AUTH, timeout=30).status_code == 404


def test_an_openai_client_sends_the_key_as_its_api_key(keyed):
    import openai

    messages = [{"role": "user", "content": QUESTION}]
    client = openai.OpenAI(base_url=f"{keyed.url}/v1", api_key=KEY, max_retries=0)
    assert client.chat.completions.create(model="scripted", messages=messages).choices[0].message.content
    wrong = openai.OpenAI(base_url=f"{keyed.url}/v1", api_key="not-the-key-0123456789", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        wrong.chat.completions.create(model="scripted", messages=messages)
