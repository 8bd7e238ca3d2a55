# SPDX-License-Identifier: Apache-2.0
"""
Serving the agentic loop with hayhooks (the `serve` extra).

The names below load on first use (PEP 562): without the extra, `import haystack_agentic.serving` works and using a
name raises one line naming the extra.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

from haystack_agentic.extras import MissingExtraError, missing_extra_message

__all__ = [
    "AgenticLoopWrapper",
    "BadRequest",
    "answer_text",
    "check_question",
    "load_served_pipeline",
    "progress_line",
]

if TYPE_CHECKING:
    from haystack_agentic.serving.agentic_loop_wrapper import (
        AgenticLoopWrapper,
        BadRequest,
        answer_text,
        check_question,
        load_served_pipeline,
        progress_line,
    )


def __getattr__(name: str) -> Any:
    if name not in __all__:
        msg = f"module 'haystack_agentic.serving' has no attribute {name!r}"
        raise AttributeError(msg)
    try:
        module = import_module("haystack_agentic.serving.agentic_loop_wrapper")
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.split(".")[0] == "hayhooks":
            raise MissingExtraError(missing_extra_message("serve", "Serving")) from exc
        raise
    value = getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
