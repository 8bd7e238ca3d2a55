# SPDX-License-Identifier: Apache-2.0
"""The optional dependencies (pyproject extras), imported through `require`, and the error a missing one gives."""

from importlib import import_module
from types import ModuleType


class MissingExtraError(ImportError):
    """An optional dependency is not installed; the message names the `pip install` command that adds it."""


def missing_extra_message(extra: str, purpose: str) -> str:
    """`'<purpose> needs the <extra> extra: pip install "haystack-agentic[<extra>]"'`."""
    return f'{purpose} needs the {extra} extra: pip install "haystack-agentic[{extra}]"'


def require(module: str, extra: str, purpose: str) -> ModuleType:
    """Import an optional `module` of the pyproject `extra` for `purpose`; `MissingExtraError` when it is missing."""
    try:
        return import_module(module)
    except ModuleNotFoundError as exc:
        raise MissingExtraError(f"{missing_extra_message(extra, purpose)} (missing module: {exc.name})") from exc
