# SPDX-License-Identifier: Apache-2.0
"""
The packaged OpenAI pipeline against a local OpenAI-compatible server (a fake one written here, on 127.0.0.1, that
records what `OpenAIChatGenerator` sends): the requests carry `tool_choice: "auto"` when tools are offered and a
`max_tokens` bound per role, and assistant tool-call messages carry text. The fake server behaves like the local
servers the issue met: without `tool_choice` it drops the tools and answers in prose (as a llama.cpp server did), and
its chat template fails with HTTP 500 on an assistant message that has tool calls and no text.
"""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from conftest import DOCS, QUESTION, search
from haystack.components.generators.chat import OpenAIChatGenerator
from haystack.utils import Secret
from scripted_chat_generator import ScriptedChatGenerator

from haystack_agentic import AgenticRouter, LoopController
from haystack_agentic.grounding.citations import strip_markers
from haystack_agentic.llm.json_decisions import STRUCTURED_OUTPUT_REFUSED
from haystack_agentic.loop_loading import retriever_store
from haystack_agentic.pipelines.default_pipelines import ROLE_MAX_TOKENS
from haystack_agentic.pipelines.loop_builder import load_loop_pipeline

PIPELINES = Path(__file__).resolve().parents[2] / "pipelines"


class FakeOpenAIServer:
    """A minimal OpenAI-compatible `/v1/chat/completions` endpoint that records every request body."""

    def __init__(self) -> None:
        self.requests: list[dict] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                owner.requests.append(body)
                status, reply = owner.reply(body)
                data = json.dumps(reply).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def reply(self, body: dict) -> tuple[int, dict]:
        for message in body["messages"]:
            if message["role"] == "assistant" and message.get("tool_calls") and not message.get("content"):
                return 500, {"error": {"message": "chat template: assistant message with tool calls has no content"}}
        if not body.get("tools"):  # the evidence judge (or the fallback)
            return 200, _completion(body, content='{"sufficient": true, "reason": "the passages name the place"}')
        if "tool_choice" not in body:  # tools silently dropped: the model answers in prose
            return 200, _completion(body, content="I think the director lives in Rome.")
        searched = any(m["role"] == "tool" for m in body["messages"])
        call = ("answer", {"text": "Greenwich Village"}) if searched else ("search", {"query": "Adriana Trigiani"})
        return 200, _completion(body, tool_call=call)

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _completion(body: dict, content: str | None = None, tool_call: tuple[str, dict] | None = None) -> dict:
    message: dict = {"role": "assistant", "content": content}
    if tool_call is not None:
        name, arguments = tool_call
        message["tool_calls"] = [
            {"id": f"call_{name}", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
        ]
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 0,
        "model": body["model"],
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if tool_call else "stop"}],
        "usage": {"prompt_tokens": 50, "completion_tokens": 5, "total_tokens": 55},
    }


@pytest.fixture
def fake_server():
    server = FakeOpenAIServer()
    yield server
    server.close()


