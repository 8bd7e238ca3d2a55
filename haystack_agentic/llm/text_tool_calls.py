# SPDX-License-Identifier: Apache-2.0
"""
Recover tool calls a model wrote as text instead of native tool calls.

Tool calls a model wrote as text instead of native tool calls, as small local models often do: a reply whose content is
nothing but calls (fenced JSON, bare `{"name": ..., "arguments": ...}` objects (or with the arguments beside the name)
or a list of them, `<tool_call>`/`<tools>` tags), after at most one short lead-in line, becomes those calls, when every
call names an offered tool and its arguments validate against the tool's schema. Anything else (prose, prose quoting
JSON, a tool definition copied back, an unknown tool, invalid arguments) is not a call.

Parsing is bounded: replies longer than `MAX_REPLY_CHARS` are not read, JSON is decoded with the standard decoder
(deep nesting fails fast), and each part of the reply is decoded once, so the work is linear in the reply's length.
"""

import json
import re
from collections.abc import Collection, Sequence
from typing import Any

from haystack.dataclasses import ChatMessage, ToolCall
from haystack.tools import Tool
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from haystack_agentic.llm.tool_arguments import decode_arguments, finite
from haystack_agentic.llm.valid_text import valid_value

#: The `LoopState.metadata` key counting the tool calls recovered from reply text in a run.
RECOVERED_TOOL_CALLS = "recovered_tool_calls"
#: Longest reply read for calls: a call fits in a few hundred characters, and a reply is capped by `max_tokens`.
MAX_REPLY_CHARS = 32_000
#: Longest lead-in line before the calls ("I'll search for the director."); longer text before them is prose.
LEAD_IN_MAX_CHARS = 200
#: Most calls recovered from one reply (a model that loops on the same call writes dozens).
MAX_CALLS = 16
#: Deepest nesting of a call object (a call with its arguments needs 3-4 levels).
MAX_DEPTH = 8
#: Most levels of tags and fences inside one another (`<tool_call>` around a fence is 2).
_MAX_BLOCK_NESTING = 3

#: How a reply may open its calls: a code fence, a tag, a JSON object or list.
FENCE = "```"
TAGS = ("tool_call", "tools")
OPENERS = (FENCE, *(f"<{tag}>" for tag in TAGS), "{", "[")
#: Where Qwen's chat template (and others of the Hermes format) puts a tool's result: a reply that writes one
#: after its calls invented it (seen with Qwen2.5-Coder 1.5B: a search call followed by a made-up result).
INVENTED_RESULT_TAG = "<tool_response>"
#: The tag opening a line (after spaces or tabs); linear: `^` fails at once off a line start.
_INVENTED_RESULT_LINE = re.compile(r"^[ \t]*" + re.escape(INVENTED_RESULT_TAG), re.MULTILINE)
#: Keys a call object may have besides its name and arguments (OpenAI's `{"id", "type": "function", "function"}`).
_CALL_EXTRA_KEYS = frozenset({"id", "type"})
_ARGUMENT_KEYS = ("arguments", "parameters")
#: Longest language word after an opening fence (```json, ```tool_call).
_FENCE_LANGUAGE_MAX_CHARS = 20

_DECODER = json.JSONDecoder()


class _NotCallsError(Exception):
    """The text is not a sequence of calls."""


def recover_tool_calls(
    text: str | None, tools: Sequence[Tool], truncated: bool = False, id_prefix: str = "text-call"
) -> list[ToolCall]:
    """
    The tool calls written as the text of a reply, or `[]` when the reply is not (only) calls.

    :param text: The reply's text (`None` or blank: no calls).
    :param tools: The tools offered in the call; every recovered call must name one, with arguments that validate
        against its `parameters` schema and use only the keys it declares.
    :param truncated: The reply was cut by the token limit: a trailing incomplete call is dropped (the complete calls
        before it are kept) instead of making the reply prose.
    :param id_prefix: Prefix of the recovered calls' ids (`<prefix>-1`, `<prefix>-2`...), which pair tool results.
    :returns: The calls in reply order (at most `MAX_CALLS`; a repeated call once), or `[]`. Never raises.
    """
    if not text or not text.strip() or len(text) > MAX_REPLY_CHARS or not tools:
        return []
    offered = {tool.name: tool for tool in tools}
    try:
        body = _before_invented_results(text)
        values = _blocks(body[_lead_in_end(body) :], truncated, 0)
        if not values or len(values) > MAX_CALLS:
            return []
        calls = [_call(value, offered) for value in values]
    except (_NotCallsError, RecursionError):
        return []
    # A model stuck in a loop repeats the same call until the token limit: the same call runs once.
    calls = [call for n, call in enumerate(calls) if call not in calls[:n]]
    return [ToolCall(tool_name=name, arguments=args, id=f"{id_prefix}-{n}") for n, (name, args) in enumerate(calls, 1)]


