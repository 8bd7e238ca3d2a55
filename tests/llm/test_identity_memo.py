# SPDX-License-Identifier: Apache-2.0
import gc

from haystack.dataclasses import ChatMessage, ToolCall

from haystack_agentic.llm.result_digests import _DIGESTED, DIGEST_META_KEY, digest_older_results
from haystack_agentic.llm.tokens import CONSERVATIVE, ConservativeTokenCounter, IdentityMemo


def test_a_value_is_computed_once_per_object_and_dropped_with_it():
    memo: IdentityMemo[int] = IdentityMemo()
    calls = []

    def compute(message):
        calls.append(message)
        return len(message.text)

    first, second = ChatMessage.from_user("abc"), ChatMessage.from_user("abc")  # equal, not the same
    assert memo.get(first, compute) == 3 and memo.get(first, compute) == 3
    assert memo.get(second, compute) == 3
    assert calls == [first, second] and len(memo) == 2
    calls.clear()
    del first, second
    gc.collect()
    assert len(memo) == 0


def test_objects_without_weak_references_are_computed_every_time():
    memo: IdentityMemo[int] = IdentityMemo()
    calls = []
    value = [1, 2]  # lists cannot be weakly referenced
    assert memo.get(value, lambda v: calls.append(v) or len(v)) == 2
    assert memo.get(value, lambda v: calls.append(v) or len(v)) == 2
    assert len(calls) == 2 and len(memo) == 0


def test_message_counts_match_counting_from_scratch():
    messages = [ChatMessage.from_system("Be brief."), ChatMessage.from_user("Where is Dow Chemical based?")]
    warm = CONSERVATIVE.count(messages)
    assert CONSERVATIVE.count(messages) == warm == ConservativeTokenCounter().count(messages)


def test_digested_messages_are_made_once_and_the_memo_keeps_no_message_alive():
    call = ChatMessage.from_assistant(text="searching")
    tool = ChatMessage.from_user("q")  # not a tool result: sent as is, nothing stored for it
    before = len(_DIGESTED)
    assert digest_older_results([tool, call]) == [tool, call]
    assert digest_older_results([tool, call])[0] is tool
    del tool, call
    gc.collect()
    assert len(_DIGESTED) == before
    assert DIGEST_META_KEY  # the key the digests travel under


def test_an_older_tool_result_is_digested_once_and_sent_the_same_every_turn():
    origin = ToolCall(tool_name="search", arguments={"query": "q"}, id="1")
    result = ChatMessage.from_tool(tool_result="search 'q': 5 results ...", origin=origin, meta={DIGEST_META_KEY: "d"})
    conversation = [ChatMessage.from_assistant(tool_calls=[origin]), result, ChatMessage.from_assistant(text="x")]
    first, again = digest_older_results(conversation), digest_older_results(conversation)
    assert first[1].tool_call_result.result == "d" and first[1].tool_call_result.origin == origin
    assert again[1] is first[1] and first[0] is conversation[0] and first[2] is conversation[2]


def test_tool_schemas_count_the_same_from_the_memo():
    from haystack.tools import Tool

    params = {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}
    tools = [Tool(name="search", description="Search.", parameters=params, function=lambda query: query)]
    fresh = ConservativeTokenCounter()
    first = fresh.count([], tools)
    assert first > 0 and fresh.count([], tools) == first == ConservativeTokenCounter().count([], list(tools))
    other = [Tool(name="search_all_the_documents", description="Search.", parameters=params, function=str)]
    assert fresh.count([], other) > first  # other tool objects are counted, not taken from the memo
