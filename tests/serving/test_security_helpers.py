# SPDX-License-Identifier: Apache-2.0
"""Unit tests of the serving layer's safety pieces (no server): the API-key middleware, key and host checks,
JSON-safe error bodies, the MCP app without deploy tools, and what `serve` prints and refuses before it starts."""

import json
import math

import pytest
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from haystack_agentic.serving.app import MAX_ECHOED_CHARS, json_safe
from haystack_agentic.serving.security import ServeSecurity, bearer_auth, check_api_key, is_loopback

from .conftest import SCRIPTED_YAML

KEY = "unit-key-0123456789abcdef"


def _client() -> TestClient:
    async def hello(request):
        return PlainTextResponse("hello")

    app = Starlette(
        routes=[
            Route("/x", hello, methods=["GET", "POST", "OPTIONS"]),
            Route("/health", hello),
            Route("/traces/y", hello),
        ]
    )
    return TestClient(bearer_auth(app, api_key=KEY, open_paths={"/health"}, open_prefixes=("/traces",)))


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"authorization": ""},
        {"authorization": "Bearer"},
        {"authorization": f"Bearer {KEY[:-1]}"},
        {"authorization": f"Bearer {KEY}0"},
        {"authorization": f"Token {KEY}"},
        {"authorization": KEY},
        {"authorization": "Bearer ключ".encode()},  # raw non-ASCII bytes
    ],
)
def test_a_request_without_the_right_key_is_401_with_a_hint(headers):
    response = _client().get("/x", headers=headers)
    assert response.status_code == 401
    assert "Authorization: Bearer <key>" in response.json()["detail"]
    assert response.headers["www-authenticate"].startswith("Bearer")


@pytest.mark.parametrize("value", [f"Bearer {KEY}", f"bearer {KEY}", f"BEARER  {KEY} "])
def test_the_right_key_passes(value):
    assert _client().post("/x", headers={"authorization": value}).text == "hello"


def test_two_authorization_headers_are_refused():
    client = _client()
    response = client.get("/x", headers=[("authorization", f"Bearer {KEY}"), ("authorization", "Bearer other")])
    assert response.status_code == 401


def test_health_traces_and_cors_preflights_pass_without_a_key():
    client = _client()
    assert client.get("/health").text == "hello"
    assert client.get("/traces/y").text == "hello"  # hayhooks checks its own tracing token there
    assert client.options("/x").status_code == 200
    assert client.get("/healthz").status_code == 401


@pytest.mark.parametrize("key", ["short", "x" * 15, "with space inside 123", "tab\tinside-0123456789", "é" * 20])
def test_weak_or_unsendable_keys_are_refused(key):
    with pytest.raises(ValueError, match="API key"):
        check_api_key(key)


def test_a_good_key_is_accepted():
    assert check_api_key(KEY) == KEY


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.4.5.6", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("192.168.1.10", False),
        ("example.org", False),
        ("", False),
    ],
)
def test_is_loopback(host, loopback):
    assert is_loopback(host) is loopback


def test_security_settings_travel_through_the_environment():
    env: dict[str, str] = {}
    ServeSecurity(api_key=KEY, allow_deploy=True).to_env(env)
    network = {
        "HAYSTACK_AGENTIC_CORS_ORIGINS": "",
        "HAYSTACK_AGENTIC_ALLOWED_HOSTS": "",
        "HAYHOOKS_HOST": "127.0.0.1",
        "HAYSTACK_AGENTIC_MAX_BODY_BYTES": "1048576",
        "HAYSTACK_AGENTIC_MAX_MESSAGES": "1000",
    }
    assert env == {"HAYSTACK_AGENTIC_API_KEY": KEY, "HAYSTACK_AGENTIC_ALLOW_DEPLOY": "1", **network}
    ServeSecurity().to_env(env)
    assert env == {"HAYSTACK_AGENTIC_ALLOW_DEPLOY": "0", **network}


