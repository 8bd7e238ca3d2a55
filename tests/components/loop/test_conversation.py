# SPDX-License-Identifier: Apache-2.0
"""`messages` (a conversation) instead of `query`: the history reaches the controller and the answerer, system
messages included, so a follow-up question that needs the previous turn is answered."""

import pytest
from conftest import answer, decide, give_up, search
from haystack.core.errors import PipelineRuntimeError
from haystack.dataclasses import ChatMessage, ChatRole, ToolCall

from haystack_agentic import LoopController, LoopState
from haystack_agentic.components.loop.loop_controller import InvalidLoopInputError
from haystack_agentic.grounding.citations import strip_markers
from haystack_agentic.pipelines.loop_pipeline import loop_inputs

HISTORY = [
    ChatMessage.from_system("Answer in English."),
    ChatMessage.from_user("Who directed the film Big Stone Gap?"),
    ChatMessage.from_assistant("Adriana Trigiani"),
    ChatMessage.from_user("And where is she based?"),
]
#: Searches for the entity named in the last assistant message of the conversation it receives: a query it can
#: only write when the history reached it.
SEARCH_FROM_HISTORY = {
    "template": True,
    "tool_calls": [
        {
            "tool_name": "search",
            "arguments": {
                "query": (
                    "{% for m in messages %}{% if m.role == 'assistant' and m.text %}{{ m.text }}{% endif %}{% endfor %}"
                )
            },
        }
    ],
}


def texts(messages: list[ChatMessage]) -> list[str]:
    return [m.text or "" for m in messages]


def test_a_follow_up_question_is_answered_from_the_previous_turn(build_loop):
    # One assistant message is in the history, so the (conversation-counting) script starts at turn 1.
    loop = build_loop(
        [give_up("no history reached me"), SEARCH_FROM_HISTORY, answer("Greenwich Village")],
        answer_script=[{"text": "Greenwich Village, New York City"}],
    )
    result = loop.pipeline.run(loop_inputs(loop.pipeline, messages=HISTORY))["result"]
    assert result["terminated_by"] == "answered"
    assert result["tool_history"][0]["query"] == "Adriana Trigiani"
    assert result["tool_history"][0]["returned_chunk_ids"][0] == "trigiani"
    assert strip_markers(result["answer"]) == "Greenwich Village, New York City"
    first_call = loop.llm.calls[0][0]
    assert first_call[0].role == ChatRole.SYSTEM and "search" in first_call[0].text  # the loop's own prompt first
    assert texts(first_call[1:5]) == texts(HISTORY)  # then the whole conversation, system message included
    answer_call = loop.answer_llm.calls[0][0]
    assert texts(answer_call[1:4]) == texts(HISTORY[:3])  # after its own system message, the earlier turns too
    assert "And where is she based?" in answer_call[-1].text


async def test_the_history_reaches_the_json_controller_and_the_async_path(build_loop):
    loop = build_loop(
        [decide("search", query="Adriana Trigiani"), decide("generate")],
        mode="json",
        answer_script=[{"text": "Greenwich Village"}],
    )
    out = await loop.pipeline.run_async(loop_inputs(loop.pipeline, messages=HISTORY))
    assert strip_markers(out["result"]["answer"]) == "Greenwich Village"
    prompt = loop.llm.calls[0][0]
    assert texts(prompt[:3]) == texts(HISTORY[:3])
    assert "And where is she based?" in prompt[-1].text


def test_the_state_keeps_the_conversation_and_round_trips():
    state = LoopController().run(messages=HISTORY)["state"]
    assert state.question == "And where is she based?"
    assert list(state.conversation) == HISTORY
    assert LoopState.from_dict(state.to_dict()) == state


@pytest.mark.parametrize(
    ("messages", "says"),
    [
        ([], "empty"),
        ([ChatMessage.from_system("Be brief.")], "no user message"),
        ([ChatMessage.from_user("   ")], "empty"),
        ("Who?", "list of ChatMessage"),
        ([{"role": "user", "content": "Who?"}], "ChatMessage"),
        ([ChatMessage.from_tool("42", origin=ToolCall(tool_name="x", arguments={}))], "role 'tool'"),
        ([ChatMessage.from_user("Who?"), ChatMessage.from_assistant("Nobody")], "end with the user's question"),
        (
            [
                ChatMessage.from_assistant(tool_calls=[ToolCall(tool_name="x", arguments={})]),
                ChatMessage.from_user("Who?"),
            ],
            "tool calls",
        ),
    ],
)
def test_bad_conversations_are_refused_with_a_clear_error(messages, says):
    with pytest.raises(InvalidLoopInputError, match=says):
        LoopController().run(messages=messages)


def test_query_and_messages_together_are_refused(build_loop):
    loop = build_loop([search("x")])
    with pytest.raises(PipelineRuntimeError, match="either `query` or `messages`"):
        loop.pipeline.run({"controller": {"query": "Who?", "messages": HISTORY}})


def test_a_long_conversation_keeps_its_system_messages_and_latest_turns_within_the_budget(build_loop):
    from haystack_agentic.llm.tokens import CONSERVATIVE

    turns = [ChatMessage.from_system("Answer in English.")]
    for number in range(300):
        question = ChatMessage.from_user(f"Question {number}? " + "words " * 40)
        turns += [question, ChatMessage.from_assistant(f"A{number}")]
    turns += [ChatMessage.from_assistant("Adriana Trigiani"), ChatMessage.from_user("And where is she based?")]
    loop = build_loop(
        [SEARCH_FROM_HISTORY, answer("Greenwich Village")],
        per_call=True,
        router_kwargs={"context_budget_tokens": 3000},
        answer_script=[{"text": "Greenwich Village"}],
    )
    result = loop.pipeline.run(loop_inputs(loop.pipeline, messages=turns))["result"]
    assert strip_markers(result["answer"]) == "Greenwich Village"
    sent = loop.llm.calls[0][0]
    assert CONSERVATIVE.count(sent) < 3000
    assert texts(sent[1:2]) == ["Answer in English."] and texts(sent[-3:]) == texts(turns[-3:])
    assert len(sent) < len(turns)  # the oldest turns were left out
    assert CONSERVATIVE.count(loop.answer_llm.calls[0][0][1:-1]) <= 4000  # the answer role's system message aside
