# SPDX-License-Identifier: Apache-2.0
"""
Token estimates of a prompt, and fitting a tool-calling conversation into a token budget.
"""

import re
from collections.abc import Sequence
from typing import Any

from haystack.dataclasses import ChatMessage
from haystack.token_counters import ApproximateTokenCounter

_COUNTER = ApproximateTokenCounter()


def estimate_tokens(messages: Sequence[ChatMessage], tools: Any = None) -> int:
    """
    Estimated prompt tokens of messages (and tool schemas), with Haystack's `ApproximateTokenCounter`.

    :param messages: The messages.
    :param tools: Tools sent with them, if any.
    :returns: The estimate, in tokens.
    """
    return _COUNTER.count(list(messages), tools=tools or None)


def compact_messages(messages: Sequence[ChatMessage], budget_tokens: int, tools: Any = None) -> list[ChatMessage]:
    """
    Fit a tool-calling conversation into a token budget by compacting older tool results.

    Tool results are replaced, oldest first, by a one-line digest (their first line, which names the query and
    the number of results, plus the chunk ids they listed) until the conversation fits; the latest tool result
    is kept whole as long as possible, then cut from its end (its chunks are in rank order, so the lowest ranks
    go first). System, user and assistant messages are never changed. The input is not modified.

    :param messages: The conversation.
    :param budget_tokens: Most prompt tokens (estimated as in `estimate_tokens`).
    :param tools: The tools sent with the conversation (their schemas count too).
    :returns: The messages to send.
    """
    result = list(messages)
    if estimate_tokens(result, tools) <= budget_tokens:
        return result
    tool_indexes = [i for i, m in enumerate(result) if m.tool_call_result is not None]
    for i in tool_indexes[:-1]:
        result[i] = _with_tool_text(result[i], _digest(result[i].tool_call_result.result))
        if estimate_tokens(result, tools) <= budget_tokens:
            return result
    if tool_indexes:
        last = tool_indexes[-1]
        text = result[last].tool_call_result.result
        excess_chars = int((estimate_tokens(result, tools) - budget_tokens) * _COUNTER.chars_per_token) + 40
        keep = max(len(text) - excess_chars, 0)
        result[last] = _with_tool_text(result[last], text[:keep].rstrip() + " [... cut to fit the context budget]")
    return result


def _digest(text: str) -> str:
    first_line = (text or "").split("\n", 1)[0][:200]
    ids = re.findall(r"id=(\S+)", text or "")
    shown = ", ".join(ids[:10]) + (f" and {len(ids) - 10} more" if len(ids) > 10 else "")
    return f"[compacted to save context] {first_line}" + (f" Chunk ids: {shown}." if ids else "")


def _with_tool_text(message: ChatMessage, text: str) -> ChatMessage:
    result = message.tool_call_result
    return ChatMessage.from_tool(tool_result=text, origin=result.origin, error=result.error)
