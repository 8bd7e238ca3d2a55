# SPDX-License-Identifier: Apache-2.0
"""The checks of what a loop run may start from: a question, or a conversation that ends with one."""

import unicodedata
from typing import Annotated, Any

from haystack.dataclasses import ChatMessage, ChatRole
from pydantic import StringConstraints

from haystack_agentic.llm.valid_text import LONE_SURROGATE
from haystack_agentic.text import CONTROL_CHARACTERS_RE

#: Longest question accepted by default, in characters.
DEFAULT_MAX_QUESTION_CHARS = 4000


class InvalidLoopInput(ValueError):
    """A question or filters a run cannot start with; the message says what to send instead."""


#: The type of the `query` input: a string with a non-blank character (hayhooks refuses a blank one with a 422).
Question = Annotated[str, StringConstraints(pattern=r"\S")]


def validate_question(query: Any, max_chars: int | None = None) -> str:
    """
    Check a question before a run starts, and clean it (NFC, control characters but tab and newline to spaces).

    :param query: The question.
    :param max_chars: Longest question accepted, in characters, or `None` for no limit.
    :returns: The cleaned question, stripped.
    :raises InvalidLoopInput: (a `ValueError`) If it is missing, not a string, blank, holds a lone UTF-16
        surrogate, or is longer than `max_chars`.
    """
    if query is None:
        raise InvalidLoopInput(
            "LoopController needs a `query` to start a run: pass the question as a string (or a conversation as "
            "`messages`)."
        )
    if not isinstance(query, str):
        raise InvalidLoopInput(f"The query must be a string, got {type(query).__name__}.")
    surrogate = LONE_SURROGATE.search(query)
    if surrogate:
        raise InvalidLoopInput(
            f"The query holds a lone UTF-16 surrogate (U+{ord(surrogate.group()):04X} at character "
            f"{surrogate.start()}), which is not Unicode text: send the question as valid UTF-8, without unpaired "
            "\\ud800-\\udfff escapes."
        )
    cleaned = CONTROL_CHARACTERS_RE.sub(" ", unicodedata.normalize("NFC", query)).strip()
    if not cleaned:
        raise InvalidLoopInput("The query is empty: pass a question with some text in it.")
    if max_chars is not None and len(cleaned) > max_chars:
        raise InvalidLoopInput(
            f"The query is {len(cleaned)} characters long; the limit is {max_chars} "
            "(LoopController max_question_chars): shorten the question."
        )
    return cleaned


#: The roles a conversation given to the loop may hold: the loop runs its own tools, so no tool messages.
_CONVERSATION_ROLES = (ChatRole.SYSTEM, ChatRole.USER, ChatRole.ASSISTANT)


def validate_conversation(messages: Any, max_chars: int | None = None) -> tuple[str, tuple[ChatMessage, ...]]:
    """
    Check a conversation (system, user and assistant `ChatMessage`s) before a run starts from it.

    :param messages: The conversation, ending with the user's question.
    :param max_chars: Longest question accepted, in characters, or `None` for no limit.
    :returns: The question (cleaned as `validate_question` does) and the conversation as a tuple.
    :raises InvalidLoopInput: (a `ValueError`) If it is not a non-empty list of `ChatMessage`, holds a tool message
        or tool calls, does not end with the user's question, or the question is not valid.
    """
    if not isinstance(messages, (list, tuple)):
        raise InvalidLoopInput(f"`messages` must be a list of ChatMessage, got {type(messages).__name__}.")
    if not messages:
        raise InvalidLoopInput("`messages` is empty: pass the conversation, ending with the user's question.")
    for index, message in enumerate(messages):
        if not isinstance(message, ChatMessage):
            raise InvalidLoopInput(
                f"messages[{index}] is a {type(message).__name__}, not a ChatMessage: build it with "
                "ChatMessage.from_user / from_assistant / from_system."
            )
        if message.role not in _CONVERSATION_ROLES:
            raise InvalidLoopInput(
                f"messages[{index}] has role '{message.role.value}': a conversation for the loop holds system, "
                "user and assistant messages only (the loop runs its own tools)."
            )
        if message.tool_calls:
            raise InvalidLoopInput(
                f"messages[{index}] is an assistant message with tool calls: send earlier answers as text only."
            )
    users = [i for i, m in enumerate(messages) if m.role == ChatRole.USER]
    if not users:
        raise InvalidLoopInput("`messages` has no user message: end the conversation with the user's question.")
    if users[-1] != len(messages) - 1:
        after = messages[users[-1] + 1].role.value
        raise InvalidLoopInput(
            f"The conversation must end with the user's question; a {after} message comes after the last user "
            "message: drop it, or ask the question last."
        )
    last = messages[-1]
    question = validate_question(last.text, max_chars)
    if last.text != question:  # control characters removed, whitespace trimmed: the LLMs see the clean question
        last = ChatMessage.from_user(question, meta=last.meta, name=last.name)
    return question, (*messages[:-1], last)
