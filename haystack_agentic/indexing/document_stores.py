# SPDX-License-Identifier: Apache-2.0
"""
The document stores of the packaged pipelines and `haystack-agentic index`, built one way.

The document stores of the packaged pipelines and `haystack-agentic index`, built one way everywhere: Milvus (Lite
for a local `.db` path, else a server; dense and BM25 fields in one collection), Weaviate, Haystack's in-memory.
"""

from typing import Any

from haystack import logging
from haystack.document_stores.in_memory import InMemoryDocumentStore

from haystack_agentic.extras import is_milvus_store
from haystack_agentic.indexing.store_faults import check_document_count, check_milvus_lite_uri, watch_store
from haystack_agentic.settings import DEFAULT_WEAVIATE_URL

logger = logging.getLogger(__name__)

#: Default collection names, and the Milvus BM25 function's (fixed, so the YAML is the same on every build).
MILVUS_COLLECTION = "haystack_agentic"
WEAVIATE_COLLECTION = "HaystackAgentic"
MILVUS_BM25_FUNCTION = "haystack_agentic_bm25"


class EmbeddingDimensionError(ValueError):
    """The embedder's dimension differs from the existing collection's."""


def milvus_document_store(uri: str, collection_name: str = MILVUS_COLLECTION, bm25: bool = True, **kwargs: Any) -> Any:
    """
    A `MilvusDocumentStore` (it connects here: a bad URI fails now).

    :param uri: A local file (Milvus Lite, e.g. `./milvus.db`) or a server URI (`http://localhost:19530`).
    :param bm25: Give the collection Milvus' built-in BM25 function and sparse field (needs Milvus >= 2.5); `False`:
        dense-only, for older servers.
    :param kwargs: Other `MilvusDocumentStore` parameters (e.g. `drop_old=True`).
    :raises ImportError: If `milvus-haystack` is not installed.
    """
    from milvus_haystack import MilvusDocumentStore  # noqa: PLC0415 - optional dependency
    from milvus_haystack.function import BM25BuiltInFunction  # noqa: PLC0415

    if bm25:
        bm25_function = BM25BuiltInFunction(function_name=MILVUS_BM25_FUNCTION)
        kwargs = {"sparse_vector_field": "sparse", "builtin_function": [bm25_function], **kwargs}
    return MilvusDocumentStore(connection_args={"uri": str(uri)}, collection_name=collection_name, **kwargs)


def weaviate_document_store(url: str = DEFAULT_WEAVIATE_URL, collection_name: str = WEAVIATE_COLLECTION) -> Any:
    """A `WeaviateDocumentStore` (it connects on first use). :raises ImportError: Without `weaviate-haystack`."""
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
    Open a `milvus` or `weaviate` store at `address` and check that it answers (a count), with faults as one line.

    :param collection: The collection (default `MILVUS_COLLECTION` / `WEAVIATE_COLLECTION`).
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
    if is_milvus_store(store):
        client = store.client
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
    """:raises EmbeddingDimensionError: If the store's collection holds embeddings of another dimension."""
    existing = embedding_dimension(store)
    if existing is not None and existing != dimension:
        msg = (
            f"The embedder makes {dimension}-dimensional embeddings but the existing collection holds "
            f"{existing}-dimensional ones. Use the embedder the collection was built with, or index into a new "
            "collection (--store-collection) or store file."
        )
        raise EmbeddingDimensionError(msg)