def is_only_calls(text: str | None, tool_names: Collection[str]) -> bool:
    """
    Whether a text is nothing but tool calls written as text (of the run's tools, or in a call's explicit shape).

    It reads what `recover_tool_calls` reads (after at most one short lead-in line, the last call possibly cut off by
    the token limit). Each value must be a call: a JSON object whose string `name` is one of `tool_names` (the tools
    the run offers), with its arguments (not checked against a schema: a call with bad arguments is still no answer in
    words), or an object in a call's explicit shape (an `arguments`/`parameters` key, or `{"type": "function",
    "function": ...}`) whatever tool it names. An answer like this has no words of its own
    (`grounding.markers.has_own_words`); a tool definition copied back is not a call, and neither is a JSON object
    naming something else with no arguments key (`{"name": "Paris", "country": "France"}` is an answer in JSON).

    :param text: The text (`None` or blank: not calls).
    :param tool_names: The names of the tools the run offers (empty: no text is calls).
    :returns: `True` when at least one complete call and nothing else was written. Never raises.
    """
    if not text or not text.strip() or not tool_names:
        return False
    try:
        body = _before_invented_results(text)
        values = _blocks(body[_lead_in_end(body) :], True, 0)
        for value in values:
            name = _call_parts(value)[0]  # raises for anything but a dict with a call's shape
            explicit = "function" in value or any(key in value for key in _ARGUMENT_KEYS)
            if name not in tool_names and not explicit:
                return False
    except (_NotCallsError, RecursionError):
        return False
    return bool(values)


def _before_invented_results(text: str) -> str:
    """
    The reply up to a `<tool_response>` tag it wrote itself at the start of a line, stripped.

    A small model that writes a call sometimes goes on to invent the call's result in the chat template's own tags;
    the call runs and the invention is dropped. Only a tag that opens a line counts: inside a call's JSON (a query
    `"<tool_response>"`) it is text, and a JSON string cannot hold a raw line break.
    """
    found = _INVENTED_RESULT_LINE.search(text)
    return (text[: found.start()] if found else text).strip()


def could_be_calls(text: str) -> bool:
    """
    Whether a streamed reply starting with `text` could still turn out to be calls written as text.

    Whether a reply that starts with `text` (a streamed prefix) could still turn out to be calls written as text:
    empty, or an opener after at most a short lead-in line, or a lead-in line still being written.
    """
    body = text.lstrip()[: LEAD_IN_MAX_CHARS + len(OPENERS[1]) + 1]
    opener = _first_opener(body)
    if opener is not None:
        return "\n" not in body[:opener].strip()
    lead, newline, rest = body.partition("\n")
    if not newline:
        return len(lead) <= LEAD_IN_MAX_CHARS
    rest = rest.lstrip()
    return len(lead) <= LEAD_IN_MAX_CHARS and any(opener.startswith(rest) for opener in OPENERS)


def call_text(tool_calls: list[ToolCall]) -> str:
    """
    The text of an assistant message with `tool_calls`: each call as one JSON object per line.

    Each line is `{"name": ..., "arguments": {...}}`. A small model copies the text of earlier turns; copied, this is
    a call the router recovers from text, where a description ("Calling search.") came back as the model's answer
    (Qwen2.5-Coder 0.5B, issue 38).
    """
    return "\n".join(
        json.dumps({"name": call.tool_name, "arguments": call.arguments}, ensure_ascii=False) for call in tool_calls
    )


