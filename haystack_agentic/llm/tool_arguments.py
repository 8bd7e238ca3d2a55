# SPDX-License-Identifier: Apache-2.0
"""
Reading and checking a model's tool call arguments without raising anything but `ValueError`.

The arguments may be text that is not JSON, `null`, or numbers JSON cannot hold (`1e999`, `NaN`);
`InvalidArgumentsError` carries what goes back to the model.
"""

import math
from collections.abc import Mapping
from typing import Any

from haystack.dataclasses import ToolCall

from haystack_agentic.llm.valid_text import decode_json, model_value


def decode_arguments(arguments: Any) -> tuple[Any, str | None]:
    """
    `ToolCall.arguments` (a dict, JSON text, `None`, anything) decoded.

    :returns: `(value, None)` (blank text and `None` give `{}`), or `(None, the decoder's message)` when not JSON.
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
    A count a model asked for (an int, a whole float `7.0`, a string of digits `"7"`), capped at `maximum`.

    :raises ValueError: For anything else (bools, `inf`, `2.5`, `"many"`) and numbers below `minimum`.
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


class InvalidArgumentsError(ValueError):
    """A tool call's arguments the loop cannot use; its message goes back to the model as the tool's error."""


def parse_arguments(tool_call: ToolCall) -> dict[str, Any]:
    """
    The tool call's arguments as a dict, with non-finite numbers as strings (for the JSON trace).

    :raises InvalidArgumentsError: If the arguments are not JSON, or not a JSON object.
    """
    arguments, problem = decode_arguments(tool_call.arguments)
    if problem:
        msg = f"arguments are not valid JSON ({problem})"
        raise InvalidArgumentsError(msg)
    if not isinstance(arguments, dict):
        msg = f"arguments must be a JSON object, got {type(arguments).__name__}"
        raise InvalidArgumentsError(msg)
    return finite(arguments)


def safe_arguments(tool_call: ToolCall) -> dict[str, Any]:
    """The tool call's arguments as recorded in a step: a dict (`{"raw": ...}` when not one), finite numbers only."""
    arguments = tool_call.arguments
    return finite(arguments) if isinstance(arguments, dict) else {"raw": finite(arguments)}


def required_text(arguments: dict[str, Any], name: str) -> str:
    """
    The argument `name`, stripped.

    :raises InvalidArgumentsError: If it is missing, not a string, or blank.
    """
    value = arguments.get(name)
    if not isinstance(value, str) or not value.strip():
        msg = f"'{name}' is required and must be a non-empty string"
        raise InvalidArgumentsError(msg)
    return value.strip()


def top_k_argument(value: Any, default: int | None, maximum: int) -> int | None:
    """
    A search's `top_k` as the model gave it, `default` when absent (`None`: the retriever's own).

    A whole number from 1; larger ones are capped at `maximum`.

    :raises InvalidArgumentsError: For anything else (`2.5`, `0`, `"many"`, bools).
    """
    if value is None:
        return default
    try:
        return whole_number(value, 1, maximum)
    except ValueError as exc:
        msg = f"'top_k' {exc}"
        raise InvalidArgumentsError(msg) from exc


def chosen_collection(collections: Mapping[str, str] | None, value: Any) -> str | None:
    """
    The collection a search asked for among the run's `collections` (name -> description); `None`: the whole scope.

    :raises InvalidArgumentsError: For a collection outside the run's, or any collection in a run without them.
    """
    if value is None:
        return None
    if not collections:
        msg = "this run has no collections to choose from; search without 'collection'"
        raise InvalidArgumentsError(msg)
    if not isinstance(value, str) or value not in collections:
        msg = (
            f"'collection' {value!r} is not one you may search; choose one of: {', '.join(collections)} "
            "(or leave it out to search all of them)"
        )
        raise InvalidArgumentsError(msg)
    return value
