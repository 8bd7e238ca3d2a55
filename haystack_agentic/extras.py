# SPDX-License-Identifier: Apache-2.0
"""
The optional dependencies (pyproject extras) and the one-line error a missing one gives.

The base install runs the loop with the user's own chat generator and retriever; the heavy parts (torch,
transformers, sentence-transformers, Milvus, Weaviate, hayhooks, pysbd) are imported by the component that needs
them, in its `warm_up` or first use, through `require`.
"""

from importlib import import_module
from types import ModuleType


class MissingExtraError(ImportError):
    """An optional dependency is not installed; the message names the `pip install` command that adds it."""


def missing_extra_message(extra: str, purpose: str) -> str:
    """
    The one-line message for a missing extra.

    :param extra: The pyproject extra, e.g. `"embeddings"`.
    :param purpose: What needs it, e.g. `"MiniLMTextEmbedder"`.
    :returns: `'<purpose> needs the <extra> extra: pip install "haystack-agentic[<extra>]"'`.
    """
    return f'{purpose} needs the {extra} extra: pip install "haystack-agentic[{extra}]"'


def require(module: str, extra: str, purpose: str) -> ModuleType:
    """
    Import an optional module, or raise one clear line naming the extra that installs it.

    :param module: The module to import, e.g. `"haystack_integrations.components.embedders.sentence_transformers"`.
    :param extra: The pyproject extra that installs it.
    :param purpose: What needs it (shown in the message).
    :returns: The module.
    :raises MissingExtraError: If the module (or one it imports) is not installed.
    """
    try:
        return import_module(module)
    except ModuleNotFoundError as exc:
        raise MissingExtraError(f"{missing_extra_message(extra, purpose)} (missing module: {exc.name})") from exc
