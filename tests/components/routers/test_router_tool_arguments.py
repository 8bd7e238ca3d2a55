# SPDX-License-Identifier: Apache-2.0
"""
Tool arguments a model may send that once crashed or stalled the loop: a `search` whose `top_k` is not a usable
integer (`1e999` parses to `inf`, which `int()` cannot convert), and a `give_up` without a reason.
"""

import json
import math

import pytest
from conftest import ScriptedRetriever, actions, answer, search, tool_turn
from haystack.dataclasses import ChatRole

from haystack_agentic.components.loop.loop_result_builder import result_to_dict

# --- search(top_k): a bad number is a tool error back to the model, never an exception ----------------------


@pytest.mark.parametrize(
    "top_k",
    [
        math.inf,
        -math.inf,
        math.nan,
        2.5,
        -3,
        0,
        True,
        False,
        "many",
        "2.5",
        "1e999",
        "",
        [3],
        {"n": 3},
    ],
    ids=repr,
)
def test_a_bad_top_k_goes_back_to_the_model_as_a_tool_error(build_loop, top_k):
    retriever = ScriptedRetriever({})
    loop = build_loop(
        [tool_turn("search", {"query": "x", "top_k": top_k}), answer("Greenwich Village")],
        retriever=retriever,
        router_kwargs={"max_top_k": 10},
    )
    result = loop.run()
    assert result["terminated_by"] == "answered"
    assert actions(result) == ["invalid", "answer"]
    assert "'top_k' must be an integer from 1 to 10" in result["tool_history"][0]["result"]
    assert retriever.calls == []
    tool_message = loop.llm.calls[1][0][-1]
    assert tool_message.role == ChatRole.TOOL and tool_message.tool_call_result.error is True
    json.dumps(result_to_dict(result), allow_nan=False)  # the result (its trace included) stays JSON-serialisable


@pytest.mark.parametrize("raw", ['{"query": "x", "top_k": 1e999}', '{"query": "x", "top_k": NaN}'])
def test_a_non_finite_top_k_in_json_text_arguments_is_a_tool_error(build_loop, raw):
    # A real OpenAI client hands over the arguments as text; `json.loads` turns 1e999 into inf.
    loop = build_loop([tool_turn("search", raw), answer("x")], retriever=ScriptedRetriever({}))
    result = loop.run()
    assert actions(result) == ["invalid", "answer"]
    assert "'top_k' must be an integer" in result["tool_history"][0]["result"]
    json.dumps(result_to_dict(result), allow_nan=False)


@pytest.mark.parametrize(
    ("top_k", "used"),
    [(3, 3), (10**400, 10), (500, 10), (7.0, 7), (1e300, 10), ("4", 4), (" 6 ", 6)],
    ids=repr,
)
def test_a_whole_number_top_k_is_used_and_clamped_to_max_top_k(build_loop, top_k, used):
    retriever = ScriptedRetriever({})
    loop = build_loop([search("x", top_k=top_k), answer("y")], retriever=retriever, router_kwargs={"max_top_k": 10})
    result = loop.run()
    assert actions(result) == ["search", "answer"]
    assert [call["top_k"] for call in retriever.calls] == [used]


def test_the_server_side_async_path_survives_an_infinite_top_k(build_loop):
    import asyncio

    loop = build_loop([tool_turn("search", '{"query": "x", "top_k": 1e999}'), answer("y")])
    result = asyncio.run(loop.run_async())
    assert result["terminated_by"] == "answered"


# --- give_up: no reason needed ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "arguments",
    ["", None, "null", "{}", {}, "   ", {"reason": ""}, {"reason": "  "}, {"reason": 7}, {"why": "x"}],
    ids=repr,
)
def test_give_up_without_a_reason_ends_the_run_with_gave_up(build_loop, arguments):
    loop = build_loop([tool_turn("give_up", arguments), answer("never reached")], max_iterations=6)
    result = loop.run()
    assert result["terminated_by"] == "gave_up"
    assert result["iterations"] == 1
    assert actions(result) == ["give_up"]
    assert result["answer"] == "I could not find an answer: no reason given."
    assert len(loop.llm.calls) == 1


@pytest.mark.parametrize("arguments", ["{not json", "[1, 2]", "42"], ids=repr)
def test_give_up_with_unreadable_arguments_still_gives_up(build_loop, arguments):
    # The model's intent is clear from the tool it called; arguments it could not write do not keep it looping.
    result = build_loop([tool_turn("give_up", arguments), answer("never reached")]).run()
    assert (result["terminated_by"], result["iterations"]) == ("gave_up", 1)
    assert result["answer"] == "I could not find an answer: no reason given."


def test_a_model_that_only_gives_up_without_a_reason_stops_at_once(build_loop):
    # Before: every bare give_up was refused, so the run went on to max_iterations with no answer.
    result = build_loop([tool_turn("give_up", "")], max_iterations=5).run()
    assert result["terminated_by"] == "gave_up"
    assert result["iterations"] == 1


def test_give_up_with_a_reason_keeps_it(build_loop):
    result = build_loop([tool_turn("give_up", {"reason": "  nothing about unicorns "})]).run()
    assert result["answer"] == "I could not find an answer: nothing about unicorns"


def test_the_give_up_tool_schema_does_not_require_a_reason():
    from scripted_chat_generator import ScriptedChatGenerator

    from haystack_agentic import AgenticRouter

    router = AgenticRouter(chat_generator=ScriptedChatGenerator([]))
    give_up = next(tool for tool in router._all_tools if tool.name == "give_up")
    assert "reason" in give_up.parameters["properties"]
    assert "reason" not in give_up.parameters.get("required", [])


def test_whole_number_and_finite_helpers():
    from haystack_agentic.llm.tool_arguments import decode_arguments, finite, whole_number

    assert whole_number("+3", 1, 10) == 3 and whole_number(10**400, 1, 10) == 10
    with pytest.raises(ValueError, match="5000-digit"):
        whole_number("9" * 5000, 1, 10)
    assert finite({"a": [math.inf, {"b": -math.inf}], "c": math.nan, "d": 1.5}) == {
        "a": ["inf", {"b": "-inf"}],
        "c": "nan",
        "d": 1.5,
    }
    assert decode_arguments(" ") == ({}, None) and decode_arguments(None) == ({}, None)
    assert decode_arguments('{"top_k": 1e999}') == ({"top_k": math.inf}, None)
    assert decode_arguments("{x")[0] is None and decode_arguments("{x")[1]
