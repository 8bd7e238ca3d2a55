# SPDX-License-Identifier: Apache-2.0
"""Text an LLM or a store sends, made valid Unicode: a lone UTF-16 surrogate (which UTF-8 encoders downstream
would raise on) becomes U+FFFD; a surrogate pair becomes the character it encodes."""

import dataclasses
import math
import re
from typing import Any

from haystack import Document
from haystack.dataclasses import ChatMessage

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


def valid_reply(message: ChatMessage) -> ChatMessage:
    """A reply (itself when nothing needed changing) with `valid_value` applied to its serialised form."""
    try:
        data = message.to_dict()
        repaired = valid_value(data)
        return message if repaired is data else ChatMessage.from_dict(repaired)
    except Exception:  # noqa: BLE001 - a reply part that does not round-trip: passed on as it is
        return message


def strict_json(value: Any) -> Any:
    """`value` safe for strict JSON and UTF-8: `valid_text` on every string, `None` for a non-finite float, through
    dicts, lists and tuples (tuples become lists)."""
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
    """A document (itself when nothing needed changing) with valid text in its id, content and meta, and no score
    for a non-finite one."""
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
