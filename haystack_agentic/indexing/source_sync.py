# SPDX-License-Identifier: Apache-2.0
"""
Sources of chunks, and keeping a store's chunks in step with them on any store.

Sources of chunks (`meta["file_path"]`: the resolved path of its file, or of its JSONL corpus), and keeping a store's
chunks in step with them on any store: a re-indexed source's new chunks are written first, then its chunks whose
ids it no longer produces are deleted (a crash in between leaves stale chunks, never missing ones).
"""

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from haystack import Document, logging
from haystack.document_stores.in_memory import InMemoryDocumentStore

from haystack_agentic.extras import is_instance

logger = logging.getLogger(__name__)

#: The metadata key holding a chunk's source (the resolved path of its file).
SOURCE_FIELD = "file_path"

#: Sources per `filter_documents` call when looking for stale chunks (keeps each filter small).
SOURCES_PER_QUERY = 32


def source_key(path: Path | str) -> str:
    """The source key of a file: its resolved absolute path."""
    return str(Path(path).resolve())


def document_sources(documents: Iterable[Document], field: str = SOURCE_FIELD) -> list[str]:
    """The distinct sources (`meta[field]`) of chunks, in first-seen order."""
    seen: dict[str, None] = {}
    for document in documents:
        value = (document.meta or {}).get(field)
        if isinstance(value, str) and value:
            seen.setdefault(value, None)
    return list(seen)


def remove_stale_chunks(
    store: Any, sources: Iterable[str], keep_ids: Iterable[str], field: str = SOURCE_FIELD, *, collection: Any = ...
) -> int:
    """
    Delete the chunks of `sources` whose ids are not in `keep_ids`; returns how many were deleted.

    Delete the chunks of `sources` whose ids are not in `keep_ids` (what an earlier index of those files left); with
    `collection` given (a name, or `None`: chunks in none), only that collection's. Returns how many were deleted.
    """
    wanted = list(dict.fromkeys(sources))
    if not wanted:
        return 0
    wanted_set, keep = set(wanted), set(keep_ids)
    if isinstance(store, InMemoryDocumentStore):  # one pass over the storage instead of a filter per batch
        found: Iterable[Document] = store.storage.values()
    else:
        found = []
        for start in range(0, len(wanted), SOURCES_PER_QUERY):
            batch = wanted[start : start + SOURCES_PER_QUERY]
            found.extend(store.filter_documents({"field": f"meta.{field}", "operator": "in", "value": batch}))
    # checked again here: a store's `in` may match more than equal values (e.g. tokenised text in Weaviate)
    stale = list(
        dict.fromkeys(
            d.id
            for d in found
            if (d.meta or {}).get(field) in wanted_set
            and d.id not in keep
            and (collection is ... or (d.meta or {}).get("collection") == collection)
        )
    )
    if stale:
        store.delete_documents(stale)
        logger.info("Removed {count} stale chunk(s) of {n} re-indexed source(s)", count=len(stale), n=len(wanted))
    return len(stale)


def clear_store(store: Any) -> Any:
    """
    Delete every document of a store (`index --replace`); returns the store to write to next.

    A Milvus collection is dropped (so it is made again with the new embeddings' dimension) and a new instance returned.

    :raises RuntimeError: If the store keeps documents after deleting them all.
    """
    if is_instance(store, "milvus_haystack", "MilvusDocumentStore"):
        if store.client.has_collection(store.collection_name):
            store.client.drop_collection(store.collection_name)
        return type(store).from_dict(store.to_dict())
    if hasattr(store, "delete_all_documents"):
        store.delete_all_documents()
        return store
    while store.count_documents():
        before = store.count_documents()
        store.delete_documents([d.id for d in store.filter_documents()])
        if store.count_documents() >= before:
            msg = f"{type(store).__name__} kept its documents after deleting them."
            raise RuntimeError(msg)
    return store
