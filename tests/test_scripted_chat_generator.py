# SPDX-License-Identifier: Apache-2.0
import asyncio
import threading
import time

import pytest
import yaml
from haystack import Pipeline
from haystack.core.serialization import component_from_dict, component_to_dict
from haystack.dataclasses import ChatMessage, ToolCall
from scripted_chat_generator import ScriptedChatGenerator

USER = ChatMessage.from_user("Who directed Big Stone Gap?")


def _assistant(text: str = "x") -> ChatMessage:
    return ChatMessage.from_assistant(text)


def test_text_turn_with_usage_and_model():
    llm = ScriptedChatGenerator([{"text": "Adriana Trigiani"}], model="script-1")
    reply = llm.run(messages=[USER])["replies"][0]
    assert reply.text == "Adriana Trigiani"
    assert reply.tool_calls == []
    assert reply.meta["model"] == "script-1"
    assert reply.meta["usage"]["prompt_tokens"] == len(USER.text) // 4
    assert reply.meta["usage"]["completion_tokens"] == len("Adriana Trigiani") // 4
    assert reply.meta["finish_reason"] == "stop"


def test_tool_call_turn_with_dict_arguments():
    llm = ScriptedChatGenerator([{"tool_calls": [{"tool_name": "search", "arguments": {"query": "Big Stone Gap"}}]}])
    reply = llm.run(messages=[USER])["replies"][0]
    assert reply.text is None
    assert len(reply.tool_calls) == 1
    call = reply.tool_calls[0]
    assert call.tool_name == "search"
    assert call.arguments == {"query": "Big Stone Gap"}
    assert call.id == "call_0_0"
    assert reply.meta["finish_reason"] == "tool_calls"
    assert reply.meta["usage"]["completion_tokens"] == len('{"query": "Big Stone Gap"}') // 4


@pytest.mark.parametrize("arguments", ['{"query": "x"}}', "cats", [1], 42, None, {"nested": {"a": [1, 2]}}])
def test_tool_call_arguments_pass_through_unparsed(arguments):
    llm = ScriptedChatGenerator([{"tool_calls": [{"tool_name": "search", "arguments": arguments, "id": "c1"}]}])
    call = llm.run(messages=[USER])["replies"][0].tool_calls[0]
    assert call.arguments == arguments
    assert call.id == "c1"


def test_text_and_tool_calls_together():
    llm = ScriptedChatGenerator(
        [{"text": "Let me look.", "tool_calls": [{"tool_name": "a", "arguments": {}}, {"tool_name": "b"}]}]
    )
    reply = llm.run(messages=[USER])["replies"][0]
    assert reply.text == "Let me look."
    assert [c.tool_name for c in reply.tool_calls] == ["a", "b"]
    assert [c.id for c in reply.tool_calls] == ["call_0_0", "call_0_1"]


def test_raise_turn_raises_runtime_error_and_records_the_call():
    llm = ScriptedChatGenerator([{"raise": "rate limited"}])
    with pytest.raises(RuntimeError, match="rate limited"):
        llm.run(messages=[USER])
    assert len(llm.calls) == 1


def test_empty_turn_has_no_text_and_no_tool_calls():
    reply = ScriptedChatGenerator([{"empty": True}]).run(messages=[USER])["replies"][0]
    assert not reply.text
    assert reply.tool_calls == []
    assert reply.meta["usage"]["completion_tokens"] == 0


def test_turn_index_counts_assistant_messages_in_the_conversation():
    llm = ScriptedChatGenerator([{"text": "first"}, {"text": "second"}, {"text": "third"}], repeat_last=False)
    assert llm.run(messages=[USER])["replies"][0].text == "first"
    # Same conversation again: same turn (no hidden counter).
    assert llm.run(messages=[USER])["replies"][0].text == "first"
    assert llm.run(messages=[USER, _assistant(), ChatMessage.from_user("more")])["replies"][0].text == "second"
    tool_result = ChatMessage.from_tool("result", origin=ToolCall(tool_name="search", arguments={}))
    conversation = [USER, _assistant(), tool_result, _assistant(), tool_result]
    assert llm.run(messages=conversation)["replies"][0].text == "third"


