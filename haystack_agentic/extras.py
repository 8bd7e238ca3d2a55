# SPDX-License-Identifier: Apache-2.0
"""The optional dependencies (pyproject extras), imported through `require`, and the error a missing one gives."""

import sys
from importlib import import_module
from types import ModuleType
from typing import Any


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
        msg = f"{missing_extra_message(extra, purpose)} (missing module: {exc.name})"
        raise MissingExtraError(msg) from exc


def is_instance(value: Any, module: str, *names: str) -> bool:
    """
    Whether `value` is an instance of one of `names` in an optional `module`, without importing it.

    `isinstance(value, module.<name>)` for any of `names`, classes of an optional `module`, without importing it: an
    instance of a class exists only once its module has been imported, so a module not in `sys.modules` means `False`.
    """
    loaded = sys.modules.get(module)
    classes = tuple(cls for cls in (getattr(loaded, name, None) for name in names) if isinstance(cls, type))
    return bool(classes) and isinstance(value, classes)
