# SPDX-License-Identifier: Apache-2.0
"""Refusing, at init, what cannot drive an LLM role (as Haystack's `Agent` does)."""

import inspect
from typing import Any


def _run_parameters(generator: Any) -> dict[str, inspect.Parameter] | None:
    run = getattr(generator, "run", None)
    if not callable(run):
        return None
    try:
        return dict(inspect.signature(run).parameters)
    except (TypeError, ValueError):
        return None


def _takes(parameters: dict[str, inspect.Parameter], name: str) -> bool:
    return name in parameters or any(p.kind is p.VAR_KEYWORD for p in parameters.values())


def run_takes(generator: Any, name: str) -> bool:
    """Whether the generator's `run` accepts the keyword argument `name` (by name or `**kwargs`)."""
    parameters = _run_parameters(generator)
    return parameters is not None and _takes(parameters, name)


def check_chat_generator(generator: Any, owner: str, *, needs_tools: bool = False) -> None:
    """`TypeError` naming `owner` for what is not a chat generator, or with `needs_tools` one that takes no `tools`."""
    if isinstance(generator, str):
        msg = (
            f"{owner} got the string {generator!r}, not a chat generator. Pass a Haystack chat generator instance, "
            f"e.g. OpenAIChatGenerator(model={generator!r})."
        )
        raise TypeError(msg)
    parameters = _run_parameters(generator)
    named = [n for n, p in (parameters or {}).items() if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)]
    if parameters is None or ("messages" not in parameters and (named or not _takes(parameters, "messages"))):
        msg = (
            f"{owner} got a {type(generator).__name__}, which is not a chat generator (its `run` takes no `messages`). "
            "Pass a Haystack chat generator, e.g. OpenAIChatGenerator(model=...), whose run(messages=...) returns "
            "`replies`."
        )
        raise TypeError(msg)
    if needs_tools and not _takes(parameters, "tools"):
        msg = (
            f"{owner}: {type(generator).__name__}.run takes no `tools`, so it cannot call the loop's tools. Pass "
            'mode="json" (the JSON routing protocol, for models without tool calling) or a chat generator that '
            "supports tool calling."
        )
        raise TypeError(msg)