def test_per_call_mode_uses_a_counter():
    llm = ScriptedChatGenerator([{"text": "first"}, {"text": "second"}], per_call=True, repeat_last=False)
    assert llm.run(messages=[USER])["replies"][0].text == "first"
    assert llm.run(messages=[USER])["replies"][0].text == "second"
    with pytest.raises(IndexError, match=r"no turn 2.*2 turn"):
        llm.run(messages=[USER])
    llm.reset()
    assert llm.calls == []
    assert llm.run(messages=[USER])["replies"][0].text == "first"


def test_per_call_counter_is_thread_safe():
    llm = ScriptedChatGenerator([{"text": str(i)} for i in range(200)], per_call=True, repeat_last=False)
    texts: list[str] = []
    lock = threading.Lock()

    def worker():
        for _ in range(25):
            text = llm.run(messages=[USER])["replies"][0].text
            with lock:
                texts.append(text)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(texts, key=int) == [str(i) for i in range(200)]


def test_repeat_last_when_the_script_runs_out():
    llm = ScriptedChatGenerator([{"text": "a"}, {"text": "b"}], per_call=True)
    assert [llm.run(messages=[USER])["replies"][0].text for _ in range(4)] == ["a", "b", "b", "b"]


def test_script_out_without_repeat_raises_index_error():
    llm = ScriptedChatGenerator([{"text": "a"}], repeat_last=False)
    with pytest.raises(IndexError, match="repeat_last=True"):
        llm.run(messages=[USER, _assistant()])


def test_empty_script_raises_index_error_even_with_repeat_last():
    with pytest.raises(IndexError, match="0 turn"):
        ScriptedChatGenerator().run(messages=[USER])


@pytest.mark.parametrize(
    "script, message",
    [
        (["text"], "must be a dict"),
        ([{"txt": "a"}], "unknown keys"),
        ([{"template": True}], "needs 'text'"),
        ([{"tool_calls": [{"arguments": {}}]}], "tool_name"),
        ([{"tool_calls": {"tool_name": "x"}}], "list of dicts"),
    ],
)
def test_bad_scripts_are_rejected(script, message):
    with pytest.raises(ValueError, match=message):
        ScriptedChatGenerator(script)


def test_negative_latency_is_rejected():
    with pytest.raises(ValueError, match="latency"):
        ScriptedChatGenerator([{"text": "a"}], latency=-1)


def test_calls_are_recorded_with_generation_kwargs_and_tools():
    llm = ScriptedChatGenerator([{"text": "a"}])
    llm.run(messages=[USER], generation_kwargs={"temperature": 0.3}, tools=["t"])
    llm.run(messages=[USER])
    assert llm.calls[0] == ([USER], {"temperature": 0.3}, ["t"])
    assert llm.calls[1] == ([USER], None, None)


def test_template_turns_render_question_and_last_message():
    llm = ScriptedChatGenerator(
        [
            {
                "tool_calls": [{"tool_name": "search", "arguments": {"query": "{{ question }}", "n": 3}}],
                "template": True,
            },
            {"text": "turn {{ turn }}: {{ last_message }}", "template": True},
        ]
    )
    first = llm.run(messages=[ChatMessage.from_system("sys"), USER])["replies"][0]
    assert first.tool_calls[0].arguments == {"query": USER.text, "n": 3}
    tool_result = ChatMessage.from_tool("3 results", origin=first.tool_calls[0])
    second = llm.run(messages=[USER, first, tool_result])["replies"][0]
    assert second.text == "turn 1: 3 results"


def test_text_is_not_rendered_without_template_flag():
    reply = ScriptedChatGenerator([{"text": "{{ question }}"}]).run(messages=[USER])["replies"][0]
    assert reply.text == "{{ question }}"


