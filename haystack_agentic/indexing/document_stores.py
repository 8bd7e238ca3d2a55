# SPDX-License-Identifier: Apache-2.0
"""
The document stores the packaged pipelines and `haystack-agentic index` use, built one way everywhere: Milvus (a
local file is Milvus Lite, `http://host:19530` a server; dense and BM25 fields in one collection), Weaviate (a
server), and Haystack's in-memory store.
"""

from typing import Any

from haystack import logging
from haystack.document_stores.in_memory import InMemoryDocumentStore

from haystack_agentic.indexing.store_faults import check_document_count, check_milvus_lite_uri, watch_store
from haystack_agentic.settings import DEFAULT_WEAVIATE_URL

logger = logging.getLogger(__name__)

#: Default collection names.
MILVUS_COLLECTION = "haystack_agentic"
WEAVIATE_COLLECTION = "HaystackAgentic"

#: The name of the BM25 function in Milvus collections (fixed, so the YAML is the same on every build).
MILVUS_BM25_FUNCTION = "haystack_agentic_bm25"


class EmbeddingDimensionError(ValueError):
    """The embedder's dimension differs from the existing collection's."""


def milvus_document_store(uri: str, collection_name: str = MILVUS_COLLECTION, bm25: bool = True, **kwargs: Any) -> Any:
    """
    A `MilvusDocumentStore` with dense + BM25 fields (Milvus Lite for a file `uri`, a server for `http://...`).

    :param uri: A local file (Milvus Lite, e.g. `./milvus.db`) or a server URI (`http://localhost:19530`).
    :param bm25: Give the collection Milvus' built-in BM25 function and sparse field (needs Milvus >= 2.5); `False`:
        dense-only, for older servers.
    :param kwargs: Other `MilvusDocumentStore` parameters (e.g. `drop_old=True`).
    :returns: The store (Milvus connects here: a bad URI fails now).
    :raises ImportError: If `milvus-haystack` is not installed.
    """
    from milvus_haystack import MilvusDocumentStore  # noqa: PLC0415 - optional dependency
    from milvus_haystack.function import BM25BuiltInFunction  # noqa: PLC0415

    if not bm25:
        return MilvusDocumentStore(connection_args={"uri": str(uri)}, collection_name=collection_name, **kwargs)
    return MilvusDocumentStore(
        connection_args={"uri": str(uri)},
        collection_name=collection_name,
        sparse_vector_field="sparse",
        builtin_function=[BM25BuiltInFunction(function_name=MILVUS_BM25_FUNCTION)],
        **kwargs,
    )


def weaviate_document_store(url: str = DEFAULT_WEAVIATE_URL, collection_name: str = WEAVIATE_COLLECTION) -> Any:
    """
    A `WeaviateDocumentStore` for a Weaviate server (it connects on first use, not here).

    :raises ImportError: If `weaviate-haystack` is not installed.
    """
    from haystack_integrations.document_stores.weaviate import WeaviateDocumentStore  # noqa: PLC0415

    settings = {
        "class": collection_name,
        "invertedIndexConfig": {"indexNullState": True},
        "properties": [
            {"name": "_original_id", "dataType": ["text"]},
            {"name": "content", "dataType": ["text"]},
            {"name": "blob_data", "dataType": ["blob"]},
            {"name": "blob_mime_type", "dataType": ["text"]},
            {"name": "score", "dataType": ["number"]},
            {"name": "title", "dataType": ["text"]},
            # A chunk's source: matched whole (`field` tokenization), or an `in` filter on one path would match
            # every path sharing a word with it.
            {"name": "file_path", "dataType": ["text"], "tokenization": "field"},
        ],
    }
    return WeaviateDocumentStore(url=url, collection_settings=settings)


def open_document_store(backend: str, address: str, collection: str | None = None) -> Any:
    """
    Open a Milvus or Weaviate store and check that it answers (a count), with faults as one line.

    :param backend: `milvus` (a Milvus Lite `.db` folder or a server URI) or `weaviate` (a server URL at `address`).
    :param collection: The collection (default `haystack_agentic` / `HaystackAgentic`).
    :raises StoreError: If it cannot be opened (not a Milvus Lite database, damaged, in use, unreachable).
    :raises ImportError: If the integration is not installed.
    """
    if backend == "milvus":
        check_milvus_lite_uri(address)
    with watch_store(f"the {backend} store at {address}", address if backend == "milvus" else None):
        if backend == "milvus":
            store = milvus_document_store(address, collection or MILVUS_COLLECTION)
        else:
            store = weaviate_document_store(address, collection or WEAVIATE_COLLECTION)
        store.count_documents()
        check_document_count(store)
    return store


def embedding_dimension(store: Any) -> int | None:
    """The embedding dimension of a store's collection or documents, or `None` when it has none yet."""
    client = getattr(store, "client", None)
    if type(store).__name__ == "MilvusDocumentStore":
        if not client.has_collection(store.collection_name):
            return None
        vector_field = store.to_dict()["init_parameters"].get("vector_field", "vector")  # private on the store itself
        for field in client.describe_collection(store.collection_name).get("fields", []):
            if field.get("name") == vector_field:
                return int(field.get("params", {}).get("dim"))
        return None
    if isinstance(store, InMemoryDocumentStore):
        documents = store.storage.values()
    elif store.count_documents() == 0:
        return None
    else:
        documents = store.filter_documents()[:1]
    for document in documents:
        if document.embedding is not None:
            return len(document.embedding)
    return None


def check_embedding_dimension(store: Any, dimension: int) -> None:
    """
    Refuse to write embeddings of `dimension` into a store whose collection has another dimension.

    :raises EmbeddingDimensionError: Naming both dimensions and what to change.
    """
    existing = embedding_dimension(store)
    if existing is not None and existing != dimension:
        raise EmbeddingDimensionError(
            f"The embedder makes {dimension}-dimensional embeddings but the existing collection holds "
            f"{existing}-dimensional ones. Use the embedder the collection was built with, or index into a new "
            "collection (--store-collection) or store file."
        )
