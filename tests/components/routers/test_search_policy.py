# SPDX-License-Identifier: Apache-2.0
"""`AgenticRouter(search_policy=BridgeEntityRouter(...))`: the policy's searches come first, without LLM calls; then
the LLM decides from the chunks they found."""

import pytest
import yaml
from conftest import QUESTION, answer, calls, decide
from haystack.dataclasses import ChatRole
from scripted_chat_generator import ScriptedChatGenerator

from haystack_agentic import AgenticRouter, BridgeEntityRouter
from haystack_agentic.components.routers.agentic_router import POLICY_SEARCH_REASON
from haystack_agentic.grounding.markers import strip_markers


def searches(result):
    return [(step["query"], step["reasoning"]) for step in result["tool_history"] if step["action"] == "search"]


def policy(store, **kwargs):
    return {"search_policy": BridgeEntityRouter(document_store=store, first_top_k=2, **kwargs)}


def test_json_mode_the_policy_searches_first_then_the_llm_decides(build_loop, store):
    loop = build_loop(
        [decide("generate")],
        mode="json",
        router_kwargs=policy(store),
        answer_script=[{"text": "Greenwich Village"}],
    )
    result = loop.run()
    found = searches(result)
    assert found[0] == (QUESTION, POLICY_SEARCH_REASON + "the question")
    # the bridge entity the question's chunks name (not in the question), its own page filtered by title
    assert [query for query, _ in found[1:]] == ["Adriana Trigiani"]
    assert all(reason.startswith(POLICY_SEARCH_REASON) for _, reason in found)
    follow_up = [step for step in result["tool_history"] if step["action"] == "search"][1]
    assert follow_up["returned_chunk_ids"] == ["trigiani"] and follow_up["arguments"]["top_k"] == 1
    assert calls(result, "controller") == 1  # one decision, after the policy's searches
    prompt = loop.llm.calls[0][0][-1].text
    assert "based in Greenwich Village" in prompt  # the LLM decides from the bridge page the policy found
    assert result["terminated_by"] == "answered" and strip_markers(result["answer"]) == "Greenwich Village"


def test_tools_mode_the_policys_searches_are_calls_of_the_conversation(build_loop, store):
    loop = build_loop([answer("Greenwich Village")], router_kwargs=policy(store), per_call=True)
    result = loop.run()
    assert [query for query, _ in searches(result)] == [QUESTION, "Adriana Trigiani"]
    first_call = loop.llm.calls[0][0]
    made = [call.arguments for m in first_call if m.role == ChatRole.ASSISTANT for call in m.tool_calls]
    assert made == [{"query": QUESTION, "top_k": 2}, {"query": "Adriana Trigiani", "top_k": 1}]
    results = [m.tool_call_result.result for m in first_call if m.tool_call_result]
    assert "Greenwich Village" in results[-1]
    assert calls(result, "controller") == 1 and result["terminated_by"] == "answered"


def test_after_the_llms_first_turn_the_policy_searches_no_more(build_loop, store):
    # The LLM searches something else; the policy would still have follow-ups, but the LLM decides from here on.
    loop = build_loop(
        [decide("search", query="Village People"), decide("generate")],
        mode="json",
        router_kwargs=policy(store, max_follow_ups=0),
        answer_script=[{"text": "Greenwich Village"}],
        max_iterations=6,
    )
    result = loop.run()
    assert [query for query, _ in searches(result)] == [QUESTION, "Village People"]
    assert calls(result, "controller") == 2


def test_a_policy_with_no_follow_up_is_the_question_first(build_loop, store):
    loop = build_loop(
        [decide("generate")],
        mode="json",
        router_kwargs=policy(store, max_follow_ups=0),
        answer_script=[{"text": "Greenwich Village"}],
    )
    result = loop.run()
    assert [query for query, _ in searches(result)] == [QUESTION]
    assert calls(result, "controller") == 1


def test_the_policy_round_trips_through_yaml(store, allow_deserialization):
    router = AgenticRouter(chat_generator=ScriptedChatGenerator([]), mode="json", **policy(store, max_follow_ups=1))
    data = router.to_dict()
    assert data["init_parameters"]["search_policy"]["type"].endswith("BridgeEntityRouter")
    again = AgenticRouter.from_dict(yaml.safe_load(yaml.safe_dump(data)))
    assert isinstance(again.search_policy, BridgeEntityRouter) and again.search_policy.max_follow_ups == 1
    assert again.to_dict() == data
    plain = AgenticRouter(chat_generator=ScriptedChatGenerator([])).to_dict()
    assert plain["init_parameters"]["search_policy"] is None and AgenticRouter.from_dict(plain).search_policy is None


def test_a_search_policy_must_be_a_bridge_entity_router():
    with pytest.raises(TypeError, match="search_policy must be a BridgeEntityRouter, got dict"):
        AgenticRouter(chat_generator=ScriptedChatGenerator([]), search_policy={"type": "x"})


def test_the_llm_may_search_a_page_the_policy_searched_over_the_whole_store(build_loop, store):
    # The policy searched "Adriana Trigiani" on her page only (top 1): the same words over the whole store are a new
    # search, not a repeat; asked a second time they are a repeat.
    loop = build_loop(
        [decide("search", query="Adriana Trigiani"), decide("search", query="adriana trigiani"), decide("generate")],
        mode="json",
        router_kwargs=policy(store),
        answer_script=[{"text": "Greenwich Village"}],
        max_iterations=8,
    )
    result = loop.run()
    steps = [s for s in result["tool_history"] if s["query"] and s["query"].casefold() == "adriana trigiani"]
    assert [s["action"] for s in steps] == ["search", "search", "invalid"]
    assert steps[0]["arguments"]["filters"] == {"field": "meta.title", "operator": "==", "value": "Adriana Trigiani"}
    assert "filters" not in steps[1]["arguments"] and len(steps[1]["returned_chunk_ids"]) > 1
    assert "already searched" in steps[2]["result"]


@pytest.mark.parametrize("mode", ["json", "tools"])
def test_a_follow_up_is_left_to_the_model_not_the_policy(build_loop, store, mode):
    # The policy follows the entities of the question's own words; "Where is she based?" names none of its own. As
    # without a policy, a follow-up's searches are the model's, which sees the conversation.
    from conftest import search
    from haystack.dataclasses import ChatMessage

    if mode == "json":
        script, extra = (
            [decide("search", query="Adriana Trigiani"), decide("generate")],
            {"answer_script": [{"text": "Greenwich Village"}]},
        )
    else:
        script, extra = [search("Adriana Trigiani"), answer("Greenwich Village")], {"per_call": True}
    loop = build_loop(script, mode=mode, router_kwargs=policy(store), **extra)
    conversation = [
        ChatMessage.from_user("Who directed Big Stone Gap?"),
        ChatMessage.from_assistant("Adriana Trigiani [1]"),
        ChatMessage.from_user("Where is she based?"),
    ]
    result = loop.pipeline.run({"controller": {"messages": conversation}})["result"]
    found = searches(result)
    assert [query for query, _ in found] == ["Adriana Trigiani"]
    assert not any((reason or "").startswith(POLICY_SEARCH_REASON) for _, reason in found)
    assert calls(result, "controller") == 2 and result["terminated_by"] == "answered"
