# SPDX-License-Identifier: Apache-2.0
"""
The document stores the packaged pipelines and `haystack-agentic index` use, built one way everywhere.

- Milvus (`milvus-haystack`): `uri` a local file is Milvus Lite (embedded, persistent); `http://host:19530` is a
  Milvus server; the same YAML works for both. Collections get a dense vector field and a BM25 sparse field
  (Milvus' built-in BM25 function over the text), so dense, BM25 and hybrid retrieval all work on one collection.
- Weaviate (`weaviate-haystack`): a server only (`url`).
- In-memory (Haystack): BM25 and embedding retrieval, saved to / loaded from a JSON file by the CLI.

`check_embedding_dimension` compares an embedder's dimension with an existing collection's before anything is
written, so a mismatch fails with both numbers instead of a store error halfway through. `open_document_store`
opens the store `haystack-agentic index --backend` writes to, with store faults as one line (`store_faults`).
"""

from typing import Any

from haystack import logging
from haystack.document_stores.in_memory import InMemoryDocumentStore

from haystack_agentic.indexing.store_faults import check_milvus_lite_uri, watch_store
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
    :param collection_name: The collection. Default `haystack_agentic`.
    :param bm25: Give the collection Milvus' built-in BM25 function and sparse field (needs Milvus >= 2.5). With
        `False`: a dense-only collection, for older servers (dense retrieval only).
    :param kwargs: Other `MilvusDocumentStore` parameters (e.g. `drop_old=True`).
    :returns: The store (Milvus connects here: a bad URI fails now).
    :raises ImportError: If `milvus-haystack` is not installed (`pip install haystack-agentic[milvus]`).
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

    :param url: The server URL. Default `settings.DEFAULT_WEAVIATE_URL` (`http://localhost:8080`).
    :param collection_name: The collection (Weaviate capitalises the first letter). Default `HaystackAgentic`.
    :returns: The store.
    :raises ImportError: If `weaviate-haystack` is not installed (`pip install haystack-agentic[weaviate]`).
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

    :param backend: `milvus` (a Milvus Lite `.db` folder or a server URI) or `weaviate` (a server URL).
    :param address: The URI / URL.
    :param collection: The collection (default `haystack_agentic` / `HaystackAgentic`).
    :returns: The store.
    :raises StoreError: If it cannot be opened: the path is not a Milvus Lite database, the database is damaged or
        in use, the server cannot be reached (one line, naming `address`).
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
    return store


def embedding_dimension(store: Any) -> int | None:
    """
    The embedding dimension of an existing store's documents or collection.

    :param store: A Milvus, Weaviate or in-memory document store (others: looked up on one document).
    :returns: The dimension, or `None` when the store has no collection / no embedded document yet.
    """
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

    :param store: The document store.
    :param dimension: The embedder's dimension.
    :raises EmbeddingDimensionError: Naming both dimensions and what to change.
    """
    existing = embedding_dimension(store)
    if existing is not None and existing != dimension:
        raise EmbeddingDimensionError(
            f"The embedder makes {dimension}-dimensional embeddings but the existing collection holds "
            f"{existing}-dimensional ones. Use the embedder the collection was built with, or index into a new "
            "collection (--store-collection) or store file."
        )