@pytest.mark.integration  # the packaged MiniLM (the evidence check's embeddings)
def test_packaged_openai_pipeline_against_a_local_server(fake_server, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # a local server needs none: a placeholder is passed
    pipeline = load_loop_pipeline(
        PIPELINES / "agentic_rag_ungrounded.yml", model="local-model", api_base_url=fake_server.url
    )
    retriever_store(pipeline).write_documents(DOCS)
    result = pipeline.run({"controller": {"query": QUESTION}})["result"]
    assert result["error"] is None, result["error"]
    # the question's search (no LLM call; the tools-mode YAML has no search policy), then the model's turns
    steps = result["tool_history"]
    assert [s["action"] for s in steps] == ["search"] * (len(steps) - 1) + ["answer"]
    assert steps[0]["query"] == QUESTION and len(steps) >= 2
    assert strip_markers(result["answer"]) == "Greenwich Village" and result["terminated_by"] == "answered"
    controller = [body for body in fake_server.requests if body.get("tools")]
    others = [body for body in fake_server.requests if not body.get("tools")]
    # The question's search goes without an LLM call; the packaged evidence check is offline (no judge call).
    assert len(controller) == 1 and others == []
    for body in controller:
        assert body["tool_choice"] == "auto"
        assert body["max_tokens"] == ROLE_MAX_TOKENS["controller"]
    # The assistant's tool-call turn (the free search of the question) went back with text, which the strict chat
    # template accepts.
    assistant = [m for m in controller[0]["messages"] if m["role"] == "assistant"]
    assert assistant[0]["tool_calls"][0]["function"]["name"] == "search"
    assert isinstance(assistant[0]["content"], str) and assistant[0]["content"].strip()


def test_every_role_has_a_max_tokens_bound_in_the_packaged_openai_pipelines():
    for name in ("agentic_rag.yml", "agentic_rag_json.yml", "agentic_rag_ungrounded.yml"):
        text = (PIPELINES / name).read_text(encoding="utf-8")
        generators = text.count("OpenAIChatGenerator")
        assert generators and text.count("max_tokens:") == generators, name


@pytest.mark.integration  # the packaged MiniLM (the evidence check's embeddings)
def test_own_tool_choice_and_max_tokens_win(fake_server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "not-needed")
    pipeline = load_loop_pipeline(
        PIPELINES / "agentic_rag_ungrounded.yml", model="local-model", api_base_url=fake_server.url
    )
    router = pipeline.get_component("router")
    router.generation_kwargs = {"tool_choice": "required", "max_tokens": 77}
    pipeline.run({"controller": {"query": QUESTION}})
    controller = [body for body in fake_server.requests if body.get("tools")]
    assert controller and all(b["tool_choice"] == "required" and b["max_tokens"] == 77 for b in controller)


def test_other_generators_get_no_tool_choice(build_loop):
    loop = build_loop([search("Adriana Trigiani"), {"text": "Greenwich Village"}])
    loop.run()
    for _, generation_kwargs, tools in loop.llm.calls:
        assert tools and "tool_choice" not in (generation_kwargs or {})


def test_assistant_tool_call_turns_keep_text_for_every_generator(build_loop):
    loop = build_loop([search("Adriana Trigiani"), {"text": "Greenwich Village"}])
    loop.run()
    assistant = [m for m in loop.llm.calls[1][0] if m.role.value == "assistant"]
    assert assistant[0].tool_calls and (assistant[0].text or "").strip()


def test_router_serialises_without_a_tool_choice_it_did_not_have():
    router = AgenticRouter(chat_generator=ScriptedChatGenerator([]))
    assert router.to_dict()["init_parameters"]["generation_kwargs"] is None


class RefusingServer(FakeOpenAIServer):
    """A server without structured output: HTTP 400 naming `response_format` on a request that has one."""

    def reply(self, body: dict) -> tuple[int, dict]:
        if "response_format" in body:
            return 400, {"error": {"message": "response_format is not supported"}}
        return 200, _completion(body, content=json.dumps({"action": "search", "query": "Adriana Trigiani"}))


@pytest.mark.parametrize("use_async", [False, True])
async def test_a_refused_response_format_is_sent_again_without_it(use_async):
    server = RefusingServer()
    try:
        llm = OpenAIChatGenerator(
            api_key=Secret.from_token("not-needed"), model="local-model", api_base_url=server.url, max_retries=0
        )
        router = AgenticRouter(
            chat_generator=llm, mode="json", search_question_first=False, generation_kwargs={"max_tokens": 64}
        )
        state = LoopController().run(query=QUESTION)["state"]
        out = await router.run_async(state=state) if use_async else router.run(state=state)
    finally:
        server.close()
    assert out["query"] == "Adriana Trigiani"
    assert out["loop"].metadata[STRUCTURED_OUTPUT_REFUSED] is True  # the run's later decisions go without it
    first, second = server.requests
    assert first["response_format"]["type"] == "json_schema" and "response_format" not in second
    assert first["max_tokens"] == second["max_tokens"] == 64
