# SPDX-License-Identifier: Apache-2.0
"""
One retry layer: a real `OpenAIChatGenerator` that retries by itself (`max_retries`, `timeout`) against a dead
endpoint on 127.0.0.1 fails within its own attempts (one timeout each, plus the client's backoff), not the loop's
retries times the client's; `usage` counts one controller call (the generator call; the client's retries happen
inside it and are not visible to the loop, as `call_generator` documents).
"""

import asyncio
import socket
import threading
import time

import pytest
from haystack.components.generators.chat import OpenAIChatGenerator
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.document_stores.in_memory import InMemoryDocumentStore
from haystack.utils import Secret

from haystack_agentic import AgenticRouter, build_loop_pipeline


class SilentServer:
    """Accepts TCP connections on 127.0.0.1 and never answers: every request waits for the client's timeout."""

    def __init__(self) -> None:
        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        self.socket.listen(16)
        self.socket.settimeout(0.2)
        self.port = self.socket.getsockname()[1]
        self.connections: list[socket.socket] = []
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while not self.stopped.is_set():
            try:
                connection, _ = self.socket.accept()
            except OSError:
                continue
            self.connections.append(connection)

    def close(self) -> None:
        self.stopped.set()
        self.thread.join(timeout=5)
        for connection in self.connections:
            connection.close()
        self.socket.close()


def _closed_port() -> int:
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()  # nothing listens there any more: connections are refused
    return port


def _loop(port: int, max_retries: int, timeout: float):
    generator = OpenAIChatGenerator(
        model="gpt-4o-mini",
        api_key=Secret.from_token("not-needed"),
        api_base_url=f"http://127.0.0.1:{port}/v1",
        max_retries=max_retries,
        timeout=timeout,
    )
    # The router keeps its default retries (2): it must defer to the generator's own.
    router = AgenticRouter(chat_generator=generator)
    pipeline = build_loop_pipeline(router, InMemoryBM25Retriever(InMemoryDocumentStore()), check_evidence=False)
    pipeline.warm_up()  # outside the timed run (the token counter's set-up may try the network)
    return pipeline


def _check(result: dict) -> None:
    assert result["terminated_by"] == "error"
    assert "APITimeoutError" in result["error"] or "APIConnectionError" in result["error"]
    assert result["usage"]["controller"] == {"calls": 1, "prompt_tokens": 0, "completion_tokens": 0}
    assert result["usage"]["total"]["calls"] == 1


@pytest.mark.parametrize("run_async", [False, True])
@pytest.mark.slow  # asserts on wall-clock time
def test_silent_endpoint_fails_within_the_generators_own_timeouts_and_retries(run_async):
    server = SilentServer()
    try:
        pipeline = _loop(server.port, max_retries=2, timeout=1.0)
        inputs = {"controller": {"query": "Who directed Big Stone Gap?"}}
        started = time.monotonic()
        out = asyncio.run(pipeline.run_async(inputs)) if run_async else pipeline.run(inputs)
        elapsed = time.monotonic() - started
    finally:
        server.close()
    _check(out["result"])
    # 3 attempts of 1 s (the client's 2 retries), with its backoff of at most 0.5 s + 1 s between them; the loop's own
    # 2 retries on top would have made 9 attempts and 9+ s.
    assert len(server.connections) == 3
    assert 3.0 <= elapsed < 3.0 + 1.5 + 1.5, elapsed


@pytest.mark.slow  # asserts on wall-clock time
def test_refused_endpoint_fails_after_the_generators_retries_only():
    pipeline = _loop(_closed_port(), max_retries=1, timeout=1.0)
    started = time.monotonic()
    result = pipeline.run({"controller": {"query": "Who directed Big Stone Gap?"}})["result"]
    elapsed = time.monotonic() - started
    _check(result)
    assert elapsed < 1.0 + 1.0 + 1.5, elapsed  # one retry after at most 0.5 s of backoff, each refused at once
