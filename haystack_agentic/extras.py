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


def is_milvus_store(value: Any) -> bool:
    """
    Whether `value` is a milvus-haystack `MilvusDocumentStore` (or a subclass), without importing the milvus extra.

    An instance of the class exists only once `milvus_haystack` has been imported, so when it is not: `False`.
    """
    milvus = sys.modules.get("milvus_haystack")
    return milvus is not None and isinstance(value, milvus.MilvusDocumentStore)
