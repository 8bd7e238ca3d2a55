# SPDX-License-Identifier: Apache-2.0
"""
Text an LLM or a store sends made valid Unicode, and a chat generator's values given one shape.

Text an LLM or a store sends, made valid Unicode: a lone UTF-16 surrogate (which UTF-8 encoders downstream
would raise on) becomes U+FFFD; a surrogate pair becomes the character it encodes. And every value a chat generator
returns, given one defined shape where it enters the loop (`valid_replies`, `model_value`, `decode_json`).
"""

import dataclasses
import json
import math
import re
from collections.abc import Iterator, Mapping
from typing import Any

from haystack import Document, logging
from haystack.dataclasses import ChatMessage, ChatRole, ReasoningContent, TextContent, ToolCall

logger = logging.getLogger(__name__)

#: A UTF-16 surrogate code point: in a Python string it can only be a lone one (not valid Unicode text).
LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def valid_text(text: str) -> str:
    """`text` (itself when nothing needed changing) with every lone surrogate replaced by U+FFFD."""
    if not LONE_SURROGATE.search(text):
        return text
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def valid_value(value: Any) -> Any:
    """`value` (itself when nothing needed changing) with `valid_text` on every string in dicts, lists, tuples."""
    if isinstance(value, str):
        return valid_text(value)
    if isinstance(value, dict):
        items = [(valid_value(key), valid_value(item)) for key, item in value.items()]
        changed = any(k is not key or i is not item for (k, i), (key, item) in zip(items, value.items(), strict=True))
        return dict(items) if changed else value
    if isinstance(value, (list, tuple)):
        repaired = [valid_value(item) for item in value]
        if any(new is not old for new, old in zip(repaired, value, strict=True)):
            return repaired if isinstance(value, list) else tuple(repaired)
    return value


#: Deepest nesting of lists and dicts kept in a value a model sent (tool call arguments, decoded JSON, `meta`): deeper
#: parts become `TOO_DEEP`. Deep enough for any real arguments; shallow enough that no recursive walk downstream
#: (Haystack's deep copies of component inputs, `json.dumps`, our own) meets Python's recursion limit.
MAX_MODEL_DEPTH = 32
#: What stands in for a part nested deeper than `MAX_MODEL_DEPTH`.
TOO_DEEP = f"<nested deeper than {MAX_MODEL_DEPTH} levels>"
#: Largest integer kept as it is (about 4,300 bits, 1,300 digits): larger ones become +-inf, since Python refuses
#: to print an integer of more than 4,300 digits (`json.dumps`, `str` raise `ValueError`) and no count or index is
#: ever that large.
MAX_MODEL_INT_BITS = 4_300
#: Most characters kept of a text a model sent (a reply's text or reasoning, a string in its tool call arguments):
#: about 25,000 tokens, more than any answer or argument a model writes; a longer text is cut there, so the work
#: the loop does per reply (sentence splitting, citations, grounding: linear, but per sentence and chunk) stays
#: within a few seconds of CPU (a 1 MB answer of short sentences took 7 s in the citations alone).
MAX_MODEL_TEXT_CHARS = 100_000
#: Largest token count a reply's `meta["usage"]` may report (larger ones are not reports).
MAX_TOKEN_COUNT = 10**12
#: The JSON objects `json_objects` tries to decode in one text, at most: a reply with more `{` than this before its
#: object is not one the loop reads (each try may scan the rest of the text: the bound keeps it linear).
MAX_JSON_STARTS = 64


