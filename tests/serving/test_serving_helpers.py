# SPDX-License-Identifier: Apache-2.0
"""Unit tests of the serving helpers (no server)."""

import argparse

import pytest

from haystack_agentic.cli.serve import ServeError, add_serve_parser, plan, write_serving_dir
from haystack_agentic.serving import BadRequest, answer_text, check_question, progress_line
from haystack_agentic.serving.chat_completions import conversation_from_request

from .conftest import SCRIPTED_YAML


@pytest.mark.parametrize("query", [None, 3, "", "  "])
def test_check_question_refuses_what_the_loop_cannot_run(query):
    with pytest.raises(BadRequest):
        check_question(query)


def test_progress_lines_and_answer_text():
    assert progress_line({"iteration": 1, "action": "search", "query": "q"}) == '1. search "q"\n'
    assert progress_line({"iteration": 3, "action": "give_up", "result": "no data"}) == "3. give_up (no data)\n"
    assert answer_text({"answer": None, "terminated_by": "error", "error": "boom"}).endswith("Error: boom")


def test_a_reply_s_sources_are_left_out_of_the_conversation_a_client_sends_back():
    citation = {
        "n": 1,
        "document_id": "trigiani",
        "title": "Adriana Trigiani",
        "quote": "Trigiani is based in NYC.",
        "start": 0,
        "end": 25,
        "claim": "NYC",
        "search": None,
        "supported": False,
        "check": "offline",
    }
    reply = answer_text({"answer": "NYC [1]", "citations": [citation]})
    assert reply.startswith('NYC [1]\n\nSources:\n[1] (unsupported) Adriana Trigiani: "Trigiani is based in NYC."\n')
    messages = [
        {"role": "user", "content": "Where?"},
        {"role": "assistant", "content": reply},
        {"role": "user", "content": "Sources:\n\nSources:\nsince when?"},
    ]
    conversation = conversation_from_request(messages)
    assert [m.text for m in conversation] == ["Where?", "NYC [1]", "Sources:\n\nSources:\nsince when?"]
    assert answer_text({"answer": "NYC", "citations": []}) == answer_text({"answer": "NYC"}) == "NYC"
    uncited = answer_text({"answer": "NYC", "terminated_by": "answered", "citations": []})
    assert uncited == (
        "NYC\n\nSources: none. No chunk of this run says this answer: it is unsupported, check it before relying on it."
    )
    messages = [
        {"role": "user", "content": "Where?"},
        {"role": "assistant", "content": uncited},
        {"role": "user", "content": "Since when?"},
    ]
    assert [m.text for m in conversation_from_request(messages)] == ["Where?", "NYC", "Since when?"]


def _args(*argv):
    parser = argparse.ArgumentParser()
    add_serve_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(["serve", *argv])


def test_serve_defaults_to_localhost_and_the_packaged_pipeline(monkeypatch, tmp_path):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    args = _args("--store", str(tmp_path / "s.json"))
    assert (args.host, args.port) == ("127.0.0.1", 1416)
    pipelines, _overrides, store = plan(args)
    assert list(pipelines) == ["agentic_rag"] and pipelines["agentic_rag"].name == "agentic_rag_embedded.yml"
    assert store.endswith("s.json")
    with pytest.raises(ServeError, match="OPENAI_API_KEY"):
        plan(_args("--llm", "openai"))


def test_serving_dir_has_one_wrapper_per_pipeline(tmp_path):
    args = _args("--pipeline", f"mine={SCRIPTED_YAML}", "--model", "m", "--max-iterations", "3")
    pipelines, overrides, store = plan(args)
    assert overrides == {"model": "m", "max_iterations": 3}
    (wrapper,) = write_serving_dir(tmp_path, pipelines, overrides, store)
    assert wrapper == tmp_path / "mine" / "pipeline_wrapper.py"
    namespace: dict = {}
    exec(wrapper.read_text(), namespace)  # noqa: S102 - our own generated file
    assert namespace["PipelineWrapper"].pipeline_file == str(SCRIPTED_YAML)
    with pytest.raises(ServeError, match="does not exist"):
        plan(_args("--pipeline", "x=/nope.yml"))