def with_call_text(reply: ChatMessage) -> ChatMessage:
    """
    The reply with its tool calls also written as its text (`call_text`).

    Some local servers' chat templates fail (HTTP 500) on an assistant message with tool calls and no content.
    """
    return ChatMessage.from_assistant(
        text=call_text(reply.tool_calls),
        meta=reply.meta,
        name=reply.name,
        tool_calls=reply.tool_calls,
        reasoning=reply.reasoning,
    )


def _first_opener(body: str) -> int | None:
    """Index of the first opener in the lead-in window, or `None`."""
    window = body[: LEAD_IN_MAX_CHARS + 1]
    found = [i for i in (window.find(opener) for opener in OPENERS) if i >= 0]
    return min(found) if found else None


def _lead_in_end(body: str) -> int:
    """Where the calls start: at the first opener, after at most one short line of lead-in."""
    opener = _first_opener(body)
    if opener is None or "\n" in body[:opener].strip():
        raise _NotCallsError
    return opener


def _blocks(region: str, truncated: bool, nesting: int) -> list[Any]:
    """
    The JSON values of a region made only of calls.

    The JSON values of a region made only of calls: fences, tags and JSON values separated by whitespace (or a
    comma between JSON values). A trailing incomplete block is dropped when `truncated`; anything else raises.
    """
    if nesting > _MAX_BLOCK_NESTING:
        raise _NotCallsError
    values: list[Any] = []
    pos = _skip_space(region, 0)
    while pos < len(region):
        if region.startswith(FENCE, pos):
            pos = _fence(region, pos, truncated, nesting, values)
        elif region.startswith("<", pos):
            pos = _tag(region, pos, truncated, nesting, values)
        elif region[pos] in "{[":
            pos = _json_value(region, pos, truncated, values)
            if values and region.startswith(",", _skip_space(region, pos)):
                pos = _skip_space(region, pos) + 1
        else:
            raise _NotCallsError
        pos = _skip_space(region, pos)
    return values


def _fence(region: str, pos: int, truncated: bool, nesting: int, values: list[Any]) -> int:
    """Read a fenced block at `pos` into `values`; return where it ends (the region's end for a cut-off one)."""
    line_end = region.find("\n", pos + len(FENCE))
    if line_end < 0:  # only the opening fence
        return _cut(region, truncated)
    language = region[pos + len(FENCE) : line_end].strip()
    if len(language) > _FENCE_LANGUAGE_MAX_CHARS or not all(c.isalnum() or c in "_-" for c in language):
        raise _NotCallsError
    close = region.find(FENCE, line_end)
    if close < 0:
        if not truncated:
            raise _NotCallsError
        values.extend(_blocks(region[line_end:], True, nesting + 1))
        return len(region)
    inner = _blocks(region[line_end:close], False, nesting + 1)
    if not inner:
        raise _NotCallsError
    values.extend(inner)
    return close + len(FENCE)


def _tag(region: str, pos: int, truncated: bool, nesting: int, values: list[Any]) -> int:
    """Read a `<tool_call>`/`<tools>` block at `pos` into `values` (a missing closing tag at the end is allowed)."""
    tag = next((t for t in TAGS if region.startswith(f"<{t}>", pos)), None)
    if tag is None:
        if truncated and any(f"<{t}>".startswith(region[pos:]) for t in TAGS):  # cut inside the opening tag
            return len(region)
        raise _NotCallsError
    start = pos + len(tag) + 2
    close = region.find(f"</{tag}>", start)
    end = len(region) if close < 0 else close
    inner = _blocks(region[start:end], truncated and close < 0, nesting + 1)
    if not inner and not (truncated and close < 0):
        raise _NotCallsError
    values.extend(inner)
    return len(region) if close < 0 else close + len(tag) + 3


