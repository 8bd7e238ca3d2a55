# SPDX-License-Identifier: Apache-2.0
"""`has_own_words`: what counts as an answer with no words of its own (never a result `answered`). Tool calls
written as text are read by the recovery's own parser (`llm.text_tool_calls`): a reply the loop runs as calls is
never an answer in words."""

import json
from pathlib import Path

import pytest
from scripted_chat_generator import ScriptedChatGenerator

from haystack_agentic.components.routers.agentic_router import AgenticRouter
from haystack_agentic.grounding.markers import has_own_words
from haystack_agentic.llm.loop_tools import BUILTIN_TOOL_NAMES
from haystack_agentic.llm.text_tool_calls import recover_tool_calls

CALL = '{"name": "search", "arguments": {"query": "Dow Chemical Company headquarters"}}'
#: A tool definition copied back, as small models do: not a call (the router takes it as text, as the recovery does).
DEFINITION = '{"type": "function", "function": {"name": "search", "description": "Search.", "parameters": {}}}'
RECORDED = Path(__file__).resolve().parents[1] / "data" / "text_tool_calls"


@pytest.mark.parametrize(
    "text",
    [
        None,
        "",
        "  \n ",
        "\u200b\u2060",
        "[5]",
        "[5][6].",
        "[1, 2]",
        CALL,
        f"<tool_call>{CALL}</tool_call>",
        f"<tools>\n{CALL}\n</tools>",
        f"```json\n{CALL}\n```",
        f"[{CALL}, {CALL}]",
        f"Calling search.\n{CALL} [1]",
        f"Searching for the question first.\n{CALL}",
        '{"name": "give_up"}',
        f"<tool_call>{CALL}",
        '{"name": "answer", "text": "Midland"}',  # the arguments beside the name (the real 0.5B's shape)
        f"{CALL}\n{CALL[:30]}",
        f"\u200b```json\n{CALL}\n```\u200b",
        f"{'x' * 150}\n{CALL}",
    ],
)
def test_no_words_of_its_own(text):
    assert has_own_words(text, BUILTIN_TOOL_NAMES) is False


@pytest.mark.parametrize(
    "text",
    [
        "Midland, Michigan",
        "1998 [2]",
        "Yes.",
        '{"answer": 1}',
        "Greenwich Village [1][2]",
        (
            f"The headquarters are in Midland, Michigan.\nI searched with {CALL} and read the second result, which "
            "says so."
        ),
        # prose after the calls, or a lead-in of more than one line, makes the reply an answer (it is not run as calls)
        f"{CALL}\nThe headquarters are in Midland, Michigan.",
        f"I searched.\nThen I read.\n{CALL}",
        "[Paris]",
        f"{'x' * 250} {CALL}",
        DEFINITION,
        f"<tools>\n{DEFINITION}",
        # an answer written as JSON: an object with a name, but no arguments key and no tool of the run
        '{"name": "Paris", "country": "France"}',
        '```json\n{"name": "Marie Curie", "born": 1867}\n```',
    ],
)
def test_words_of_its_own(text):
    assert has_own_words(text, BUILTIN_TOOL_NAMES) is True


def _recorded_replies() -> list[str]:
    return [
        reply["content"]
        for path in sorted(RECORDED.glob("*.json"))
        for reply in json.loads(path.read_text())["replies"]
        if reply["content"]
    ]


@pytest.mark.parametrize("truncated", [False, True])
def test_a_reply_run_as_tool_calls_has_no_words_of_its_own(truncated):
    # One parser: the replies recorded from the real models, and the shapes above, that the loop runs as calls.
    tools = AgenticRouter(chat_generator=ScriptedChatGenerator())._all_tools
    texts = [*_recorded_replies(), CALL, f"<tools>\n{CALL}\n</tools>", f"[{CALL}, {CALL}]", f"{CALL}\n{CALL[:30]}"]
    run = [text for text in texts if recover_tool_calls(text, tools, truncated=truncated)]
    assert len(run) >= (5 if truncated else 4)
    assert not [text for text in run if has_own_words(text, [tool.name for tool in tools])]


def test_calls_to_a_user_tool_are_tool_call_text_only_in_a_run_that_offers_it():
    weather = '{"name": "weather", "city": "Paris"}'  # a call with its arguments beside the name (no arguments key)
    assert has_own_words(weather, (*BUILTIN_TOOL_NAMES, "weather")) is False
    assert has_own_words(weather, BUILTIN_TOOL_NAMES) is True
    assert has_own_words(CALL, ()) is True  # a run that offers no tools: no text is a call


@pytest.mark.parametrize(
    "text",
    [
        '<tool_call>{"name": "delete_files", "arguments": {"path": "/"}}</tool_call>',
        '```json\n{"name": "lookup", "parameters": {"q": "x"}}\n```',
        '{"type": "function", "function": {"name": "browse", "arguments": "{}"}}',
        '{"name": "weather", "arguments": {"city": "Paris"}}',
    ],
)
def test_a_call_in_its_explicit_shape_is_no_answer_whatever_tool_it_names(text):
    # An `arguments`/`parameters` key or the `function` wrapper makes it a call, not an answer written in JSON.
    assert not has_own_words(text, BUILTIN_TOOL_NAMES)