def test_a_reply_stream_sends_the_answer_trimmed_and_every_step_once():
    from haystack.dataclasses import StreamingChunk

    from haystack_agentic.llm.streaming import ANSWER_META, EVENT_META, STEP_META
    from haystack_agentic.serving.chat_completions import ChatReplyStream

    search = {"iteration": 1, "action": "search", "query": "q", "returned_chunk_ids": ["a"]}
    refused = {"iteration": 2, "action": "evidence", "query": None}
    reply = ChatReplyStream("m")
    out = reply.on_chunk(StreamingChunk(content="", meta={EVENT_META: "search", STEP_META: search}))
    assert out[0].choices[0].delta.reasoning_content == '1. search "q"\n'
    pieces = [" ", " Green", "wich ", "Village", " \n"]
    for piece in pieces:
        out += reply.on_chunk(StreamingChunk(content=piece, meta={ANSWER_META: True}))
    out += reply.on_chunk(StreamingChunk(content="thinking", meta={ANSWER_META: False}))
    end = reply.finish({"answer": "Greenwich Village", "tool_history": [search, refused], "usage": {}}, True)
    contents = [c.choices[0].delta.content for c in out + end if c.choices and c.choices[0].delta.content]
    assert "".join(contents) == "Greenwich Village" and contents[0] == "Green"
    assert [c.choices[0].delta.model_extra["agentic_step"]["step"]["action"] for c in end[:-2]] == ["evidence"]
    assert end[-1].choices == [] and end[-1].usage == {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}


def test_a_step_line_after_the_controllers_prose_starts_a_new_line():
    from haystack.dataclasses import StreamingChunk

    from haystack_agentic.llm.streaming import EVENT_META, STEP_META
    from haystack_agentic.serving.chat_completions import ChatReplyStream

    search = {"iteration": 1, "action": "search", "query": "q", "returned_chunk_ids": ["a"]}
    reply = ChatReplyStream("m")
    out = reply.on_chunk(StreamingChunk(content="Let me look."))
    out += reply.on_chunk(StreamingChunk(content="", meta={EVENT_META: "search", STEP_META: search}))
    out += reply.on_chunk(StreamingChunk(content="", meta={EVENT_META: "documents", STEP_META: search}))
    assert "".join(c.choices[0].delta.reasoning_content for c in out) == (
        'Let me look.\n1. search "q"\n   1 chunk found\n'
    )


def test_the_one_process_server_runs_on_uvloop_when_installed(monkeypatch):
    import sys

    from haystack_agentic.serving.server import event_loop_factory

    uvloop = pytest.importorskip("uvloop")
    assert event_loop_factory() is uvloop.new_event_loop
    monkeypatch.setitem(sys.modules, "uvloop", None)  # not installed: asyncio's own loop
    assert event_loop_factory() is None


def test_with_hayhooks_tracing_off_no_span_goes_to_its_unread_buffer(monkeypatch):
    from hayhooks.settings import settings

    from haystack_agentic.serving.app import TRACE_BUFFER_ENV, skip_unread_trace_buffer

    monkeypatch.setattr(settings, "tracing_include_haystack_spans", True)
    monkeypatch.delenv(TRACE_BUFFER_ENV, raising=False)
    monkeypatch.setattr(settings, "tracing_enabled", True)
    assert not skip_unread_trace_buffer() and settings.tracing_include_haystack_spans
    monkeypatch.setenv(TRACE_BUFFER_ENV, "true")  # the operator asked for it
    monkeypatch.setattr(settings, "tracing_enabled", False)
    assert not skip_unread_trace_buffer() and settings.tracing_include_haystack_spans
    monkeypatch.delenv(TRACE_BUFFER_ENV)
    assert skip_unread_trace_buffer() and not settings.tracing_include_haystack_spans


async def test_startup_objects_are_frozen_out_of_the_collector():
    import gc
    from contextlib import asynccontextmanager

    from haystack_agentic.serving.app import freeze_after_startup

    events = []

    @asynccontextmanager
    async def lifespan(app):
        events.append("started")
        yield {"state": 1}
        events.append("stopped")

    try:
        async with freeze_after_startup(lifespan)(None) as state:
            assert state == {"state": 1} and events == ["started"] and gc.get_freeze_count() > 0
        assert events == ["started", "stopped"]
    finally:
        gc.unfreeze()


def test_serve_timeout_and_max_tokens_reach_every_llm_role(tmp_path, allow_scripted_llm):
    from haystack_agentic.serving.agentic_loop_wrapper import load_served_pipeline

    args = _args("--pipeline", f"mine={SCRIPTED_YAML}", "--timeout", "7.5", "--max-tokens", "64")
    pipelines, overrides, _ = plan(args)
    assert overrides == {"timeout": 7.5, "max_tokens": 64}
    pipeline = load_served_pipeline(pipelines["mine"], overrides)
    roles = [c for _, c in pipeline.walk() if getattr(c, "chat_generator", None) is not None]
    assert roles and all(c.timeout == 7.5 and c.generation_kwargs["max_tokens"] == 64 for c in roles)
    for bad in (("--timeout", "0"), ("--max-tokens", "0")):
        with pytest.raises(ServeError, match=bad[0]):
            plan(_args("--pipeline", f"mine={SCRIPTED_YAML}", *bad))
