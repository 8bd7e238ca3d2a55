# SPDX-License-Identifier: Apache-2.0
"""
`CollectionLookup`: the collections of one document store, read at run time and cached briefly.

`LoopController` checks every scoped run's collection names against the store. Reading them scans the chunks'
metadata (`list_collections`), so the result is kept while the store's document count is unchanged, for at most
`ttl_seconds` (a re-described collection keeps its count: the TTL bounds how long an old description is shown).
The TTL is long because a read can be slow: ~50 ms at 100k chunks in memory, but seconds per 10k chunks on Milvus
Lite (`benchmarks/collections_cost.py`); an index that adds or removes chunks changes the count and refreshes it.
"""

import threading
import time
from typing import Any

from haystack import logging

from haystack_agentic.indexing.collections import CollectionInfo, list_collections

logger = logging.getLogger(__name__)

#: Default most seconds a list of collections is reused.
DEFAULT_TTL_SECONDS = 300.0


class CollectionLookup:
    """
    The known collections of a store, cached per document count and for at most `ttl_seconds`. Thread-safe.

    :param document_store: The store, or `None` (then `known()` raises).
    :param ttl_seconds: Most seconds a list is reused. Default 300.
    """

    def __init__(self, document_store: Any, ttl_seconds: float = DEFAULT_TTL_SECONDS) -> None:
        self.document_store = document_store
        self.ttl_seconds = ttl_seconds
        self._lock = threading.Lock()
        self._cached: tuple[int, float, dict[str, CollectionInfo]] | None = None

    def known(self) -> dict[str, CollectionInfo]:
        """
        The store's collections.

        :returns: Name -> `CollectionInfo` (see `list_collections`).
        :raises ValueError: If there is no store to read them from.
        """
        store = self.document_store
        if store is None:
            raise ValueError(
                "This run names collections, but the LoopController has no document store to read them from: pass "
                "`document_store=` to LoopController, or build the loop with `build_loop_pipeline` / "
                "`load_loop_pipeline`, which give it the retriever's store (for a pipeline from `Pipeline.loads`: "
                "`haystack_agentic.loop_loading.link_collection_store(pipeline)`)."
            )
        count = store.count_documents()
        now = time.monotonic()
        with self._lock:
            cached = self._cached
            if cached is not None and cached[0] == count and now - cached[1] < self.ttl_seconds:
                return cached[2]
        known = list_collections(store)
        with self._lock:
            self._cached = (count, now, known)
        logger.debug("Read {count} collection(s) from the store", count=len(known))
        return known
