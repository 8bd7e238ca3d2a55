# SPDX-License-Identifier: Apache-2.0
"""
The cases of issue 26 a request can trigger, replayed on a real `serve` on 127.0.0.1: a malformed `stream_options`,
a 5,000-deep MCP `arguments`, cross-origin reads (CORS, preflights, foreign `Host` headers: DNS rebinding), and
hayhooks' routes that cannot work offline (`/draw/{name}`) or do nothing (`/v1/files`); and an LLM that writes a lone
UTF-16 surrogate (half an emoji) into its answer, served by REST and by chat, whole and streamed (case 2).
"""

import json

import httpx
import pytest

from .conftest import SCRIPTED_YAML, serve_process, spoken, with_answer_llm, with_script, write_test_store

pytestmark = pytest.mark.integration

QUESTION = "Where is Adriana Trigiani based?"
JSON_RPC_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
ORIGIN = "http://app.example.org"

#: Half an emoji (the high surrogate of U+1F600), as an LLM or a broken tokenizer decode can emit it.
LONE_SURROGATE = "\ud83d"
SURROGATE_ANSWER = f"Greenwich Village {LONE_SURROGATE}"
#: What a client reads instead: the surrogate replaced by U+FFFD.
SERVED_ANSWER = "Greenwich Village \ufffd"


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    # `surrogate`: the controller answers with a lone surrogate; `surrogate_stream`: the answer LLM streams it.
    (root / "surrogate.yml").write_text(
        with_script([{"tool_calls": [{"tool_name": "answer", "arguments": {"text": SURROGATE_ANSWER}}]}]),
        encoding="utf-8",
        errors="surrogatepass",
    )
    (root / "surrogate_stream.yml").write_text(
        with_answer_llm(SURROGATE_ANSWER), encoding="utf-8", errors="surrogatepass"
    )
    args = [
        "--pipeline",
        f"scripted={SCRIPTED_YAML}",
        "--store",
        str(write_test_store(root / "store.json")),
        "--pipeline",
        f"surrogate={root / 'surrogate.yml'}",
        "--pipeline",
        f"surrogate_stream={root / 'surrogate_stream.yml'}",
        "--cors-origin",
        ORIGIN,
        "--allowed-host",
        "rag.internal",
    ]
    with serve_process(root, args) as server:
        yield server


def chat(stream_options, stream=True) -> dict:
    return {
        "model": "scripted",
        "messages": [{"role": "user", "content": QUESTION}],
        "stream": stream,
        "stream_options": stream_options,
    }


@pytest.mark.parametrize("options", ["x", ["include_usage"], 3])
def test_a_malformed_stream_options_is_a_4xx_with_a_message(served, options):
    reply = httpx.post(f"{served.url}/v1/chat/completions", json=chat(options), timeout=30)
    assert 400 <= reply.status_code < 500, reply.text
    assert "stream_options" in reply.json()["detail"]


def test_a_deeply_nested_mcp_argument_is_a_4xx(served):
    nested = "[" * 5000 + "]" * 5000
    body = (
        '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "scripted", '
        f'"arguments": {{"query": {nested}}}}}}}'
    )
    reply = httpx.post(served.mcp_url, content=body.encode(), headers=JSON_RPC_HEADERS, timeout=30)
    assert 400 <= reply.status_code < 500, reply.text
    assert "nested" in reply.json()["error"]["message"]


def test_no_cors_headers_for_an_origin_not_listed(served):
    reply = httpx.post(
        f"{served.url}/scripted/run", json={"query": QUESTION}, timeout=30, headers={"origin": "http://evil.example"}
    )
    assert reply.status_code == 200
    assert "access-control-allow-origin" not in reply.headers
    preflight = httpx.options(
        f"{served.url}/scripted/run",
        timeout=30,
        headers={"origin": "http://evil.example", "access-control-request-method": "POST"},
    )
    assert preflight.status_code >= 400 and "access-control-allow-origin" not in preflight.headers


def test_a_listed_origin_gets_cors_headers(served):
    preflight = httpx.options(
        f"{served.url}/scripted/run", timeout=30, headers={"origin": ORIGIN, "access-control-request-method": "POST"}
    )
    assert preflight.status_code == 200 and preflight.headers["access-control-allow-origin"] == ORIGIN


@pytest.mark.parametrize(
    "host",
    ["evil.example", "evil.example:1416", "127.0.0.1.nip.io", "127.0.0.1:1@evil.com", "localhost:", "127.0.0.1:80:80"],
)
def test_a_foreign_host_header_is_refused_on_http_and_mcp(served, host):
    reply = httpx.post(f"{served.url}/scripted/run", json={"query": QUESTION}, headers={"host": host}, timeout=30)
    assert reply.status_code in (400, 403) and "host" in reply.text.lower()
    mcp = httpx.get(served.mcp_url.removesuffix("/mcp") + "/status", headers={"host": host}, timeout=30)
    assert mcp.status_code in (400, 403)


@pytest.mark.parametrize("host", ["localhost", "rag.internal:8080", "127.0.0.1"])
def test_the_bound_address_localhost_and_a_configured_name_are_accepted(served, host):
    reply = httpx.post(f"{served.url}/scripted/run", json={"query": QUESTION}, headers={"host": host}, timeout=30)
    assert reply.status_code == 200, reply.text


def test_routes_that_cannot_work_offline_or_do_nothing_answer_404(served):
    import tempfile
    from pathlib import Path

    before = set(Path(tempfile.gettempdir()).iterdir())
    assert httpx.get(f"{served.url}/draw/scripted", timeout=30).status_code == 404
    upload = httpx.post(f"{served.url}/v1/files", files={"file": ("a.txt", b"x")}, data={"purpose": "x"}, timeout=30)
    assert upload.status_code == 404
    assert set(Path(tempfile.gettempdir()).iterdir()) - before == set()


@pytest.mark.parametrize("name", ["surrogate", "surrogate_stream"])
def test_an_answer_with_a_lone_surrogate_is_served_by_rest(served, name):
    reply = httpx.post(f"{served.url}/{name}/run", json={"query": QUESTION}, timeout=60)
    assert reply.status_code == 200, reply.text
    result = reply.json()["result"]["result"]
    assert spoken(result["answer"]) == SERVED_ANSWER and result["terminated_by"] == "answered"


@pytest.mark.parametrize("name", ["surrogate", "surrogate_stream"])
def test_an_answer_with_a_lone_surrogate_is_served_by_chat_whole_and_streamed(served, name):
    body = {"model": name, "messages": [{"role": "user", "content": QUESTION}]}
    whole = httpx.post(f"{served.url}/v1/chat/completions", json=body, timeout=60)
    assert whole.status_code == 200, whole.text
    assert spoken(whole.json()["choices"][0]["message"]["content"]) == SERVED_ANSWER
    content = []
    with httpx.stream("POST", f"{served.url}/v1/chat/completions", json={**body, "stream": True}, timeout=60) as reply:
        assert reply.status_code == 200
        for line in reply.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                chunk = json.loads(line.removeprefix("data: "))
                content += [choice["delta"].get("content") or "" for choice in chunk.get("choices", [])]
    assert "".join(content) == whole.json()["choices"][0]["message"]["content"]
