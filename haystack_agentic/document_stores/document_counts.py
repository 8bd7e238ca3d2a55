# SPDX-License-Identifier: Apache-2.0
"""
What each Milvus Lite collection held when this package last wrote it, checked on open.

What each Milvus Lite collection held when this package last wrote it (`<database>.counts.json`: document count,
`writing` while a write is under way), checked on open with the store's own count: Milvus Lite can lose documents
silently.
"""

import json
import os
from pathlib import Path
from typing import Any

from haystack import logging

from haystack_agentic.extras import is_instance

logger = logging.getLogger(__name__)

#: Appended to the database folder's name to name its record file, and the record's format version.
RECORD_SUFFIX = ".counts.json"
RECORD_FORMAT = 1


def record_path(uri: str | Path) -> Path | None:
    """The record file of a Milvus `connection_args.uri`: `<uri>.counts.json`, or `None` for a server."""
    text = str(uri)
    if "://" in text or not text.endswith(".db"):  # a server; a Milvus Lite path ends in .db (pymilvus' rule)
        return None
    path = Path(text)
    return path.with_name(path.name + RECORD_SUFFIX)


def _lite_store(store: Any, writable: bool = False) -> tuple[Path, str] | None:
    """The record file and collection of a Milvus Lite store (`writable`: in an existing folder), else `None`."""
    uri = (getattr(store, "connection_args", None) or {}).get("uri")
    milvus = is_instance(store, "milvus_haystack", "MilvusDocumentStore")
    path = record_path(uri) if milvus and isinstance(uri, (str, Path)) else None
    return None if path is None or (writable and not path.parent.is_dir()) else (path, store.collection_name)


def _read(path: Path) -> dict[str, Any]:
    """The record's collections (`{}` when there is none, or it does not read)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        logger.warning("Ignoring the unreadable document-count record {path}: {error}", path=path, error=exc)
        return {}
    collections = data.get("collections") if isinstance(data, dict) else None
    return collections if isinstance(collections, dict) else {}


def _write(path: Path, collection: str, entry: dict[str, Any]) -> None:
    """Set one collection's entry, atomically (a temporary file renamed over the record); a failure is a warning."""
    collections = _read(path)
    collections[collection] = entry
    temporary = path.with_name(path.name + ".tmp")
    text = json.dumps({"format": RECORD_FORMAT, "collections": collections}, indent=1)
    try:
        temporary.write_text(text, encoding="utf-8")
        os.replace(temporary, path)
    except OSError as exc:  # the write itself succeeded: only the later check is lost
        logger.warning("Could not record the document count in {path}: {error}", path=path, error=exc)


def begin_write(store: Any) -> None:
    """Before writing to a store: mark its Milvus Lite collection's count unknown until `record_document_count`."""
    found = _lite_store(store, writable=True)
    if found is not None:
        path, collection = found
        previous = _read(path).get(collection) or {}
        _write(path, collection, {"documents": previous.get("documents"), "writing": True})


def record_document_count(store: Any) -> None:
    """After writing to a store: record its Milvus Lite collection's document count (`count_documents`)."""
    found = _lite_store(store, writable=True)
    if found is not None:
        path, collection = found
        _write(path, collection, {"documents": store.count_documents(), "writing": False})


def _recorded(path: Path) -> dict[str, dict[str, Any]]:
    """The record's entries that can be compared (the last write ended)."""
    return {name: entry for name, entry in _read(path).items() if isinstance(entry, dict) and not entry.get("writing")}


def interrupted_write(store: Any) -> str | None:
    """
    Describe an unfinished last write to a store's Milvus Lite collection, or return `None`.

    After opening a store: a description if the last write to its Milvus Lite collection did not finish (the
    record still says `writing`: the process was killed, or crashed, between `begin_write` and
    `record_document_count`), else `None`.
    """
    found = _lite_store(store)
    if found is None:
        return None
    path, collection = found
    entry = _read(path).get(collection)
    if not (isinstance(entry, dict) and entry.get("writing")):
        return None
    return f"the last write to its collection {collection} did not finish ({path.name} still records it as under way)"


def count_shortfall(store: Any) -> str | None:
    """After opening a store: a description if its Milvus Lite collection holds fewer documents than recorded."""
    found = _lite_store(store)
    if found is None:
        return None
    path, collection = found
    recorded = (_recorded(path).get(collection) or {}).get("documents")
    if not isinstance(recorded, int) or (held := store.count_documents()) >= recorded:
        return None
    return (
        f"its collection {collection} holds {held} documents, {recorded} when haystack-agentic last wrote it, "
        f"as {path.name} records: Milvus Lite rolled back to an older manifest or lost data files"
    )
