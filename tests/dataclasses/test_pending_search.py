# SPDX-License-Identifier: Apache-2.0
import pytest
from haystack.dataclasses import ChatMessage, ToolCall

from haystack_agentic.dataclasses.pending_search import result_in_place


def test_a_search_result_is_appended_when_no_place_was_held():
    call = ToolCall(tool_name="search", arguments={"query": "q"}, id="c1")
    result = ChatMessage.from_tool(tool_result="found", origin=call)
    messages = (ChatMessage.from_user("q"),)
    assert result_in_place(messages, result) == (*messages, result)


def test_a_message_without_a_tool_result_cannot_take_a_search_place():
    with pytest.raises(ValueError, match="got a message of role 'user'"):
        result_in_place((), ChatMessage.from_user("not a result"))
