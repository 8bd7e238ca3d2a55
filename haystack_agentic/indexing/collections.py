# SPDX-License-Identifier: Apache-2.0
"""
Collections: named, described subsets of one document store, and a run's scope over them.

Collections: named, described subsets of one document store (`meta["collection"]`, the description on each of its
chunks: the one place every backend stores durably), read at run time, and a run's scope over them as a filter.
"""

import re
import threading
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from haystack import Document, logging
from haystack.document_stores.in_memory import InMemoryDocumentStore
from haystack.document_stores.types import DuplicatePolicy

from haystack_agentic.extras import is_instance

logger = logging.getLogger(__name__)

#: The metadata keys of a chunk's collection (filter field `meta.collection`) and of its description.
COLLECTION_FIELD = "collection"
DESCRIPTION_FIELD = "collection_description"

#: The scope that means every collection of the store (no collection filter: chunks without one are searched too).
ALL = "all"

#: Longest collection name accepted, in characters.
MAX_NAME_CHARS = 100

_BAD_NAME = re.compile(r"[\x00-\x1f\x7f-\x9f]")

#: Rows read per Milvus query when listing collections.
_MILVUS_BATCH = 10_000


class UnknownCollectionError(ValueError):
    """A run was scoped to a collection the store does not hold; the message lists the ones it does."""


@dataclass(frozen=True)
class CollectionInfo:
    """One collection of a store: its name, description (`""` when none) and number of chunks."""

    name: str
    description: str
    documents: int

    def to_dict(self) -> dict[str, Any]:
        """:returns: `{"name", "description", "documents"}`."""
        return asdict(self)


def validate_collection_name(name: Any) -> str:
    """
    Check a collection name; it is returned stripped.

    :raises ValueError: If it is not a string, blank, longer than `MAX_NAME_CHARS`, holds control characters, or `all`.
    """
    if not isinstance(name, str) or not name.strip():
        msg = f"A collection name must be a non-empty string, got {name!r}."
        raise ValueError(msg)
    name = name.strip()
    if len(name) > MAX_NAME_CHARS or _BAD_NAME.search(name):
        msg = f"A collection name has at most {MAX_NAME_CHARS} printable characters, got {name!r}."
        raise ValueError(msg)
    if name.casefold() == ALL:
        msg = f"'{ALL}' cannot name a collection: it means every collection of the store."
        raise ValueError(msg)
    return name


def collection_filter(names: Sequence[str]) -> dict[str, Any] | None:
    """The Haystack filter that keeps only chunks of these collections (`None` for no names)."""
    names = list(dict.fromkeys(names))
    if not names:
        return None
    field = f"meta.{COLLECTION_FIELD}"
    if len(names) == 1:
        return {"field": field, "operator": "==", "value": names[0]}
    return {"field": field, "operator": "in", "value": names}


