# SPDX-License-Identifier: Apache-2.0
"""
No single request stalls the server (issue 39), on a real `serve` on 127.0.0.1 with its default limits: a body over
1 MiB is a 413 on HTTP and MCP, a chat request of more than 1,000 messages a 422, both naming the limit and how to
change it; and while six of the largest accepted chat requests run (1,000 messages, just under 1 MiB), `/health`
answers within a second (their CPU work runs on the pipeline's own thread, not on the server's event loop).
"""

import json
import threading
import time

import httpx
import pytest

from haystack_agentic.serving.security import DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_MESSAGES

from .conftest import SCRIPTED_YAML, serve_process, write_test_store

pytestmark = pytest.mark.integration

JSON_RPC_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("stall")
    args = ["--pipeline", f"scripted={SCRIPTED_YAML}", "--store", str(write_test_store(root / "store.json"))]
    with serve_process(root, args) as server:
        yield server


def chat_body(count: int, size: int) -> dict:
    """A chat request of `count` messages, each earlier one `size` characters, ending with the question."""
    filler = ("Big Stone Gap is a 2014 film written and directed by Adriana Trigiani. " * (size // 60 + 1))[:size]
    turns = [{"role": "user" if i % 2 == 0 else "assistant", "content": filler} for i in range(count - 1)]
    return {"model": "scripted", "messages": [*turns, {"role": "user", "content": "Who directed Big Stone Gap?"}]}


def largest_accepted() -> bytes:
    """The largest chat request the defaults accept: `DEFAULT_MAX_MESSAGES` messages, just under the body limit."""
    per_message = (DEFAULT_MAX_BODY_BYTES - 2000) // DEFAULT_MAX_MESSAGES - len(
        '{"role": "assistant", "content": ""}, '
    )
    body = json.dumps(chat_body(DEFAULT_MAX_MESSAGES, per_message)).encode()
    assert DEFAULT_MAX_BODY_BYTES * 0.95 < len(body) <= DEFAULT_MAX_BODY_BYTES
    return body


def test_a_body_over_the_limit_is_413_on_http_and_mcp(served):
    body = json.dumps(chat_body(10, DEFAULT_MAX_BODY_BYTES // 9)).encode()
    reply = httpx.post(
        f"{served.url}/v1/chat/completions", content=body, timeout=60, headers={"content-type": "application/json"}
    )
    assert reply.status_code == 413 and "--max-body-bytes" in reply.text and "1,048,576 bytes" in reply.text
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "scripted", "arguments": {"query": "x" * DEFAULT_MAX_BODY_BYTES}},
    }
    mcp = httpx.post(served.mcp_url, content=json.dumps(call).encode(), headers=JSON_RPC_HEADERS, timeout=60)
    assert mcp.status_code == 413 and "--max-body-bytes" in mcp.text
    assert httpx.get(f"{served.url}/health", timeout=10).status_code == 200


def test_more_messages_than_the_limit_is_422_naming_it(served):
    reply = httpx.post(f"{served.url}/v1/chat/completions", json=chat_body(DEFAULT_MAX_MESSAGES + 1, 5), timeout=60)
    assert reply.status_code == 422, reply.text
    assert "limit of 1,000" in reply.text and "--max-messages" in reply.text


@pytest.mark.slow  # wall-clock assertions
def test_health_answers_within_a_second_while_the_largest_requests_run(served):
    body = largest_accepted()
    replies: list[httpx.Response] = []

    def ask() -> None:
        replies.append(
            httpx.post(
                f"{served.url}/v1/chat/completions",
                content=body,
                timeout=300,
                headers={"content-type": "application/json"},
            )
        )

    requests = [threading.Thread(target=ask) for _ in range(6)]  # six at once: the original code stalled /health 1 s
    start = time.monotonic()
    for request in requests:
        request.start()
    waits = []
    with httpx.Client(timeout=30) as client:
        while any(request.is_alive() for request in requests):
            asked = time.monotonic()
            assert client.get(f"{served.url}/health").json() == {"status": "ok"}
            waits.append(time.monotonic() - asked)
            time.sleep(0.05)
    took = time.monotonic() - start
    assert [reply.status_code for reply in replies] == [200] * 6, replies[0].text[:500]
    assert "Answer to: " in replies[0].json()["choices"][0]["message"]["content"]
    assert len(waits) >= 3, f"the requests took {took:.2f} s: too short to watch /health"
    assert max(waits) < 1.0, f"/health waited up to {max(waits):.2f} s while the requests ran ({took:.2f} s)"
