# SPDX-License-Identifier: Apache-2.0
"""The loop is at least one-shot RAG: the question is searched first without an LLM call, a weak router cannot waste
the budget (refusals come with numbered candidate searches, two in a row end the loop), and no result is `answered`
with an answer that has no words of its own."""

import itertools

import pytest
from conftest import QUESTION, answer, calls, decide, search
from haystack.dataclasses import ChatRole
from scripted_chat_generator import ScriptedChatGenerator

from haystack_agentic import AgenticRouter
from haystack_agentic.grounding.markers import strip_markers
from haystack_agentic.llm.refused_turns import MAX_REFUSED_TURNS, SUGGESTED_SEARCH_REASON

FIRST = {"search_question_first": True}
#: The free first search puts an assistant message (its `search` call) in the conversation: count calls, not those.
TOOLS = {"router_kwargs": FIRST, "per_call": True}


def searched(result):
    return [step["query"] for step in result["tool_history"] if step["action"] == "search"]


def test_the_free_searchs_text_copied_back_is_a_recovered_repeat_not_an_answer(build_loop):
    # The 0.5B model copied the text of the free search's assistant message back as its answer; that text is the
    # call itself as JSON, so a copy is recovered as the same search, refused as a repeat, never the answer.
    escaped = QUESTION.replace('"', '\\"')
    copied = f'{{"name": "search", "arguments": {{"query": "{escaped}"}}}}'
    loop = build_loop([{"text": copied}] * 4, **TOOLS, fallback_script=[{"text": "Adriana Trigiani"}])
    result = loop.run()
    first_call = loop.llm.calls[0][0]
    assistant = next(m for m in first_call if m.role == ChatRole.ASSISTANT)
    assert assistant.text == copied and assistant.tool_calls[0].arguments == {"query": QUESTION}
    assert searched(result).count(QUESTION) == 1 and "answer" not in [s["action"] for s in result["tool_history"]]
    assert calls(result, "controller") == MAX_REFUSED_TURNS and result["terminated_by"] != "answered"


def test_a_router_that_never_searches_still_answers_from_the_questions_chunks(build_loop):
    loop = build_loop([answer("Adriana Trigiani")], **TOOLS)
    result = loop.run()
    assert searched(result) == [QUESTION] and result["documents"]  # one-shot RAG's retrieval, no LLM call spent
    assert calls(result, "controller") == 1
    first_call = loop.llm.calls[0][0]
    assert first_call[-1].role == ChatRole.TOOL and "Big Stone Gap" in first_call[-1].tool_call_result.result
    assert result["terminated_by"] == "answered" and strip_markers(result["answer"]) == "Adriana Trigiani"


def test_json_mode_generating_at_once_writes_the_answer_from_the_questions_chunks(build_loop):
    loop = build_loop(
        [decide("generate")], mode="json", router_kwargs=FIRST, answer_script=[{"text": "Adriana Trigiani"}]
    )
    result = loop.run()
    assert searched(result) == [QUESTION]
    assert "Big Stone Gap is a 2014" in loop.answer_llm.calls[0][0][-1].text  # the question's chunk, in the prompt
    assert "Big Stone Gap is a 2014" in loop.llm.calls[0][0][-1].text  # and in the router's first prompt
    assert result["terminated_by"] == "answered" and strip_markers(result["answer"]) == "Adriana Trigiani"
    assert result["citations"] and result["citations"][0]["document_id"] in {d.id for d in result["documents"]}


def test_the_option_turns_it_off_and_round_trips(allow_deserialization):
    router = AgenticRouter(chat_generator=ScriptedChatGenerator([]), search_question_first=False)
    assert AgenticRouter.from_dict(router.to_dict()).search_question_first is False
    assert AgenticRouter(chat_generator=ScriptedChatGenerator([])).search_question_first is True


def test_a_router_repeating_itself_gets_the_chunks_suggestion_then_the_loop_answers_from_the_chunks(build_loop):
    loop = build_loop([search(QUESTION)] * 6, **TOOLS, max_iterations=8, fallback_script=[{"text": "Adriana Trigiani"}])
    result = loop.run()
    assert calls(result, "controller") == MAX_REFUSED_TURNS  # not the 7 turns left
    assert result["terminated_by"] == "max_iterations" and strip_markers(result["answer"]) == "Adriana Trigiani"
    # Between the two refused turns the loop searched what the chunks suggest, without a call: a name from the
    # chunks, not from the question.
    steps = result["tool_history"]
    assert [s["action"] for s in steps] == ["search", "invalid", "search", "invalid"]
    assert steps[2]["reasoning"] == SUGGESTED_SEARCH_REASON
    assert steps[2]["query"].casefold() not in QUESTION.casefold()
    told = loop.llm.calls[1][0]
    assert any("already searched" in (m.tool_call_result.result or "") for m in told if m.tool_call_result)
    assert told[-2].tool_calls[0].arguments == {"query": steps[2]["query"]}  # the suggestion, as a search call