def test_request_limits_travel_through_the_environment_and_refuse_bad_values(monkeypatch):
    env: dict[str, str] = {}
    ServeSecurity(max_body_bytes=2048, max_messages=7).to_env(env)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    limits = ServeSecurity.from_env()
    assert (limits.max_body_bytes, limits.max_messages) == (2048, 7)
    for value in ("0", "-1", "1.5", "lots", "1e6"):
        monkeypatch.setenv("HAYSTACK_AGENTIC_MAX_MESSAGES", value)
        with pytest.raises(ValueError, match="HAYSTACK_AGENTIC_MAX_MESSAGES must be a whole number"):
            ServeSecurity.from_env()


def test_json_safe_makes_any_error_body_encodable():
    value = {"input": [math.nan, math.inf, "\ud800x", "y" * (MAX_ECHOED_CHARS + 5), b"raw", {1: None}], "ok": 1.5}
    safe = json_safe(value)
    text = json.dumps(safe, allow_nan=False, ensure_ascii=False)
    text.encode("utf-8")  # no lone surrogate left
    assert safe["input"][:3] == ["nan", "inf", "\\ud800x"]
    assert safe["input"][3].endswith(f"({MAX_ECHOED_CHARS + 5} characters)")
    assert safe["input"][4:] == ["b'raw'", {"1": None}] and safe["ok"] == 1.5


def _mcp_rpc(client: TestClient, method: str, params: dict, headers: dict | None = None) -> dict:
    """One JSON-RPC request to the MCP app's streamable HTTP transport (stateless): the reply's message."""
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    reply = client.post(
        "/mcp/", json=body, headers={"accept": "application/json, text/event-stream", **(headers or {})}
    )
    assert reply.status_code == 200, reply.text
    data = [line[5:].strip() for line in reply.text.splitlines() if line.startswith("data:")]
    return json.loads([d for d in data if d][-1])


def test_without_deploy_the_mcp_app_neither_lists_nor_runs_the_deploy_tools():
    from hayhooks.server.pipelines.registry import ImmutablePipelineRegistry

    from haystack_agentic.serving.mcp_server import create_mcp_app

    app = create_mcp_app(ServeSecurity(), registry=ImmutablePipelineRegistry())  # hayhooks' fixed registry
    with TestClient(app, base_url="http://127.0.0.1") as client:
        names = {tool["name"] for tool in _mcp_rpc(client, "tools/list", {})["result"]["tools"]}
        assert names == {"get_all_pipeline_statuses", "get_pipeline_status"}
        for tool in ("deploy_pipeline", "undeploy_pipeline"):
            arguments = {"name": "x", "files": {}, "save_files": False, "overwrite": False, "pipeline_name": "x"}
            result = _mcp_rpc(client, "tools/call", {"name": tool, "arguments": arguments})["result"]
            assert result["isError"] is True and "cannot be deployed or undeployed" in result["content"][0]["text"]


def test_the_mcp_app_asks_for_the_key_and_checks_the_host():
    from hayhooks.server.pipelines.registry import ImmutablePipelineRegistry

    from haystack_agentic.serving.mcp_server import create_mcp_app

    app = create_mcp_app(ServeSecurity(api_key=KEY), registry=ImmutablePipelineRegistry())
    with TestClient(app, base_url="http://127.0.0.1") as client:
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        refused = client.post("/mcp/", json=body)
        assert refused.status_code == 401 and refused.headers["www-authenticate"].startswith("Bearer")
        assert client.get("/status").json() == {"status": "ok"}  # the health check stays open
        assert _mcp_rpc(client, "tools/list", {}, {"authorization": f"Bearer {KEY}"})["result"]["tools"]
        assert client.get("/status", headers={"host": "evil.example"}).status_code == 400


# --- what `serve` says and refuses before it serves ---------------------------------------------------------