def and_filters(*filters: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """
    Combine Haystack metadata filters with AND.

    Any of them may be `None`. Haystack's `apply_filter_policy` MERGE drops one of two filters whose logical operators
    differ.
    """
    present = [dict(f) for f in filters if f]
    if len(present) <= 1:
        return present[0] if present else None
    return {"operator": "AND", "conditions": present}


def tag_documents(documents: Iterable[Document], name: str, description: str | None = None) -> list[Document]:
    """
    Tag copies of the chunks with a collection name (and description).

    Copies of the chunks with `meta.collection` (and the description, if any) set. The id is computed again with
    the collection (not the description) in the metadata: one file in two collections gives two sets of chunks.

    :raises ValueError: On a bad name.
    """
    name = validate_collection_name(name)
    tagged = []
    for doc in documents:
        meta = {key: value for key, value in (doc.meta or {}).items() if key != DESCRIPTION_FIELD}
        new = replace(doc, id="", meta={**meta, COLLECTION_FIELD: name})
        tagged.append(replace(new, meta={**new.meta, DESCRIPTION_FIELD: description}) if description else new)
    return tagged


def _collection_rows(store: Any) -> Iterable[Mapping[str, Any]]:
    """The `meta`-like mapping of every chunk of the store, read as cheaply as the backend allows."""
    if isinstance(store, InMemoryDocumentStore):
        return [doc.meta or {} for doc in list(store.storage.values())]
    if is_instance(store, "milvus_haystack", "MilvusDocumentStore"):
        if not store.client.has_collection(store.collection_name):
            return []
        rows: list[Mapping[str, Any]] = []
        fields = [COLLECTION_FIELD, DESCRIPTION_FIELD]
        iterator = store.client.query_iterator(store.collection_name, _MILVUS_BATCH, filter="", output_fields=fields)
        try:
            while batch := iterator.next():
                rows.extend(batch)
        finally:
            iterator.close()
        return rows
    return [doc.meta or {} for doc in store.filter_documents()]


def list_collections(store: Any) -> dict[str, CollectionInfo]:
    """
    The collections a Haystack document store holds, read from its chunks' metadata.

    The collections any Haystack document store holds, read from its chunks' metadata (the most common description
    wins): name -> `CollectionInfo`, sorted by name.
    """
    counts: Counter[str] = Counter()
    descriptions: dict[str, Counter[str]] = {}
    for meta in _collection_rows(store):
        name = meta.get(COLLECTION_FIELD)
        if not isinstance(name, str) or not name:
            continue
        counts[name] += 1
        description = meta.get(DESCRIPTION_FIELD)
        if isinstance(description, str) and description:
            descriptions.setdefault(name, Counter())[description] += 1
    common = {name: seen.most_common(1)[0][0] for name, seen in descriptions.items()}
    return {name: CollectionInfo(name, common.get(name, ""), counts[name]) for name in sorted(counts)}


def describe_collection(store: Any, name: str, description: str) -> int:
    """Set the description of a collection on every one of its chunks; returns how many were changed."""
    if isinstance(store, InMemoryDocumentStore):
        changed = 0
        for doc in list(store.storage.values()):
            meta = doc.meta or {}
            if meta.get(COLLECTION_FIELD) == name and meta.get(DESCRIPTION_FIELD) != description:
                store.storage[doc.id] = replace(doc, meta={**meta, DESCRIPTION_FIELD: description})
                changed += 1
        return changed
    stale = [
        replace(doc, meta={**(doc.meta or {}), DESCRIPTION_FIELD: description})
        for doc in store.filter_documents(collection_filter([name]))
        if (doc.meta or {}).get(DESCRIPTION_FIELD) != description
    ]
    if stale:
        store.write_documents(stale, policy=DuplicatePolicy.OVERWRITE)
    return len(stale)


def normalise_scope(scope: Any) -> str | tuple[str, ...] | None:
    """
    Check and normalise a run's `collections` input.

    Check a run's `collections` input (`None`: no scope, `"all"`, a name or a list of names): `None`, `"all"`, or the
    names as a tuple (duplicates dropped, order kept). :raises ValueError: On another type, `[]` or a bad name.
    """
    if scope is None:
        return None
    if isinstance(scope, str):
        if scope.strip().casefold() == ALL:
            return ALL
        return (validate_collection_name(scope),)
    if isinstance(scope, (list, tuple)):
        if not scope:
            msg = f"collections is an empty list: name at least one collection, or pass '{ALL}'."
            raise ValueError(msg)
        if any(isinstance(item, str) and item.strip().casefold() == ALL for item in scope):
            if len(scope) == 1:
                return ALL
            msg = f"collections {list(scope)!r} mixes '{ALL}' with names: pass '{ALL}' alone, or only names."
            raise ValueError(msg)
        return tuple(dict.fromkeys(validate_collection_name(item) for item in scope))
    msg = f"collections must be '{ALL}', a collection name or a list of names, got {type(scope).__name__}."
    raise ValueError(msg)


def resolve_scope(scope: Any, known: Mapping[str, CollectionInfo]) -> dict[str, str] | None:
    """
    The collections a run's `collections` input may search, with their descriptions.

    The collections a run's `collections` input may search among `known`: `None` for no scope, else name ->
    description of each. :raises UnknownCollectionError: Naming the known ones. :raises ValueError: On a bad shape.
    """
    scope = normalise_scope(scope)
    if scope is None:
        return None
    if scope == ALL:
        return {name: info.description for name, info in known.items()}
    missing = [name for name in scope if name not in known]
    if missing:
        names = ", ".join(known) if known else "none (index some with `haystack-agentic index PATH --collection NAME`)"
        msg = f"Unknown collection(s) {', '.join(repr(m) for m in missing)}: the store's collections are {names}."
        raise UnknownCollectionError(msg)
    return {name: known[name].description for name in scope}


def scope_filter(scope: Any, collections: Mapping[str, str] | None) -> dict[str, Any] | None:
    """The filter `resolve_scope`'s result adds to every search (`None` for no scope or `"all"`)."""
    if collections is None or normalise_scope(scope) == ALL:
        return None
    return collection_filter(list(collections))


#: Most seconds a list of collections is reused.
TTL_SECONDS = 300.0


class CollectionLookup:
    """
    The known collections of a store, cached while its document count is unchanged.

    The known collections of a store (or `None`: then `known()` raises), cached while its document count is
    unchanged (`list_collections` takes seconds on a large Milvus Lite store), for at most `TTL_SECONDS`. Thread-safe.
    """

    def __init__(self, document_store: Any) -> None:
        self.document_store = document_store
        self._lock = threading.Lock()
        self._cached: tuple[int, float, dict[str, CollectionInfo]] | None = None

    def known(self) -> dict[str, CollectionInfo]:
        """Name -> `CollectionInfo` of the store's collections. :raises ValueError: Without a store."""
        store = self.document_store
        if store is None:
            msg = (
                "This run names collections, but the LoopController has no document store to read them from: pass "
                "`document_store=` to LoopController, or build the loop with `build_loop_pipeline` / "
                "`load_loop_pipeline`, which give it the retriever's store (for a pipeline from `Pipeline.loads`: "
                "`haystack_agentic.loop_loading.link_collection_store(pipeline)`)."
            )
            raise ValueError(msg)
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
