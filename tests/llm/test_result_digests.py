# SPDX-License-Identifier: Apache-2.0
"""What the controller LLM is sent of earlier results: digests, chunks referenced once shown, `read_chunk(id)`."""

import itertools

import pytest
from conftest import DOC_TEXT, QUESTION, ScriptedRetriever, actions, answer, search, tool_turn
from haystack import Document, component
from haystack.dataclasses import ChatMessage, ChatRole
from scripted_chat_generator import ScriptedChatGenerator, message_chars

from haystack_agentic import AgenticRouter, LoopController
from haystack_agentic.llm.result_digests import DIGEST_META_KEY, find_chunk, search_digest, short_id, with_digest

RESULTS = {
    "film": [("bsg", 2.0), ("trigiani", 1.0)],
    "director": [("trigiani", 1.5), ("greenwich", 1.0)],
    "village": [("greenwich", 1.2), ("village-people", 0.5)],
}


def _doc(doc_id: str, score: float) -> Document:
    return Document(id=doc_id, content=DOC_TEXT[doc_id], meta={"title": doc_id.title()}, score=score)


def _turns(script: list[dict], router_kwargs: dict | None = None) -> tuple[ScriptedChatGenerator, list]:
    """Drive controller and router by hand (searches answered from RESULTS); returns the LLM and each state."""
    llm = ScriptedChatGenerator(script)
    router = AgenticRouter(chat_generator=llm, **{"search_question_first": False, **(router_kwargs or {})})
    controller = LoopController(max_iterations=10)
    state, states = controller.run(query=QUESTION)["state"], []
    for _ in script:
        out = router.run(state=state)
        if "query" not in out:
            states.append(out.get("loop") or out.get("answer"))
            if "loop" not in out:
                break
            state = controller.run(state=out["loop"])["state"]
            continue
        found = [_doc(doc_id, score) for doc_id, score in RESULTS.get(out["query"], [])]
        state = controller.run(state=out["loop"], documents=found)["state"]
        states.append(state)
    return llm, states


def _tool_texts(messages: list[ChatMessage]) -> list[str]:
    return [m.tool_call_result.result for m in messages if m.role == ChatRole.TOOL]


def _assert_paired(messages: list[ChatMessage]) -> None:
    """OpenAI's rule: each assistant tool call is answered by exactly one tool message with its id, right after."""
    for index, message in enumerate(messages):
        if message.tool_calls:
            ids = [call.id for call in message.tool_calls]
            answers = [
                m.tool_call_result.origin.id
                for m in messages[index + 1 : index + 1 + len(ids)]
                if m.tool_call_result is not None
            ]
            assert answers == ids
    answered = [m.tool_call_result.origin.id for m in messages if m.tool_call_result is not None]
    assert len(answered) == len(set(answered))
    # As OpenAI gets them: each tool message names its call's id.
    sent = [m.to_openai_dict_format() for m in messages]
    called = [c["id"] for m in sent for c in m.get("tool_calls") or []]
    assert [m["tool_call_id"] for m in sent if m["role"] == "tool"] == called


