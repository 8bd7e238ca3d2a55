# SPDX-License-Identifier: Apache-2.0
"""AgenticRouter, tools mode: tool calls the model wrote as text run as calls (in the conversation as real tool calls,
counted in `metadata["recovered_tool_calls"]`, never streamed as text); prose stays an answer. Replayed on replies
recorded from Qwen2.5-Coder 0.5B/1.5B through llama.cpp (tests/data/text_tool_calls/)."""

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import QUESTION, actions, search
from haystack import component
from haystack.dataclasses import ChatMessage, ChatRole, StreamingChunk, ToolCall

from haystack_agentic import AgenticRouter, LoopController
from haystack_agentic.grounding.citations import strip_markers
from haystack_agentic.llm.streaming import ROLE_META
from haystack_agentic.llm.text_tool_calls import RECOVERED_TOOL_CALLS
from haystack_agentic.pipelines.loop_pipeline import loop_inputs

RECORDED = Path(__file__).parents[2] / "data" / "text_tool_calls"


def _text_call(name: str, **arguments: Any) -> str:
    return json.dumps({"name": name, "arguments": arguments})


def test_text_calls_run_as_tool_calls_and_pair_with_their_results(build_loop):
    loop = build_loop(
        [
            {"text": "I'll search for the film.\n```json\n" + _text_call("search", query="Adriana Trigiani") + "\n```"},
            {"text": "<tool_call>\n" + _text_call("answer", text="Greenwich Village") + "\n</tool_call>"},
        ]
    )
    result = loop.run()
    assert actions(result) == ["search", "answer"]
    assert result["tool_history"][0]["query"] == "Adriana Trigiani"
    assert result["tool_history"][0]["returned_chunk_ids"]
    assert strip_markers(result["answer"]) == "Greenwich Village"
    assert result["terminated_by"] == "answered"
    assert result["metadata"][RECOVERED_TOOL_CALLS] == 2
    # The second call saw the first reply as an assistant message with a real tool call, and its result paired.
    messages = loop.llm.calls[1][0]
    assistant = next(m for m in messages if m.role == ChatRole.ASSISTANT)
    tool = next(m for m in messages if m.role == ChatRole.TOOL)
    assert [c.tool_name for c in assistant.tool_calls] == ["search"]
    assert tool.tool_call_result.origin.id == assistant.tool_calls[0].id
    assert "Adriana Trigiani" in tool.tool_call_result.result


def test_several_text_calls_in_one_reply_all_run(build_loop):
    both = json.dumps(
        [
            {"name": "search", "arguments": {"query": "Big Stone Gap film"}},
            {"name": "search", "arguments": {"query": "Adriana Trigiani"}},
        ]
    )
    loop = build_loop([{"text": both}, {"text": _text_call("answer", text="Greenwich Village")}])
    result = loop.run()
    assert actions(result) == ["search", "search", "answer"]
    assert result["metadata"][RECOVERED_TOOL_CALLS] == 3


@pytest.mark.parametrize(
    "text",
    [
        "She is based in Greenwich Village.",
        'She is based in Greenwich Village. (I did not need {"name": "search"}.)',
    ],
)
def test_prose_stays_an_answer(build_loop, text):
    loop = build_loop([{"text": text}])
    result = loop.run()
    assert actions(result) == ["answer"]
    assert result["tool_history"][0]["result"] == "plain-text reply"
    assert RECOVERED_TOOL_CALLS not in result["metadata"]


@pytest.mark.parametrize(
    "text",
    [
        _text_call("delete_files", path="/"),  # not an offered tool, in a call's explicit shape
        '{"name": "search", "arguments": {"query": "x", "top_k": "lots"}}',  # arguments that do not validate
        '{"name": "give_up", "why": "none"}',  # a key the tool does not declare
    ],
)
def test_calls_that_do_not_validate_neither_run_nor_answer(build_loop, text):
    # Not run as a call, and only tool-call text: no words of its own, so never the answer (a refused turn).
    loop = build_loop([{"text": text}] * 4)
    result = loop.run()
    assert actions(result)[0] == "invalid" and "answer" not in actions(result)
    assert result["terminated_by"] != "answered"
    assert RECOVERED_TOOL_CALLS not in result["metadata"]


