# SPDX-License-Identifier: Apache-2.0
"""
Prompt fitting (`fit_turns`, `compact_messages`) counts each message once: its results are those of dropping or
compacting one message at a time and recounting the whole prompt after each step (the reference implementations
below, the package's code before issue 39), and a conversation of thousands of messages is fitted in one pass.
"""

import re

from haystack.dataclasses import ChatMessage, ToolCall
from hypothesis import given, settings
from hypothesis import strategies as st

from haystack_agentic.llm.prompts import fit_turns
from haystack_agentic.llm.tokens import CONSERVATIVE, ConservativeTokenCounter, compact_messages, longest_prefix_within


def reference_fit_turns(turns, budget_tokens, counter):
    kept = list(turns)
    while kept and counter.count(kept) > budget_tokens:
        oldest = next((i for i, m in enumerate(kept) if m.role.value != "system"), None)
        if oldest is None:
            break
        del kept[oldest]
    return kept


def _digest(text):  # as `compact_messages` digests an older tool result
    ids = re.findall(r"id=(\S+)", text)
    shown = ", ".join(ids[:10]) + (f" and {len(ids) - 10} more" if len(ids) > 10 else "")
    return f"[compacted to save context] {text.split(chr(10), 1)[0][:200]}" + (f" Chunk ids: {shown}." if ids else "")


def _with_tool_text(message, text):
    result = message.tool_call_result
    return ChatMessage.from_tool(tool_result=text, origin=result.origin, error=result.error)


def reference_compact(messages, budget_tokens, tools=None, counter=CONSERVATIVE):
    result = list(messages)
    if counter.count(result, tools) <= budget_tokens:
        return result
    tool_indexes = [i for i, m in enumerate(result) if m.tool_call_result is not None]
    for i in tool_indexes[:-1]:
        result[i] = _with_tool_text(result[i], _digest(result[i].tool_call_result.result))
        if counter.count(result, tools) <= budget_tokens:
            return result
    if tool_indexes:
        last, original = tool_indexes[-1], result[tool_indexes[-1]]
        marker = " [... cut to fit the context budget]"

        def fits(prefix):
            result[last] = _with_tool_text(original, prefix.rstrip() + marker)
            return counter.count(result, tools) <= budget_tokens

        kept = longest_prefix_within(original.tool_call_result.result, fits)
        result[last] = _with_tool_text(original, kept.rstrip() + marker)
    return result


WORDS = st.text(alphabet="ab cd\n1[é特", max_size=60)
TURN = st.tuples(st.sampled_from(["system", "user", "assistant"]), WORDS)
MAKE = {"system": ChatMessage.from_system, "user": ChatMessage.from_user, "assistant": ChatMessage.from_assistant}


def as_texts(messages):
    return [(m.role.value, m.text, m.tool_call_result.result if m.tool_call_result else None) for m in messages]


@settings(max_examples=300, deadline=None)
@given(turns=st.lists(TURN, max_size=25), budget=st.integers(-5, 300))
def test_fit_turns_gives_what_dropping_one_turn_at_a_time_gives(turns, budget):
    messages = [MAKE[role](text) for role, text in turns]
    assert fit_turns(messages, budget, CONSERVATIVE) == reference_fit_turns(messages, budget, CONSERVATIVE)


@settings(max_examples=200, deadline=None)
@given(results=st.lists(WORDS, min_size=0, max_size=8), budget=st.integers(0, 400), with_tools=st.booleans())
def test_compact_messages_gives_what_recounting_after_each_step_gives(results, budget, with_tools):
    from haystack.tools import Tool

    tools = (
        [Tool(name="search", description="Search the documents.", parameters={"type": "object"}, function=len)]
        if with_tools
        else None
    )
    messages = [ChatMessage.from_system("Answer from the results."), ChatMessage.from_user("Where?")]
    for i, text in enumerate(results):
        call = ToolCall(tool_name="search", arguments={"query": f"q{i}"}, id=f"c{i}")
        result = f"Search 'q{i}': 2 chunks\n[1] id=d{i} {text}\n[2] id=e{i} {text[::-1]}"
        messages += [ChatMessage.from_assistant(tool_calls=[call]), ChatMessage.from_tool(result, origin=call)]
    expected = reference_compact(messages, budget, tools, CONSERVATIVE)
    assert as_texts(compact_messages(messages, budget, tools, CONSERVATIVE)) == as_texts(expected)


class CountingCounter(ConservativeTokenCounter):
    """Records how many messages `count` is asked about, in all calls together."""

    def __init__(self) -> None:
        super().__init__()
        self.messages_counted = 0

    def count(self, messages, tools=None) -> int:
        self.messages_counted += len(messages)
        return super().count(messages, tools)


def test_fit_turns_counts_each_message_once():
    turns = [MAKE["user" if i % 2 else "assistant"](f"turn {i} about Big Stone Gap") for i in range(20_000)]
    counter = CountingCounter()
    kept = fit_turns(turns, 4000, counter)
    assert counter.messages_counted == len(turns)  # the quadratic version asked about ~2 * 10^8 messages
    assert kept == turns[-len(kept) :] and 0 < counter.count(kept) <= 4000
    assert counter.count(turns[-len(kept) - 1 :]) > 4000  # no more turns were dropped than needed


def test_compact_messages_counts_each_message_once_before_cutting_the_last():
    messages = [ChatMessage.from_user("Where?")]
    for i in range(3000):
        call = ToolCall(tool_name="search", arguments={"query": f"q{i}"}, id=f"c{i}")
        messages += [
            ChatMessage.from_assistant(tool_calls=[call]),
            ChatMessage.from_tool(f"Search 'q{i}'\n[1] id=d{i} " + "words " * 50, origin=call),
        ]
    counter = CountingCounter()
    compacted = compact_messages(messages, 200, counter=counter)
    # every message once, every digest once, the binary search over the last result: one message per step
    assert counter.messages_counted <= len(messages) + 3000 + 40
    assert compacted[-1].tool_call_result.result.endswith("budget]")