def test_older_results_are_sent_as_digests_and_the_state_keeps_them_whole():
    llm, states = _turns([search("film"), search("director"), search("village"), answer("Greenwich Village")])
    sent = llm.calls[3][0]  # the fourth call: three results before it
    texts = _tool_texts(sent)
    assert texts[0].startswith('Earlier search "film" (2 result(s); read_chunk(id) shows one in full):')
    assert "- id=bsg title=Bsg: " in texts[0] and DOC_TEXT["bsg"] not in texts[0]
    assert texts[1].startswith('Earlier search "director"')
    assert "- id=trigiani title=Trigiani [shown earlier]" in texts[1]
    assert texts[2].startswith('2 result(s) for "village":')  # the latest result stays whole
    _assert_paired(sent)
    # The state's conversation is unchanged: full results, each carrying its digest.
    kept = [m for m in states[2].messages if m.role == ChatRole.TOOL]
    assert DOC_TEXT["bsg"] in kept[0].tool_call_result.result
    assert kept[0].meta[DIGEST_META_KEY] == texts[0]
    # The usage counts what was sent: the scripted generator reports chars / 4 of the messages it got.
    sent_tokens = sum(sum(message_chars(m) for m in messages) // 4 for messages, _, _ in llm.calls)
    assert states[-1].usage["controller"]["prompt_tokens"] == sent_tokens
    assert sum(message_chars(m) for m in sent) < sum(message_chars(m) for m in states[2].messages)


def test_a_chunk_shown_before_is_referenced_not_resent():
    llm, _states = _turns([search("film"), search("director"), answer("x")])
    latest = _tool_texts(llm.calls[2][0])[-1]
    assert "[1] id=trigiani title=Trigiani [already shown]" in latest
    assert DOC_TEXT["trigiani"] not in latest and DOC_TEXT["greenwich"] in latest


def test_without_digests_older_results_stay_whole():
    llm, _ = _turns([search("film"), search("director"), answer("x")], {"result_digests": False})
    first = _tool_texts(llm.calls[2][0])[0]
    assert first.startswith('2 result(s) for "film":') and DOC_TEXT["bsg"] in first


def test_the_model_reads_a_chunk_in_full_by_id(build_loop):
    retriever = ScriptedRetriever(RESULTS)
    loop = build_loop(
        [search("film"), search("director"), tool_turn("read_chunk", {"id": "bsg"}), answer("Greenwich Village")],
        retriever=retriever,
    )
    result = loop.run()
    assert actions(result) == ["search", "search", "tool", "answer"]
    assert result["tool_history"][2]["tool_name"] == "read_chunk"
    sent = loop.llm.calls[3][0]
    read = _tool_texts(sent)[-1]
    assert read == f"id=bsg\n{DOC_TEXT['bsg']}"
    assert DOC_TEXT["bsg"] not in _tool_texts(sent)[0]  # the search that found it is a digest by now
    _assert_paired(sent)


def test_a_read_in_the_same_turn_as_a_search_answers_in_call_order(build_loop):
    both = {
        "tool_calls": [
            {"tool_name": "search", "arguments": {"query": "director"}},
            {"tool_name": "read_chunk", "arguments": {"id": "bsg"}},
        ]
    }
    loop = build_loop([search("film"), both, answer("x")], retriever=ScriptedRetriever(RESULTS))
    assert actions(loop.run()) == ["search", "search", "tool", "answer"]
    sent = loop.llm.calls[2][0]
    texts = _tool_texts(sent)
    assert texts[1].startswith('2 result(s) for "director":') and texts[2] == f"id=bsg\n{DOC_TEXT['bsg']}"
    _assert_paired(sent)


def test_reading_an_unknown_chunk_is_a_tool_error_and_the_run_goes_on(build_loop):
    loop = build_loop(
        [search("film"), tool_turn("read_chunk", {"id": "nope"}), answer("x")], retriever=ScriptedRetriever(RESULTS)
    )
    result = loop.run()
    assert actions(result) == ["search", "invalid", "search", "answer"]  # the loop searched the chunks' suggestion
    tool_results = [m.tool_call_result for m in loop.llm.calls[2][0] if m.role == ChatRole.TOOL]
    error = next(r for r in tool_results if r.origin.tool_name == "read_chunk")
    assert error.error and "no chunk with id 'nope' is held" in error.result


def test_short_ids_and_prefixes():
    assert short_id("wiki_Big_Stone_Gap_0") == "wiki_Big_Stone_Gap_0"  # not a hash: its start may be shared
    assert short_id("9fe637851e22df8412434834c383d4d5ea55c416ee31e06c846d18ec04b49f49") == "9fe637851e22"
    long_a, long_b = "a" * 20 + "1" * 44, "a" * 20 + "2" * 44
    chunks = [Document(id=long_a, content="A"), Document(id=long_b, content="B")]
    assert short_id(long_a) == "a" * 12
    assert find_chunk(chunks, long_b)[0].id == long_b
    assert find_chunk(chunks, "id=" + "a" * 20 + "1")[0].id == long_a
    doc, why = find_chunk(chunks, "a" * 12)
    assert doc is None and "start of 2 chunk ids" in why
    assert search_digest("q", []) == 'Earlier search "q": no results.'


def test_result_digests_serialises():
    router = AgenticRouter(chat_generator=ScriptedChatGenerator([]), result_digests=False, search_question_first=False)
    assert router.to_dict()["init_parameters"]["result_digests"] is False


@component
class LongChunks:
    """Three long, distinct chunks per query."""

    @component.output_types(documents=list[Document])
    def run(self, query: str, filters: dict | None = None, top_k: int | None = None) -> dict:
        return {
            "documents": [
                Document(
                    id=f"{query}-{i}",
                    content=f"{query} part {i}. " + "word " * 300,
                    meta={"title": f"{query} {i}"},
                    score=1.0 - i / 10,
                )
                for i in range(3)
            ]
        }


def _prompt_sizes(build_loop, **router_kwargs) -> list[int]:
    queries = [f"topic{n}" for n in range(8)]
    loop = build_loop(
        [*(search(q) for q in queries), answer("x")],
        max_iterations=10,
        retriever=LongChunks(),
        router_kwargs=router_kwargs,
    )
    assert loop.run()["terminated_by"] == "answered"
    return [sum(message_chars(m) for m in messages) // 4 for messages, _, _ in loop.llm.calls]


def test_the_prompt_grows_by_a_digest_per_turn_not_by_a_result(build_loop):
    digested, whole = _prompt_sizes(build_loop), _prompt_sizes(build_loop, result_digests=False)
    result_tokens = 3 * 1500 // 4  # one full result: three chunks of ~1,500 characters
    growth = [b - a for a, b in itertools.pairwise(digested[2:])]
    assert growth and max(growth) < 150 < result_tokens  # one digest (three lines) and one reply a turn
    assert min(b - a for a, b in itertools.pairwise(whole[2:])) > result_tokens * 0.9
    assert sum(digested) < 0.4 * sum(whole)  # 0.32 here


def test_only_a_tool_result_carries_a_digest():
    with pytest.raises(ValueError, match="got a message of role 'assistant'"):
        with_digest(ChatMessage.from_assistant("no result"), "digest")
