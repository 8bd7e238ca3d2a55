# SPDX-License-Identifier: Apache-2.0

"""Lenient parsing of the json-mode routing decision (`{"action": ..., "reasoning": ...}`)."""

import json
import re
from typing import Any

from haystack_agentic.llm.valid_text import valid_value

_JSON_ACTIONS = ("search", "reflect", "generate")


def parse_json_decision(text: str) -> dict[str, Any] | None:
    """
    Find the routing decision in a json-mode reply: the first JSON object with an `action` key, in a code fence or
    among prose.

    :param text: The model's reply.
    :returns: The decision as a dict, or `None` when no JSON object with an `action` is found.
    """
    if not text:
        return None
    candidates = [m.group(1) for m in re.finditer(r"```(?:json)?\s*(.*?)```", text, flags=re.DOTALL)]
    candidates.append(text)
    decoder = json.JSONDecoder()
    for candidate in candidates:
        for start in [m.start() for m in re.finditer(r"\{", candidate)]:
            try:
                value, _ = decoder.raw_decode(candidate[start:])
            except json.JSONDecodeError:
                continue
            if isinstance(value, dict) and "action" in value:
                return valid_value(value)  # a "\ud800" escape decodes to a lone surrogate
    return None


#: Most characters of the decision's `query` and `reasoning` under the JSON schema: a small model that rambles would
#: otherwise run into `max_tokens` and leave the object unclosed.
_QUERY_MAX_CHARS = 120
_REASONING_MAX_CHARS = 160

#: The `LoopState.metadata` key recording that the server refused `response_format`.
STRUCTURED_OUTPUT_REFUSED = "structured_output_refused"


def decision_response_format(collections: Any = None) -> dict[str, Any]:
    """
    The `response_format` asking for a decision in the OpenAI structured-outputs form (llama.cpp's server makes it a
    grammar): `action` one of the allowed actions, `collection` (for a scoped run) one of its collections.

    :param collections: The run's collections (name -> description), or `None`.
    :returns: `{"type": "json_schema", "json_schema": {"name": ..., "schema": ...}}`.
    """
    properties: dict[str, Any] = {
        "action": {"type": "string", "enum": list(_JSON_ACTIONS)},
        "query": {"type": "string", "maxLength": _QUERY_MAX_CHARS},
        "reasoning": {"type": "string", "maxLength": _REASONING_MAX_CHARS},
    }
    if collections:
        properties["collection"] = {"type": "string", "enum": list(collections)}
    schema = {"type": "object", "properties": properties, "required": ["action", "query"], "additionalProperties": False}
    return {"type": "json_schema", "json_schema": {"name": "routing_decision", "schema": schema}}