def test_json_mode_a_refused_search_is_followed_by_the_chunks_suggestion(build_loop):
    loop = build_loop(
        [decide("search", query=QUESTION), decide("generate")],
        mode="json",
        router_kwargs=FIRST,
        answer_script=[{"text": "Greenwich Village"}],
    )
    result = loop.run()
    steps = result["tool_history"]
    assert [s["action"] for s in steps] == ["search", "invalid", "search", "generate"]
    assert searched(result) == [QUESTION, steps[2]["query"]] and steps[2]["reasoning"] == SUGGESTED_SEARCH_REASON
    prompt = loop.llm.calls[1][0][-1].text
    assert steps[2]["query"] in prompt and "already searched" in prompt  # the model sees the step and its chunks
    assert calls(result, "controller") == 2


def test_json_invalid_replies_twice_end_the_loop_early(build_loop):
    loop = build_loop(
        [{"text": "I am not sure."}] * 5,
        mode="json",
        router_kwargs=FIRST,
        max_iterations=8,
        fallback_script=[{"text": "Adriana Trigiani"}],
    )
    result = loop.run()
    assert calls(result, "controller") == MAX_REFUSED_TURNS
    assert result["terminated_by"] == "max_iterations" and result["answer"]


@pytest.mark.parametrize(
    "reply",
    [
        {"text": "[5]"},
        {"text": "[5][6]"},
        {"text": " \u200b "},
        answer("[1]"),
        # a call of an offered tool whose arguments do not validate is not recovered (a valid search would run): only
        # tool-call text (a call of a tool the run does not offer is text: tests/grounding/test_own_words.py)
        {"text": '<tools>{"name": "search", "arguments": {"query": "x", "top_k": "lots"}}</tools>'},
    ],
)
def test_an_answer_without_words_of_its_own_is_never_answered(build_loop, reply):
    loop = build_loop([reply] * 4, **TOOLS, fallback_script=[{"text": "[2]"}])
    result = loop.run()
    assert result["terminated_by"] != "answered"
    assert result["answer"] is None  # the fallback's "[2]" has no words either
    assert calls(result, "controller") <= MAX_REFUSED_TURNS


def test_json_mode_with_one_turn_answers_from_the_chunks_at_the_cap(build_loop):
    loop = build_loop(
        [], mode="json", router_kwargs=FIRST, max_iterations=1, fallback_script=[{"text": "Adriana Trigiani"}]
    )
    result = loop.run()
    assert searched(result) == [QUESTION]
    assert result["terminated_by"] == "max_iterations" and strip_markers(result["answer"]) == "Adriana Trigiani"


def test_an_answer_forced_at_the_cap_says_so(build_loop):
    loop = build_loop(
        [decide("search", query="Adriana Trigiani")],
        mode="json",
        router_kwargs=FIRST,
        max_iterations=3,
        answer_script=[{"text": "Greenwich Village"}],
    )
    result = loop.run()
    assert searched(result) == [QUESTION, "Adriana Trigiani"]
    assert result["terminated_by"] == "max_iterations" and strip_markers(result["answer"]) == "Greenwich Village"


@pytest.mark.parametrize("reply", [{"text": "[1]"}, {"text": "[1][2]"}, search(QUESTION)])
def test_tools_mode_a_refused_turn_is_explained_before_the_loops_own_search(build_loop, reply):
    # The model is told why its turn was refused, although the loop searches the chunks' suggestion in its place,
    # and the conversation keeps alternating roles (no two assistant messages in a row).
    loop = build_loop([reply, answer("Greenwich Village")], **TOOLS, max_iterations=6)
    result = loop.run()
    assert [s["action"] for s in result["tool_history"]][:3] == ["search", "invalid", "search"]
    assert result["tool_history"][2]["reasoning"] == SUGGESTED_SEARCH_REASON
    told = loop.llm.calls[1][0]
    notes = [m.text or (m.tool_call_result.result if m.tool_call_result else "") for m in told]
    assert any("Search for something new, or answer from the chunks." in (note or "") for note in notes)
    roles = [m.role for m in told if m.role != ChatRole.SYSTEM]
    assert all(not (a == b == ChatRole.ASSISTANT) for a, b in itertools.pairwise(roles))
    assert result["terminated_by"] == "answered"
