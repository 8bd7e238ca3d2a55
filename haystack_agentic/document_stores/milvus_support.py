# SPDX-License-Identifier: Apache-2.0
"""
What a Milvus server supports, checked before a run, and upkeep after writes to a Milvus store.

What a Milvus server supports, checked before a run (the built-in BM25 function and sparse indexes need Milvus
2.5), and upkeep after writes to a Milvus store.
"""

import re
from typing import Any

from haystack import logging

from haystack_agentic.document_stores import document_counts
from haystack_agentic.extras import is_instance

logger = logging.getLogger(__name__)

#: The first Milvus version with the built-in BM25 function and sparse-vector indexes.
BM25_MIN_VERSION = (2, 5)

#: milvus-haystack retrievers that need BM25 (a sparse field): class names in `milvus_haystack`.
BM25_RETRIEVERS = ("MilvusHybridRetriever", "MilvusSparseEmbeddingRetriever")


class MilvusBM25UnsupportedError(ValueError):
    """The Milvus server is older than 2.5, and the pipeline or collection needs BM25."""


def server_version(client: Any) -> tuple[int, ...] | None:
    """The version of the Milvus server behind a `pymilvus.MilvusClient` (`v2.3.5-lite`: `(2, 3, 5)`), or `None`."""
    try:
        match = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", client.get_server_version() or "")
    except Exception as exc:
        logger.debug("Could not read the Milvus server version: {error}", error=exc)
        return None
    return None if match is None else tuple(int(part) for part in match.groups() if part is not None)


def supports_bm25(version: tuple[int, ...] | None) -> bool:
    """Whether a Milvus server of this version (`None`: unknown, given the benefit) has the built-in BM25 function."""
    return version is None or version[:2] >= BM25_MIN_VERSION


def require_bm25(store: Any, what: str) -> None:
    """:raises MilvusBM25UnsupportedError: If the store's Milvus server is older than 2.5 (`what` needs BM25)."""
    version = server_version(store.client)
    if supports_bm25(version):
        return
    uri, shown = store.connection_args.get("uri"), ".".join(map(str, version))
    msg = (
        f"{what} needs BM25 (Milvus' built-in BM25 function and a sparse index), which needs Milvus >= 2.5; the "
        f"server at {uri} runs {shown}. Dense retrieval works on it: `haystack-agentic index PATH --backend milvus "
        f"--uri {uri}` writes a dense-only collection there and `ask ... --backend milvus --uri {uri}` then uses "
        "dense retrieval; or upgrade the server to Milvus 2.5 or later."
    )
    raise MilvusBM25UnsupportedError(msg)


def collection_has_sparse_field(client: Any, collection: str) -> bool | None:
    """Whether a Milvus collection has a sparse-vector field (BM25), or `None` when it does not exist."""
    if not client.has_collection(collection):
        return None
    fields = client.describe_collection(collection).get("fields", [])
    return any("SPARSE" in str(field.get("type", "")).upper() for field in fields)


def check_pipeline(pipeline: Any) -> None:
    """
    Before a run: check a loop pipeline's `retriever` (through a `SafeRetriever`).

    :raises MilvusBM25UnsupportedError: When it is a Milvus BM25 or hybrid retriever and the server is older than 2.5.
    """
    retriever = dict(pipeline.walk()).get("retriever")
    if retriever is None:
        return
    inner = getattr(retriever, "retriever", retriever)
    store = getattr(inner, "document_store", None)
    if is_instance(inner, "milvus_haystack", *BM25_RETRIEVERS) and store is not None and hasattr(store, "client"):
        require_bm25(store, f"The pipeline's {type(inner).__name__}")


def flush(store: Any) -> None:
    """
    Seal a Milvus store's growing segments and record its document count after writing.

    After writing to a Milvus store: seal its growing segments (searched by brute force otherwise) and record its
    document count (`document_counts`). Any other store is left alone.
    """
    client = getattr(store, "client", None)
    if not is_instance(store, "milvus_haystack", "MilvusDocumentStore") or client is None:
        return
    if client.has_collection(store.collection_name):
        client.flush(store.collection_name)
    document_counts.record_document_count(store)


def reopened_if_stale(store: Any) -> Any:
    """
    Reopen a `MilvusDocumentStore` made before its collection existed; else return `store`.

    A fresh instance of a `MilvusDocumentStore` made before its collection existed (milvus-haystack checks once, so
    it keeps counting 0 documents; the collection's row count decides), else `store`.
    """
    if not is_instance(store, "milvus_haystack", "MilvusDocumentStore"):
        return store
    client = getattr(store, "client", None)
    if client is None or not client.has_collection(store.collection_name) or store.count_documents() > 0:
        return store
    if int(client.get_collection_stats(store.collection_name).get("row_count", 0) or 0) == 0:
        return store  # really empty: the same instance stays
    return type(store).from_dict(store.to_dict())