def _json_value(region: str, pos: int, truncated: bool, values: list[Any]) -> int:
    """
    Decode the JSON object or list at `pos` into `values`; returns the position after it.

    Decode the JSON object (a call) or list (of calls) at `pos` into `values`; a cut-off one when `truncated`
    keeps a list's complete calls and drops the rest.
    """
    try:
        value, end = _DECODER.raw_decode(region, pos)
    except ValueError:  # not JSON, or an integer over Python's 4,300-digit limit
        if not truncated:
            raise _NotCallsError from None
        if region[pos] == "[":
            values.extend(_list_head(region, pos + 1))
        return len(region)
    if isinstance(value, list):
        if not value:
            raise _NotCallsError
        values.extend(value)
    else:
        values.append(value)
    return end


def _list_head(region: str, pos: int) -> list[Any]:
    """The complete elements at the start of a cut-off JSON list (from just after its `[`)."""
    elements: list[Any] = []
    while len(elements) <= MAX_CALLS:
        try:
            element, pos = _DECODER.raw_decode(region, _skip_space(region, pos))
        except ValueError:
            return elements
        elements.append(element)
        pos = _skip_space(region, pos)
        if not region.startswith(",", pos):
            return elements
        pos += 1
    return elements


def _skip_space(text: str, pos: int) -> int:
    while pos < len(text) and text[pos].isspace():
        pos += 1
    return pos


def _cut(region: str, truncated: bool) -> int:
    if not truncated:
        raise _NotCallsError
    return len(region)


def _call(value: Any, offered: dict[str, Tool]) -> tuple[str, dict[str, Any]]:
    """
    The (tool name, arguments) of a call object that names an offered tool.

    The (tool name, arguments) of a call object; `_NotCallsError` unless it names an offered tool with valid
    arguments.
    """
    name, written = _call_parts(value)
    tool = offered.get(name)
    if tool is None:
        raise _NotCallsError
    arguments, problem = decode_arguments(written)
    if problem or not isinstance(arguments, dict) or _depth(arguments) > MAX_DEPTH:
        raise _NotCallsError
    arguments = finite(valid_value(arguments))
    if not _valid(arguments, tool.parameters):
        raise _NotCallsError
    return name, arguments


def _call_parts(value: Any) -> tuple[str, Any]:
    """
    The (name, arguments as written) of a JSON value with a call's shape.

    The (name, arguments as written) of a JSON value with a call's shape, whichever tools exist; `_NotCallsError` for
    any other value.
    """
    if not isinstance(value, dict) or _depth(value) > MAX_DEPTH:
        raise _NotCallsError
    if "function" in value:  # {"type": "function", "function": {"name": ..., "arguments": ...}}
        if set(value) - _CALL_EXTRA_KEYS - {"function"} or value.get("type", "function") != "function":
            raise _NotCallsError
        value = value["function"]
        if not isinstance(value, dict):
            raise _NotCallsError
    argument_keys = [key for key in _ARGUMENT_KEYS if key in value]
    flat = {key: item for key, item in value.items() if key not in _CALL_EXTRA_KEYS and key != "name"}
    if argument_keys and (set(flat) - set(_ARGUMENT_KEYS) or len(argument_keys) > 1):
        raise _NotCallsError  # e.g. a tool definition copied back: it has a "description"
    name = value.get("name")
    if not isinstance(name, str):
        raise _NotCallsError
    # No "arguments" key: the arguments written beside the name (`{"name": "answer", "text": ...}`), which must
    # validate against the tool's schema like any others (`_call`).
    return name, value[argument_keys[0]] if argument_keys else flat


def _valid(arguments: dict[str, Any], schema: dict[str, Any]) -> bool:
    """Whether the arguments satisfy the tool's schema and use only the keys it declares."""
    properties = schema.get("properties")
    if isinstance(properties, dict) and set(arguments) - set(properties):
        return False
    try:
        return Draft202012Validator(schema).is_valid(arguments)
    except (SchemaError, RecursionError, TypeError, ValueError):
        return False


def _depth(value: Any) -> int:
    """Nesting depth of dicts and lists (iterative, stops counting past `MAX_DEPTH`)."""
    deepest, level = 0, [value]
    while level and deepest <= MAX_DEPTH:
        deepest += 1
        level = [
            item
            for container in level
            if isinstance(container, (dict, list))
            for item in (container.values() if isinstance(container, dict) else container)
        ]
        level = [item for item in level if isinstance(item, (dict, list))]
        if not level:
            return deepest
    return deepest