def test_a_user_tool_written_as_text_runs(build_loop):
    from haystack.tools import Tool

    year = Tool(
        name="film_year",
        description="Year of a film.",
        function=lambda title: "2014",
        parameters={"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]},
    )
    loop = build_loop(
        [{"text": _text_call("film_year", title="Big Stone Gap")}, {"text": _text_call("answer", text="2014")}],
        router_kwargs={"tools": [year]},
    )
    result = loop.run()
    assert actions(result) == ["tool", "answer"]
    assert result["tool_history"][0]["result"] == "2014"


@pytest.mark.parametrize(
    "text",
    [
        '{"name": "Greenwich Village", "country": "United States"}',
        '{"name": "delete_files", "path": "/"}',  # no arguments key and no tool of the run: JSON, like any other
    ],
)
def test_json_that_names_no_tool_of_the_run_is_an_answer(build_loop, text):
    # Only calls of the run's tools are tool-call text; any other JSON object is the model's answer written as JSON.
    result = build_loop([{"text": text}]).run()
    assert actions(result) == ["answer"] and result["terminated_by"] == "answered"
    assert strip_markers(result["answer"]) == text


def test_a_user_tool_call_that_does_not_validate_is_not_an_answer(build_loop):
    from haystack.tools import Tool

    year = Tool(
        name="film_year",
        description="Year of a film.",
        function=lambda title: "2014",
        parameters={"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]},
    )
    loop = build_loop([{"text": _text_call("film_year", title=5)}] * 4, router_kwargs={"tools": [year]})
    result = loop.run()
    assert actions(result)[0] == "invalid" and "answer" not in actions(result)
    assert result["terminated_by"] != "answered"


@component
class _ReplayGenerator:
    """Plays recorded replies (text, native tool calls, finish reason), one per call."""

    def __init__(self, replies: list[dict[str, Any]]) -> None:
        self.replies = replies
        self.calls = 0

    @component.output_types(replies=list[ChatMessage])
    def run(self, messages: list[ChatMessage], tools: Any = None, **kwargs: Any) -> dict[str, Any]:
        recorded = self.replies[min(self.calls, len(self.replies) - 1)]
        self.calls += 1
        tool_calls = [
            ToolCall(tool_name=c["name"], arguments=c["arguments"], id=f"native-{n}")
            for n, c in enumerate(recorded.get("tool_calls") or [])
        ]
        meta = {"finish_reason": recorded.get("finish_reason"), "usage": {"prompt_tokens": 1, "completion_tokens": 1}}
        return {"replies": [ChatMessage.from_assistant(text=recorded["content"], tool_calls=tool_calls, meta=meta)]}


def _route(replies: list[dict[str, Any]], question: str = QUESTION) -> dict[str, Any]:
    router = AgenticRouter(chat_generator=_ReplayGenerator(replies), mode="tools", search_question_first=False)
    return router.run(state=LoopController().run(query=question)["state"])


def test_a_reply_cut_by_the_token_limit_runs_its_complete_call():
    text = _text_call("search", query="Adriana Trigiani") + '\n{"name": "search", "arguments": {"query": "Big St'
    routed = _route([{"content": text, "finish_reason": "length"}])
    assert routed["query"] == "Adriana Trigiani"
    assert routed["loop"].metadata[RECOVERED_TOOL_CALLS] == 1
    routed = _route([{"content": text, "finish_reason": "stop"}])  # not cut: the broken call makes it text,
    assert "query" not in routed and "answer" not in routed  # with no words of its own: a refused turn


# --- streaming ---------------------------------------------------------------------------------------------------


def _controller_text(chunks: list[StreamingChunk]) -> str:
    return "".join(c.content for c in chunks if c.meta.get(ROLE_META) == "controller")


def test_text_calls_are_not_streamed_but_prose_is(build_loop):
    loop = build_loop(
        [{"text": "Searching.\n" + _text_call("search", query="Adriana Trigiani")}, {"text": "Greenwich Village."}]
    )
    chunks: list[StreamingChunk] = []
    loop.pipeline.run(loop_inputs(loop.pipeline, query=QUESTION, streaming_callback=chunks.append))
    assert _controller_text(chunks) == "Greenwich Village."


async def test_text_calls_are_not_streamed_on_the_async_path(build_loop):
    loop = build_loop([{"text": _text_call("search", query="Adriana Trigiani")}, search("Big Stone Gap")])
    chunks: list[StreamingChunk] = []

    async def collect(chunk: StreamingChunk) -> None:
        chunks.append(chunk)

    await loop.pipeline.run_async(loop_inputs(loop.pipeline, query=QUESTION, streaming_callback=collect))
    assert '"name"' not in _controller_text(chunks)


# --- replies recorded from the real models -------------------------------------------------------------------------

#: What each recorded reply must route to, by (model file, question id, turn): the recovered calls as
#: `[(tool, arguments)]`, or `"text"` when the reply is not calls (it stays a plain-text answer).
EXPECTED: dict[tuple[str, str, int], Any] = {
    ("qwen2.5-coder-0.5b.json", "5ade99235542997c77adee7f", 1): [("search", {"query": "Dow AgroSciences", "top_k": 1})],
    # The tool definitions copied back, cut at max_tokens: not calls.
    ("qwen2.5-coder-0.5b-q2-q6.json", "5ac401bb55429919431738f4", 1): "text",
    ("qwen2.5-coder-0.5b-q2-q6.json", "5a8e3ea95542995a26add48d", 1): [
        ("answer", {"text": "The director of the romantic comedy 'Big Stone Gap' is based in New York City."})
    ],
    ("qwen2.5-coder-0.5b-q2-q6.json", "5adbf44355429944faac23ce", 1): [
        ("search", {"query": "8th Military Police Brigade Barracks", "top_k": 10})
    ],
    # A plain answer from memory, no search: prose stays an answer.
    ("qwen2.5-coder-0.5b-q2-q6.json", "5ab56b3a554299637185c585", 1): "text",
    ("qwen2.5-coder-0.5b-q2-q6.json", "5a88a19a5542997e5c09a64b", 1): "text",  # tool definitions again, cut
    # `<tools>` and the same search ten times, cut at max_tokens inside the eleventh: one search.
    ("qwen2.5-coder-1.5b.json", "5a8e3ea95542995a26add48d", 1): [
        ("search", {"query": "director of romantic comedy", "top_k": 1})
    ],
}


def _recorded() -> list[tuple[str, dict[str, Any]]]:
    return [
        (path.name, reply)
        for path in sorted(RECORDED.glob("*.json"))
        for reply in json.loads(path.read_text())["replies"]
    ]


@pytest.mark.parametrize(("fixture", "reply"), _recorded(), ids=lambda v: v if isinstance(v, str) else None)
def test_recorded_replies_route_as_expected(fixture, reply):
    routed = _route([reply], reply["question"])
    state = next(v for v in routed.values() if hasattr(v, "tool_history"))
    expected = EXPECTED[(fixture, reply["id"], reply["turn"])]
    if reply["tool_calls"]:
        assert RECOVERED_TOOL_CALLS not in state.metadata  # native calls are not recovered ones
        return
    if expected == "text":
        assert "answer" in routed and state.tool_history[-1].result == "plain-text reply"
        assert RECOVERED_TOOL_CALLS not in state.metadata
        return
    assistant = next(m for m in reversed(state.messages) if m.role == ChatRole.ASSISTANT)
    assert [(c.tool_name, c.arguments) for c in assistant.tool_calls] == [tuple(call) for call in expected]
    assert state.metadata[RECOVERED_TOOL_CALLS] == len(expected)
