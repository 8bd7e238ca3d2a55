# SPDX-License-Identifier: Apache-2.0
"""
No single request can stall the others (issue 39), without a server: the body size limit (`BodyLimit`, 413 naming
the limit, by `Content-Length` or by the bytes read), the message limit of a chat request (422), and the served
pipeline running on its own thread's event loop (`PipelineThread`), cancelled with its request.
"""

import asyncio
import threading

import pytest
from fastapi import FastAPI, Request
from starlette.testclient import TestClient

from haystack_agentic.serving.agentic_loop_wrapper import AgenticLoopWrapper, BadRequest, PipelineThread
from haystack_agentic.serving.chat_completions import conversation_from_request
from haystack_agentic.serving.security import BodyLimit

from .conftest import SCRIPTED_YAML

LIMIT = 1000


def limited_app() -> TestClient:
    app = FastAPI()

    @app.post("/echo")
    async def echo(request: Request) -> dict:
        return {"bytes": len(await request.body())}

    async def raw_echo(scope, receive, send):  # an app that reads the body without FastAPI (as the MCP app does)
        size = 0
        while True:
            message = await receive()
            size += len(message.get("body", b""))
            if not message.get("more_body"):
                break
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": str(size).encode()})

    def route(scope, receive, send):
        return (raw_echo if scope.get("path") == "/raw" else app)(scope, receive, send)

    return TestClient(BodyLimit(route, max_bytes=LIMIT))


@pytest.mark.parametrize("path", ["/echo", "/raw"])
def test_a_body_up_to_the_limit_passes(path):
    reply = limited_app().post(path, content=b"x" * LIMIT)
    assert reply.status_code == 200 and str(LIMIT) in reply.text


@pytest.mark.parametrize("path", ["/echo", "/raw"])
def test_a_larger_body_is_413_naming_the_limit_and_how_to_change_it(path):
    reply = limited_app().post(path, content=b"x" * (LIMIT + 1))
    assert reply.status_code == 413
    detail = reply.json()["detail"]
    assert "1,000 bytes" in detail and "--max-body-bytes" in detail and "HAYSTACK_AGENTIC_MAX_BODY_BYTES" in detail


@pytest.mark.parametrize("path", ["/echo", "/raw"])
def test_a_chunked_body_without_length_is_cut_off_at_the_limit(path):
    def chunks():
        for _ in range(50):
            yield b"y" * 100

    reply = limited_app().post(path, content=chunks())  # no Content-Length: the bytes read are counted
    assert reply.status_code == 413 and "1,000 bytes" in reply.json()["detail"]


def test_a_lying_content_length_does_not_get_past_the_limit():
    reply = limited_app().post("/raw", content=b"z" * 5000, headers={"content-length": "10"})
    assert reply.status_code in (400, 413)  # refused, by the limit or by the test client


def messages(count: int) -> list[dict]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}"} for i in range(count - 1)] + [
        {"role": "user", "content": "Who directed Big Stone Gap?"}
    ]


def test_a_chat_request_up_to_the_message_limit_is_accepted():
    assert len(conversation_from_request(messages(50), max_messages=50)) == 50


def test_more_messages_than_the_limit_is_a_422_naming_it():
    with pytest.raises(BadRequest) as refused:
        conversation_from_request(messages(51), max_messages=50)
    assert refused.value.status_code == 422
    assert "51 messages" in refused.value.detail and "limit of 50" in refused.value.detail
    assert "--max-messages" in refused.value.detail and "HAYSTACK_AGENTIC_MAX_MESSAGES" in refused.value.detail


class Wrapper(AgenticLoopWrapper):
    pipeline_file = str(SCRIPTED_YAML)


def test_the_served_pipeline_runs_off_the_servers_event_loop(monkeypatch, allow_scripted_llm):
    monkeypatch.setenv("HAYSTACK_AGENTIC_MAX_MESSAGES", "3")
    wrapper = Wrapper()
    wrapper.setup()
    threads = []
    run_async = wrapper.pipeline.run_async

    async def recording_run(data):
        threads.append(threading.get_ident())
        return await run_async(data)

    wrapper.pipeline.run_async = recording_run

    async def serve():
        return await wrapper.run_api_async("Who directed Big Stone Gap?"), threading.get_ident()

    result, server_thread = asyncio.run(serve())
    assert result["result"]["terminated_by"] == "answered"
    assert threads == [wrapper.pipeline_thread.thread.ident] and server_thread not in threads
    with pytest.raises(BadRequest, match="limit of 3"):  # the wrapper reads its limit from the environment
        asyncio.run(wrapper.run_chat_completion_async("scripted", messages(4), {}))


def test_cancelling_the_request_cancels_the_run_in_the_pipeline_thread():
    worker = PipelineThread("test-pipeline")
    started, cancelled = threading.Event(), threading.Event()

    async def long_run():
        started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    async def request():
        task = asyncio.create_task(worker.run(long_run()))
        while not started.is_set():
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(request())
    assert cancelled.wait(10)
