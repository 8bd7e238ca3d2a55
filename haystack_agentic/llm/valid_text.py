# SPDX-License-Identifier: Apache-2.0
"""
Text an LLM or a store sends, made valid Unicode before the loop uses it: a lone UTF-16 surrogate (half an emoji,
as a broken tokenizer decode or a JSON `"\\ud83d"` escape can produce) cannot be encoded as UTF-8, so a tokenizer,
an embedder, a store client or a JSON encoder downstream would raise on it. Each becomes U+FFFD (the replacement
character); a surrogate pair becomes the character it encodes. Used where text enters the loop: every LLM reply
(`llm.calls`), every streamed chunk (`llm.streaming`), decoded JSON (decisions, tool arguments, verdicts), every
retrieved document (`LoopController`), and the result (`LoopResultBuilder`, `strict_json`).
"""

import dataclasses
import math
import re
from typing import Any

from haystack import Document
from haystack.dataclasses import ChatMessage

#: A UTF-16 surrogate code point: in a Python string it can only be a lone one (not valid Unicode text).
LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def valid_text(text: str) -> str:
    """
    `text` with every lone UTF-16 surrogate replaced by U+FFFD (a surrogate pair joined into its character).

    :param text: Any string.
    :returns: `text` itself when it holds no surrogate, else the repaired copy.
    """
    if not LONE_SURROGATE.search(text):
        return text
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def valid_value(value: Any) -> Any:
    """
    `value` with `valid_text` applied to every string in it (dict keys too), through dicts, lists and tuples.

    :param value: Any value (e.g. tool call arguments).
    :returns: The repaired value: `value` itself when nothing needed changing.
    """
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


def valid_reply(message: ChatMessage) -> ChatMessage:
    """
    A chat generator's reply with `valid_text` applied to its text, reasoning, tool calls (names and arguments)
    and meta.

    :param message: The reply.
    :returns: `message` itself when it holds no surrogate, else a repaired copy.
    """
    try:
        data = message.to_dict()
        repaired = valid_value(data)
        return message if repaired is data else ChatMessage.from_dict(repaired)
    except Exception:  # noqa: BLE001 - a reply part that does not round-trip: passed on as it is
        return message


def strict_json(value: Any) -> Any:
    """
    `value` made safe for strict JSON (`json.dumps(allow_nan=False)`) and UTF-8: `valid_text` on every string (dict
    keys too), `None` for every non-finite float, through dicts, lists and tuples (tuples become lists).

    :param value: A result or any part of one.
    :returns: The safe copy (strings and other values that need no change are kept as they are).
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
    A retrieved document the loop can use whatever the store holds: `valid_text` on its id and content,
    `valid_value` on its meta, and no score for a non-finite one (NaN, infinities: they would break the ranking
    of the chunks and strict JSON). A store's text reaches tokenizers (the evidence check's MiniLM, a local model)
    and the result, like an LLM's.

    :param doc: The document (not changed).
    :returns: `doc` itself when nothing needed changing, else a repaired copy.
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
