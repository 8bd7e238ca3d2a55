# SPDX-License-Identifier: Apache-2.0
"""`CollectionLookup`: a store's collections (`list_collections`: seconds on a large Milvus Lite store), cached while
its document count is unchanged, for at most `TTL_SECONDS` (a re-described collection keeps its count)."""

import threading
import time
from typing import Any

from haystack import logging

from haystack_agentic.indexing.collections import CollectionInfo, list_collections

logger = logging.getLogger(__name__)

#: Most seconds a list of collections is reused.
TTL_SECONDS = 300.0


class CollectionLookup:
    """The known collections of a store (or `None`: then `known()` raises), cached. Thread-safe."""

    def __init__(self, document_store: Any) -> None:
        self.document_store = document_store
        self._lock = threading.Lock()
        self._cached: tuple[int, float, dict[str, CollectionInfo]] | None = None

    def known(self) -> dict[str, CollectionInfo]:
        """Name -> `CollectionInfo` of the store's collections. :raises ValueError: Without a store."""
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
            if cached is not None and cached[0] == count and now - cached[1] < TTL_SECONDS:
                return cached[2]
        known = list_collections(store)
        with self._lock:
            self._cached = (count, now, known)
        logger.debug("Read {count} collection(s) from the store", count=len(known))
        return known