def test_streaming_callback_gets_the_text():
    chunks = []
    ScriptedChatGenerator([{"text": "hello"}]).run(messages=[USER], streaming_callback=chunks.append)
    assert [c.content for c in chunks] == ["hello", ""]  # the text, then the finishing chunk
    assert (chunks[-1].finish_reason, chunks[-1].meta["usage"]["completion_tokens"]) == ("stop", 1)


async def test_run_async_matches_run_and_awaits_async_callbacks():
    llm = ScriptedChatGenerator([{"text": "hello"}])
    chunks = []

    async def callback(chunk):
        chunks.append(chunk.content)

    reply = (await llm.run_async(messages=[USER], streaming_callback=callback))["replies"][0]
    assert reply.text == llm.run(messages=[USER])["replies"][0].text == "hello"
    assert chunks == ["hello", ""]
    with pytest.raises(RuntimeError, match="boom"):
        await ScriptedChatGenerator([{"raise": "boom"}]).run_async(messages=[USER])


@pytest.mark.slow  # asserts on wall-clock time
async def test_async_latency_overlaps_across_concurrent_calls():
    llm = ScriptedChatGenerator([{"text": "a"}], latency=0.1)
    start = time.perf_counter()
    await asyncio.gather(*(llm.run_async(messages=[USER]) for _ in range(10)))
    elapsed = time.perf_counter() - start
    assert 0.1 <= elapsed < 0.6
    assert len(llm.calls) == 10


@pytest.mark.slow  # asserts on wall-clock time
def test_sync_latency_sleeps():
    llm = ScriptedChatGenerator([{"text": "a"}], latency=0.05)
    start = time.perf_counter()
    llm.run(messages=[USER])
    assert time.perf_counter() - start >= 0.05


def test_to_dict_from_dict_round_trip_with_plain_data():
    script = [
        {"tool_calls": [{"tool_name": "search", "arguments": '{"query": "x"}}'}]},
        {"text": "{{ question }}", "template": True},
        {"raise": "boom"},
        {"empty": True},
    ]
    llm = ScriptedChatGenerator(script, latency=0.5, model="m", repeat_last=False, per_call=True)
    data = llm.to_dict()
    assert data == {
        "type": "scripted_chat_generator.ScriptedChatGenerator",
        "init_parameters": {"script": script, "latency": 0.5, "model": "m", "repeat_last": False, "per_call": True},
    }
    assert yaml.safe_load(yaml.safe_dump(data)) == data
    restored = ScriptedChatGenerator.from_dict(data)
    assert restored.to_dict() == data
    again = component_from_dict(ScriptedChatGenerator, component_to_dict(llm, "llm"), "llm")
    assert again.script == script


def test_script_is_copied_not_shared():
    script = [{"tool_calls": [{"tool_name": "search", "arguments": {"query": "a"}}]}]
    llm = ScriptedChatGenerator(script)
    script[0]["tool_calls"][0]["arguments"]["query"] = "changed"
    reply = llm.run(messages=[USER])["replies"][0]
    assert reply.tool_calls[0].arguments == {"query": "a"}
    reply.tool_calls[0].arguments["query"] = "mutated"  # a reply never aliases the script
    assert llm.run(messages=[USER])["replies"][0].tool_calls[0].arguments == {"query": "a"}


def test_works_as_a_pipeline_component():
    pipeline = Pipeline()
    pipeline.add_component("llm", ScriptedChatGenerator([{"text": "hi"}]))
    assert pipeline.run({"llm": {"messages": [USER]}})["llm"]["replies"][0].text == "hi"
    loaded = Pipeline.loads(pipeline.dumps(), allowed_modules=[ScriptedChatGenerator.__module__])
    assert loaded.run({"llm": {"messages": [USER]}})["llm"]["replies"][0].text == "hi"