@pytest.fixture
def fake_run(monkeypatch, tmp_path):
    """`serve` up to the point it would start the servers: records the call instead; environment restored after."""
    # `serve` writes these into os.environ (for its worker processes): setting them first makes monkeypatch
    # restore (or remove) them afterwards, so no key leaks into later tests.
    names = [
        "HAYHOOKS_HOST",
        "HAYHOOKS_PORT",
        "HAYHOOKS_PIPELINES_DIR",
        "HAYHOOKS_STARTUP_DEPLOY_STRATEGY",
        "HAYSTACK_DESERIALIZATION_ALLOWLIST",
        "HAYSTACK_AGENTIC_ALLOW_DEPLOY",
        "HAYSTACK_AGENTIC_API_KEY",
        "HAYSTACK_AGENTIC_MAX_BODY_BYTES",
        "HAYSTACK_AGENTIC_MAX_MESSAGES",
    ]
    for name in names:
        monkeypatch.setenv(name, "placeholder")  # records the original value (or its absence) ...
        monkeypatch.delenv(name)  # ... and the test starts without it
    calls = []
    monkeypatch.setattr("haystack_agentic.serving.server.run_servers", lambda *args: calls.append(args))

    def serve(*args: str) -> int:
        from haystack_agentic.cli.serve import main

        return main(["--pipeline", f"s={SCRIPTED_YAML}", "--pipelines-dir", str(tmp_path / "p"), *args])

    serve.calls = calls
    return serve


def test_a_non_loopback_host_without_a_key_prints_a_warning(fake_run, capsys):
    assert fake_run("--host", "0.0.0.0") == 0
    assert fake_run.calls and "warning: serving on 0.0.0.0 without an API key" in capsys.readouterr().err


@pytest.mark.parametrize("args", [["--host", "127.0.0.1"], ["--host", "0.0.0.0", "--api-key", KEY]])
def test_no_warning_on_loopback_or_with_a_key(fake_run, capsys, args):
    assert fake_run(*args) == 0
    assert "warning:" not in capsys.readouterr().err


def test_the_key_from_the_environment_counts(fake_run, capsys, monkeypatch):
    monkeypatch.setenv("HAYSTACK_AGENTIC_API_KEY", KEY)
    assert fake_run("--host", "0.0.0.0", "--allow-deploy") == 0
    assert "warning:" not in capsys.readouterr().err


def test_allow_deploy_without_a_key_is_refused_before_anything_starts(fake_run, capsys):
    assert fake_run("--allow-deploy") == 2
    assert not fake_run.calls
    assert "needs an API key" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["deploy_pipeline", "undeploy_pipeline", "get_pipeline_status"])
def test_a_pipeline_cannot_take_the_name_of_an_mcp_core_tool(fake_run, capsys, name):
    from haystack_agentic.cli.serve import main

    assert main(["--pipeline", f"{name}={SCRIPTED_YAML}", "--port", "1", "--mcp-port", "0"]) == 2
    assert "MCP tool" in capsys.readouterr().err


def test_serve_passes_its_limits_to_the_servers_and_refuses_bad_ones(fake_run, capsys, monkeypatch):
    import os

    assert fake_run("--max-body-bytes", "2048", "--max-messages", "7") == 0
    assert (os.environ["HAYSTACK_AGENTIC_MAX_BODY_BYTES"], os.environ["HAYSTACK_AGENTIC_MAX_MESSAGES"]) == ("2048", "7")
    monkeypatch.setenv("HAYSTACK_AGENTIC_MAX_MESSAGES", "9")
    assert fake_run() == 0 and os.environ["HAYSTACK_AGENTIC_MAX_MESSAGES"] == "9"  # the variable counts too
    calls = len(fake_run.calls)
    assert fake_run("--max-messages", "0") == 2 and "--max-messages must be a whole number" in capsys.readouterr().err
    monkeypatch.setenv("HAYSTACK_AGENTIC_MAX_BODY_BYTES", "1MB")
    assert fake_run() == 2 and "HAYSTACK_AGENTIC_MAX_BODY_BYTES must be" in capsys.readouterr().err
    assert len(fake_run.calls) == calls
