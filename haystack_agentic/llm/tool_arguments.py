# SPDX-License-Identifier: Apache-2.0
"""
Reading the arguments of a model's tool call: JSON text or a dict, with the values models get wrong.

A model may send arguments as text that is not JSON, as `null`, or with numbers JSON cannot hold (`1e999`, which
`json.loads` turns into `inf`; `NaN`). These helpers decode them without raising anything but `ValueError`, and
keep what the run records JSON-serialisable.
"""

import json
import math
from typing import Any

from haystack_agentic.llm.valid_text import valid_value


def decode_arguments(arguments: Any) -> tuple[Any, str | None]:
    """
    Decode a tool call's arguments.

    :param arguments: `ToolCall.arguments`: a dict, JSON text, `None` or anything a generator produced.
    :returns: `(value, None)` with JSON text decoded (blank text and `None` give `{}`), or `(None, why)` when the
        text is not JSON (`why` is the decoder's message).
    """
    if isinstance(arguments, str):
        try:
            arguments = valid_value(json.loads(arguments)) if arguments.strip() else {}  # "\ud800" escapes
        except json.JSONDecodeError as exc:
            return None, exc.msg
    return ({} if arguments is None else arguments), None


def finite(value: Any) -> Any:
    """
    `value` with every non-finite float (`inf`, `-inf`, `nan`), at any depth of dicts and lists, replaced by its
    name as a string (`"inf"`), so that it encodes as strict JSON.
    """
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {key: finite(item) for key, item in value.items()}
    if isinstance(value, list):
        return [finite(item) for item in value]
    return value


def whole_number(value: Any, minimum: int, maximum: int) -> int:
    """
    A count a model asked for: a whole number of at least `minimum`, capped at `maximum`.

    :param value: An int, a float with no fractional part (`7.0`, `1e300`) or a string of digits (`"7"`).
    :param minimum: The smallest value accepted.
    :param maximum: Larger values are capped to it.
    :returns: The number, at most `maximum`.
    :raises ValueError: For bools, non-finite or fractional floats (`inf`, `nan`, `2.5`), strings that are not
        whole numbers (`"many"`, `"2.5"`, `"1e999"`), other types, and numbers below `minimum`; the message says
        what is accepted and what was given.
    """
    problem = f"must be an integer from {minimum} to {maximum}"
    if isinstance(value, str):
        text = value.strip()
        if not text.lstrip("+-").isdigit():
            raise ValueError(f"{problem}, got {text[:40]!r}")
        try:
            number = int(text)
        except ValueError as exc:  # more digits than int() converts: absurdly large
            raise ValueError(f"{problem}, got a {len(text)}-digit number") from exc
    elif isinstance(value, float):
        if not (math.isfinite(value) and value.is_integer()):
            raise ValueError(f"{problem}, got {value!r}")
        number = int(value)
    elif isinstance(value, int) and not isinstance(value, bool):
        number = value
    else:
        raise ValueError(f"{problem}, got {type(value).__name__}")
    if number < minimum:
        raise ValueError(f"{problem}, got {number}")
    return min(maximum, number)
