# SPDX-License-Identifier: Apache-2.0

"""The loop's built-in tools (search, answer, give_up) and the parsing and validation of tool-call arguments."""

import json
from typing import Any

from haystack.dataclasses import ToolCall
from haystack.tools import Tool

ANSWER_TOOL_NAME = "answer"
SEARCH_TOOL_NAME = "search"
GIVE_UP_TOOL_NAME = "give_up"
_BUILTIN_TOOL_NAMES = (SEARCH_TOOL_NAME, ANSWER_TOOL_NAME, GIVE_UP_TOOL_NAME)


def _not_invoked(**kwargs: Any) -> str:
    # The router handles the built-in tools itself; this function only gives each Tool a callable.
    raise RuntimeError("Built-in loop tools are handled by AgenticRouter, not invoked directly.")


def _builtin_tools(max_top_k: int) -> list[Tool]:
    return [
        Tool(
            name=SEARCH_TOOL_NAME,
            description="Search the document collection. Returns numbered chunks with their ids.",
            parameters={
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "What to look for: one entity or fact."},
                    "top_k": {
                        "type": "integer",
                        "description": f"How many chunks to return (1-{max_top_k}).",
                        "minimum": 1,
                        "maximum": max_top_k,
                    },
                },
                "required": ["query"],
            },
            function=_not_invoked,
        ),
        Tool(
            name=ANSWER_TOOL_NAME,
            description="Give the final answer to the question, based on the chunks found.",
            parameters={
                "type": "object",
                "properties": {"text": {"type": "string", "description": "The answer."}},
                "required": ["text"],
            },
            function=_not_invoked,
        ),
        Tool(
            name=GIVE_UP_TOOL_NAME,
            description="Stop without an answer, saying why the collection cannot answer the question.",
            parameters={
                "type": "object",
                "properties": {"reason": {"type": "string", "description": "Why no answer can be given."}},
                "required": ["reason"],
            },
            function=_not_invoked,
        ),
    ]


class _InvalidArguments(ValueError):
    pass


def _parse_arguments(tool_call: ToolCall) -> dict[str, Any]:
    """Return the tool call's arguments as a dict, or raise `_InvalidArguments` saying what is wrong."""
    arguments: Any = tool_call.arguments
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError as exc:
            raise _InvalidArguments(f"arguments are not valid JSON ({exc.msg})") from exc
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise _InvalidArguments(f"arguments must be a JSON object, got {type(arguments).__name__}")
    return arguments


def _required_text(arguments: dict[str, Any], name: str) -> str:
    value = arguments.get(name)
    if not isinstance(value, str) or not value.strip():
        raise _InvalidArguments(f"'{name}' is required and must be a non-empty string")
    return value.strip()


def _safe_arguments(tool_call: ToolCall) -> dict[str, Any]:
    arguments = tool_call.arguments
    return arguments if isinstance(arguments, dict) else {"raw": arguments}
