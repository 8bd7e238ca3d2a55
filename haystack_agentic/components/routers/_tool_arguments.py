# SPDX-License-Identifier: Apache-2.0

"""The loop's built-in tools and the parsing of the model's tool-call arguments and json-mode decisions."""

from collections.abc import Mapping
from typing import Any

from haystack.dataclasses import ToolCall
from haystack.tools import Tool

from haystack_agentic.dataclasses.loop_state import LoopState, ToolStep
from haystack_agentic.llm.tool_arguments import decode_arguments, finite
from haystack_agentic.llm.valid_text import json_objects

ANSWER_TOOL_NAME = "answer"
SEARCH_TOOL_NAME = "search"
GIVE_UP_TOOL_NAME = "give_up"
READ_TOOL_NAME = "read_chunk"
_BUILTIN_TOOL_NAMES = (SEARCH_TOOL_NAME, ANSWER_TOOL_NAME, GIVE_UP_TOOL_NAME, READ_TOOL_NAME)


def _not_invoked(**_kwargs: Any) -> str:
    msg = "Built-in loop tools are handled by AgenticRouter, not invoked directly."
    raise RuntimeError(msg)


def _tool(name: str, description: str, properties: dict[str, Any], required: list[str]) -> Tool:
    parameters = {"type": "object", "properties": properties, **({"required": required} if required else {})}
    return Tool(name=name, description=description, parameters=parameters, function=_not_invoked)


def _builtin_tools(max_top_k: int, collections: Mapping[str, str] | None = None) -> list[Tool]:
    """The loop's own tools; with a run's collections (name -> description), `search` takes a `collection`."""
    search = {
        "query": {"type": "string", "description": "What to look for: one entity or fact."},
        "top_k": {
            "type": "integer",
            "description": f"How many chunks to return (1-{max_top_k}).",
            "minimum": 1,
            "maximum": max_top_k,
        },
    }
    description = "Search the document collection. Returns numbered chunks with their ids."
    if collections:
        search["collection"] = {
            "type": "string",
            "enum": list(collections),
            "description": "Search only this collection; leave it out to search all of them.",
        }
        listed = "\n".join(f"- {name}: {text}" if text else f"- {name}" for name, text in collections.items())
        description += f" Collections you may search (argument `collection`; default: all of them):\n{listed}"
    sources_ids = "The ids (id=...) of the chunks the answer rests on."
    sources = {"type": "array", "items": {"type": "string"}, "description": sources_ids}
    return [
        _tool(SEARCH_TOOL_NAME, description, search, ["query"]),
        _tool(
            ANSWER_TOOL_NAME,
            "Give the final answer to the question, based on the chunks found.",
            {"text": {"type": "string", "description": "The answer."}, "sources": sources},
            ["text"],
        ),
        _tool(
            GIVE_UP_TOOL_NAME,
            "Stop without an answer, saying why the collection cannot answer the question.",
            {"reason": {"type": "string", "description": "Why no answer can be given (optional)"}},
            [],
        ),
        _tool(
            READ_TOOL_NAME,
            "Show the full text of a chunk found earlier (earlier results are shown as digests).",
            {"id": {"type": "string", "description": "The chunk's id as listed (id=...)."}},
            ["id"],
        ),
    ]


def _chosen_collection(collections: Mapping[str, str] | None, value: Any) -> str | None:
    """The collection a search asked for (`None`: the whole scope); `_InvalidArgumentsError` for one outside it."""
    if value is None:
        return None
    if not collections:
        msg = "this run has no collections to choose from; search without 'collection'"
        raise _InvalidArgumentsError(msg)
    if not isinstance(value, str) or value not in collections:
        msg = (
            f"'collection' {value!r} is not one you may search; choose one of: {', '.join(collections)} "
            "(or leave it out to search all of them)"
        )
        raise _InvalidArgumentsError(msg)
    return value


class _InvalidArgumentsError(ValueError):
    pass


def _parse_arguments(tool_call: ToolCall) -> dict[str, Any]:
    """The tool call's arguments as a dict (non-finite numbers as strings, for the JSON trace), else raise."""
    arguments, problem = decode_arguments(tool_call.arguments)
    if problem:
        msg = f"arguments are not valid JSON ({problem})"
        raise _InvalidArgumentsError(msg)
    if not isinstance(arguments, dict):
        msg = f"arguments must be a JSON object, got {type(arguments).__name__}"
        raise _InvalidArgumentsError(msg)
    return finite(arguments)


def _give_up(state: LoopState, turn: int, tool_call: ToolCall, arguments: dict[str, Any]) -> LoopState:
    """End the run with `gave_up`, with the model's `reason` when it gave one."""
    reason = arguments.get("reason")
    reason = reason.strip() if isinstance(reason, str) and reason.strip() else "no reason given."
    step = ToolStep(iteration=turn, action="give_up", tool_name=tool_call.tool_name, arguments=finite(arguments))
    return state.with_step(step).finish("gave_up", answer=f"I could not find an answer: {reason}")


def _required_text(arguments: dict[str, Any], name: str) -> str:
    value = arguments.get(name)
    if not isinstance(value, str) or not value.strip():
        msg = f"'{name}' is required and must be a non-empty string"
        raise _InvalidArgumentsError(msg)
    return value.strip()


def _safe_arguments(tool_call: ToolCall) -> dict[str, Any]:
    arguments = tool_call.arguments
    return finite(arguments) if isinstance(arguments, dict) else {"raw": finite(arguments)}


_JSON_ACTIONS = ("search", "reflect", "generate")


def parse_json_decision(text: str) -> dict[str, Any] | None:
    """
    The routing decision in a json-mode reply: the first JSON object with an `action` key, in a code fence or
    among prose; `None` when there is none.
    """
    return next((value for value in json_objects(text) if "action" in value), None)


#: Most characters of the decision's `query` and `reasoning` under the JSON schema: a small model that rambles would
#: otherwise run into `max_tokens` and leave the object unclosed.
_QUERY_MAX_CHARS = 120
_REASONING_MAX_CHARS = 160

#: The `LoopState.metadata` key recording that the server refused `response_format`.
STRUCTURED_OUTPUT_REFUSED = "structured_output_refused"


def decision_response_format(collections: Any = None) -> dict[str, Any]:
    """
    The `response_format` asking for a decision in the OpenAI structured-outputs form (llama.cpp's server makes it
    a grammar): `action` one of the allowed actions, `collection` (in a scoped run) one of the run's `collections`.
    """
    properties: dict[str, Any] = {
        "action": {"type": "string", "enum": list(_JSON_ACTIONS)},
        "query": {"type": "string", "maxLength": _QUERY_MAX_CHARS},
        "reasoning": {"type": "string", "maxLength": _REASONING_MAX_CHARS},
    }
    if collections:
        properties["collection"] = {"type": "string", "enum": list(collections)}
    required = ["action", "query"]
    schema = {"type": "object", "properties": properties, "required": required, "additionalProperties": False}
    return {"type": "json_schema", "json_schema": {"name": "routing_decision", "schema": schema}}