def model_value(value: Any, depth: int = 0) -> Any:
    """
    A value a model sent, made safe for the rest of the loop.

    A value a model sent (decoded JSON, tool call arguments, reply `meta`), itself when nothing needed changing, safe
    for the rest of the loop: `model_text` on every string, an integer over `MAX_MODEL_INT_BITS` bits as +-inf,
    nesting cut at `MAX_MODEL_DEPTH` (the deeper part becomes `TOO_DEEP`). Other values (floats, `None`, bools,
    objects) are kept.
    """
    if isinstance(value, str):
        return model_text(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return value if value.bit_length() <= MAX_MODEL_INT_BITS else (math.inf if value > 0 else -math.inf)
    if isinstance(value, (dict, list, tuple)) and depth >= MAX_MODEL_DEPTH:
        return TOO_DEEP
    if isinstance(value, dict):
        items = [(model_value(key, depth + 1), model_value(item, depth + 1)) for key, item in value.items()]
        changed = any(k is not key or i is not item for (k, i), (key, item) in zip(items, value.items(), strict=True))
        return dict(items) if changed else value
    if isinstance(value, (list, tuple)):
        repaired = [model_value(item, depth + 1) for item in value]
        if any(new is not old for new, old in zip(repaired, value, strict=True)):
            return repaired if isinstance(value, list) else tuple(repaired)
    return value


def model_text(text: str) -> str:
    """A text a model sent (itself when nothing needed changing): `valid_text`, cut at `MAX_MODEL_TEXT_CHARS`."""
    text = valid_text(text)
    return text if len(text) <= MAX_MODEL_TEXT_CHARS else text[:MAX_MODEL_TEXT_CHARS]


def decode_json(text: str) -> Any:
    """
    JSON text a model wrote, decoded and made a `model_value` ('NaN', 'Infinity' and `1e999` decode to floats).

    :raises ValueError: For anything that does not decode: not JSON, nested past the interpreter's recursion limit,
        an integer of more digits than Python converts.
    """
    return model_value(_decoded(json.loads, text))


def json_objects(text: str) -> Iterator[dict[str, Any]]:
    """
    The JSON objects a model's reply holds, in order.

    The JSON objects (dicts, as `model_value`s) a model's reply holds, in order: those inside code fences first,
    then those in the whole text, each decoded from one of its first `MAX_JSON_STARTS` `{`; undecodable ones skipped.
    """
    decoder = json.JSONDecoder()
    candidates = [match.group(1) for match in _FENCE.finditer(text or "")]
    for candidate in [*candidates, text or ""]:
        start = candidate.find("{")
        for _ in range(MAX_JSON_STARTS):
            if start < 0:
                break
            try:
                value = _decoded(decoder.raw_decode, candidate, start)[0]
            except ValueError:
                value = None
            if isinstance(value, dict):
                yield model_value(value)
            start = candidate.find("{", start + 1)


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", flags=re.DOTALL | re.IGNORECASE)


def _decoded(decode: Any, *args: Any) -> Any:
    """
    Call `decode(*args)`, raising `ValueError` for its `RecursionError`.

    `decode(*args)`, its `RecursionError` as a `ValueError` (the others it raises are: `JSONDecodeError`, and
    the one for an integer of more than 4,300 digits).
    """
    try:
        return decode(*args)
    except RecursionError as exc:
        msg = "JSON nested deeper than Python decodes"
        raise ValueError(msg) from exc


def valid_usage(usage: Any) -> dict[str, Any]:
    """
    A reply's `meta["usage"]` with only token counts that are counts.

    A reply's `meta["usage"]` with only token counts that are counts: an entry under a key ending in `_tokens` is
    kept when it is a whole number from 0 to `MAX_TOKEN_COUNT` (an int, or a whole float, made an int) and left out
    otherwise (a string, `inf`, a list, a negative or huge number, a bool), so the call counts as one that did not
    report it. Other entries (e.g. `completion_tokens_details`) are kept; a `usage` that is not a dict gives `{}`.
    """
    if not isinstance(usage, Mapping):
        return {}
    kept = {}
    for key, value in usage.items():
        if not (isinstance(key, str) and key.endswith("_tokens")):
            kept[key] = value
            continue
        count = int(value) if isinstance(value, float) and math.isfinite(value) and value.is_integer() else value
        if isinstance(count, int) and not isinstance(count, bool) and 0 <= count <= MAX_TOKEN_COUNT:
            kept[key] = count
    return kept


def valid_reply(message: ChatMessage) -> ChatMessage:
    """
    A chat generator's reply in the shape the loop reads.

    A chat generator's reply in the shape the loop reads (itself when nothing needed changing): valid text cut at
    `MAX_MODEL_TEXT_CHARS` (`model_text`); a text part that is not a `str` dropped; a tool call whose name is not a
    non-blank `str` named `""` (an unknown tool: the router sends it back as a tool error), a non-`str` id as text,
    arguments made a `model_value`; `meta` a dict whose `usage` holds only `valid_usage` counts; other parts kept.
    """
    # Haystack's accessors (`texts`, `tool_calls`, `reasoning`) read only parts of their own type, so a part of any
    # other type is never seen; the reply is rebuilt from what they return when a value needed changing.
    texts = [_valid_part(part) for part in (TextContent(text=text) for text in message.texts)]
    texts = [part.text for part in texts if part is not None]
    calls = [_valid_part(call) for call in message.tool_calls]
    reasoning = _valid_part(message.reasoning) if message.reasoning is not None else None
    meta = model_value(message.meta) if isinstance(message.meta, dict) else {}
    if "usage" in meta and valid_usage(meta["usage"]) != meta["usage"]:
        meta = {**meta, "usage": valid_usage(meta["usage"])}
    same = (
        texts == message.texts
        and all(new is old for new, old in zip(calls, message.tool_calls, strict=True))
        and reasoning is message.reasoning
        and meta is message.meta
    )
    if same or not message.is_from(ChatRole.ASSISTANT):
        return message
    return ChatMessage.from_assistant(
        text="".join(texts) if texts else None,
        meta=meta,
        name=message.name,
        tool_calls=calls,
        reasoning=reasoning if isinstance(reasoning, ReasoningContent) else None,
    )


def _valid_part(part: Any) -> Any:
    """One content part made valid (itself when nothing needed changing); `None` to drop it."""
    if isinstance(part, TextContent):
        if not isinstance(part.text, str):
            return None
        text = model_text(part.text)
        return part if text is part.text else TextContent(text=text)
    if isinstance(part, ToolCall):
        name = valid_text(part.tool_name) if isinstance(part.tool_name, str) and part.tool_name.strip() else ""
        call_id = part.id if part.id is None or isinstance(part.id, str) else valid_text(str(part.id)[:200])
        arguments, extra = model_value(part.arguments), model_value(part.extra)
        fields = (name, call_id, arguments, extra)
        if all(
            new is old for new, old in zip(fields, (part.tool_name, part.id, part.arguments, part.extra), strict=True)
        ):
            return part
        return ToolCall(tool_name=name, arguments=arguments, id=call_id, extra=extra)
    if isinstance(part, ReasoningContent) and isinstance(part.reasoning_text, str):
        text, extra = model_text(part.reasoning_text), model_value(part.extra)
        same = text is part.reasoning_text and extra is part.extra
        return part if same else ReasoningContent(reasoning_text=text, extra=extra)
    return part


def valid_replies(result: Any) -> list[ChatMessage]:
    """
    The replies of a chat generator's `run` result, each a `valid_reply`.

    The replies of a chat generator's `run` result, each a `valid_reply`: a `str` reply item becomes an assistant
    message with that text; an item of any other type (`None`, a number, a dict) is dropped, with a warning.

    :raises TypeError: If the result is not a dict whose `replies` is a list (or tuple) or missing: the generator
        broke its contract (a `None` result, `replies` that is a string or a number).
    """
    if not isinstance(result, Mapping):
        msg = f"The chat generator returned a {type(result).__name__}, not a dict with 'replies'"
        raise TypeError(msg)
    replies = result.get("replies")
    if replies is None:
        return []
    if not isinstance(replies, (list, tuple)):
        msg = f"The chat generator returned 'replies' as a {type(replies).__name__}, not a list"
        raise TypeError(msg)
    valid = []
    for item in replies:
        if isinstance(item, str):
            valid.append(ChatMessage.from_assistant(model_text(item)))
        elif isinstance(item, ChatMessage):
            valid.append(valid_reply(item))
        else:
            logger.warning(
                "A chat generator reply was a {kind}, not a ChatMessage; it is ignored.", kind=type(item).__name__
            )
    return valid


def strict_json(value: Any) -> Any:
    """
    Make `value` safe for strict JSON and UTF-8.

    `value` safe for strict JSON and UTF-8: `valid_text` on every string, `None` for a non-finite float, through
    dicts, lists and tuples (tuples become lists).
    """
    if isinstance(value, str):
        return valid_text(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {strict_json(key): strict_json(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict_json(item) for item in value]
    return value


def valid_document(doc: Document) -> Document:
    """
    A document with valid text in its id, content and meta, and a finite score or none.

    A document (itself when nothing needed changing) with valid text in its id, content and meta, and no score
    for a non-finite one.
    """
    changes: dict[str, Any] = {}
    if isinstance(doc.id, str) and valid_text(doc.id) is not doc.id:
        changes["id"] = valid_text(doc.id)
    if isinstance(doc.content, str) and valid_text(doc.content) is not doc.content:
        changes["content"] = valid_text(doc.content)
    meta = valid_value(doc.meta)
    if meta is not doc.meta:
        changes["meta"] = meta
    if isinstance(doc.score, float) and not math.isfinite(doc.score):
        changes["score"] = None
    return dataclasses.replace(doc, **changes) if changes else doc
