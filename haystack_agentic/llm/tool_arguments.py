# SPDX-License-Identifier: Apache-2.0
"""
Reading a model's tool call arguments (text that is not JSON, `null`, numbers JSON cannot hold: `1e999`, `NaN`)
without raising anything but `ValueError`.
"""

import math
from typing import Any

from haystack_agentic.llm.valid_text import decode_json, model_value


def decode_arguments(arguments: Any) -> tuple[Any, str | None]:
    """
    `ToolCall.arguments` (a dict, JSON text, `None`, anything) decoded: `(value, None)` (blank text and `None` give
    `{}`), or `(None, the decoder's message)` when not JSON.
    """
    if isinstance(arguments, str):
        try:
            arguments = decode_json(arguments) if arguments.strip() else {}
        except ValueError as exc:  # not JSON, too deep, too many digits
            return None, getattr(exc, "msg", str(exc))
        return arguments, None
    return ({} if arguments is None else model_value(arguments)), None


def finite(value: Any) -> Any:
    """`value` with every non-finite float, at any depth of dicts and lists, replaced by its name (`"inf"`)."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {key: finite(item) for key, item in value.items()}
    if isinstance(value, list):
        return [finite(item) for item in value]
    return value


def whole_number(value: Any, minimum: int, maximum: int) -> int:
    """
    A count a model asked for (an int, a whole float `7.0`, a string of digits `"7"`), at least `minimum`, capped at
    `maximum`; `ValueError` for anything else (bools, `inf`, `2.5`, `"many"`) and numbers below `minimum`.
    """
    problem = f"must be an integer from {minimum} to {maximum}"
    if isinstance(value, str):
        text = value.strip()
        if not text.lstrip("+-").isdigit():
            msg = f"{problem}, got {text[:40]!r}"
            raise ValueError(msg)
        try:
            number = int(text)
        except ValueError as exc:  # more digits than int() converts: absurdly large
            msg = f"{problem}, got a {len(text)}-digit number"
            raise ValueError(msg) from exc
    elif isinstance(value, float):
        if not (math.isfinite(value) and value.is_integer()):
            msg = f"{problem}, got {value!r}"
            raise ValueError(msg)
        number = int(value)
    elif isinstance(value, int) and not isinstance(value, bool):
        number = value
    else:
        msg = f"{problem}, got {type(value).__name__}"
        raise ValueError(msg)
    if number < minimum:
        msg = f"{problem}, got {number}"
        raise ValueError(msg)
    return min(maximum, number)
