# SPDX-License-Identifier: Apache-2.0

"""Lenient parsing of the json-mode routing decision (`{"action": ..., "reasoning": ...}`)."""

import json
import re
from typing import Any

_JSON_ACTIONS = ("search", "reflect", "generate")


def parse_json_decision(text: str) -> dict[str, Any] | None:
    """
    Find the routing decision in a json-mode reply, leniently.

    Accepts a bare JSON object, one inside a Markdown code fence, or one with prose around it (the first
    object that parses and has an `action` key wins).

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
                return value
    return None
