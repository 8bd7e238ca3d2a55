# SPDX-License-Identifier: Apache-2.0
"""
In-memory document stores saved as JSON files (`index --store FILE`).

In-memory document stores saved as JSON files (`index --store FILE`): loaded into instance-local stores, saved
atomically, and changed under a lock (`store_file_lock`) so two `index` runs never lose each other's documents.
"""

import contextlib
import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from haystack import Document, logging
from haystack.document_stores.in_memory import InMemoryDocumentStore
from haystack.document_stores.types import DuplicatePolicy

from haystack_agentic.indexing.store_faults import StoreError, one_line

logger = logging.getLogger(__name__)


def _unreadable(path: Path, exc: Exception) -> StoreError:
    return StoreError(
        f"Cannot read the store {path} ({type(exc).__name__}: {one_line(exc)}): rebuild it with "
        f"`haystack-agentic index PATH --store {path} --replace`, or move it aside."
    )


def read_store_file(path: Path | str) -> tuple[dict[str, Any], list[Document]]:
    """
    Read a saved store (`InMemoryDocumentStore.save_to_disk` format) without building one (and its BM25 statistics).

    :returns: `(settings, documents)`: the file's store dict without its `documents`, and the documents.
    :raises StoreError: If the file does not exist, is a directory, cannot be read, or is not a saved store (one line,
        with the path).
    """
    path = Path(path)
    if not path.exists():
        msg = (
            f"The store {path} does not exist: check the path, or create it with "
            f"`haystack-agentic index PATH --store {path}`."
        )
        raise StoreError(msg)
    if path.is_dir():
        msg = (
            f"The store {path} is a directory: a store is one JSON file, as `haystack-agentic index PATH --store FILE` "
            f"writes it (e.g. {path / 'store.json'})."
        )
        raise StoreError(msg)
    try:
        with path.open(encoding="utf-8") as file:
            data = json.load(file)
        if not isinstance(data, dict) or not isinstance(data.get("documents"), list):
            msg = "it is not a saved document store (no `documents` list)"
            raise ValueError(msg)
        documents = [Document.from_dict(d) for d in data.pop("documents")]
    except Exception as exc:
        raise _unreadable(path, exc) from exc
    return data, documents


def load_store_file(path: Path | str) -> InMemoryDocumentStore:
    """A new, instance-local `InMemoryDocumentStore` with a saved store's settings and documents (`read_store_file`)."""
    data, documents = read_store_file(path)
    try:
        data.setdefault("type", "haystack.document_stores.in_memory.document_store.InMemoryDocumentStore")
        data.setdefault("init_parameters", {})["shared"] = False
        store = InMemoryDocumentStore.from_dict(data)
        store.write_documents(documents, policy=DuplicatePolicy.OVERWRITE)
    except Exception as exc:
        raise _unreadable(Path(path), exc) from exc
    return store


def save_store_file(store: InMemoryDocumentStore, path: Path | str) -> int:
    """
    Save an in-memory store to a JSON file atomically; returns the number of documents saved.

    Save an in-memory store to a JSON file atomically (its folder created, the replaced file's permissions kept):
    the number of documents saved.

    :raises StoreError: If the folder or file cannot be written (the previous file is unchanged).
    """
    path = Path(path)
    tmp: str | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = str(path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"))
        os.close(os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))  # the umask applies, as for any new file
        if path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o777)
        store.save_to_disk(tmp)
        with open(tmp, "rb+") as written:
            os.fsync(written.fileno())
        os.replace(tmp, path)
        tmp = None
        _fsync_folder(path.parent)
    except OSError as exc:
        raise _unwritable(path, exc, " The previous store is unchanged.") from exc
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    return store.count_documents()


def _unwritable(path: Path, exc: OSError, note: str = "") -> StoreError:
    return StoreError(
        f"Cannot write the store {path} ({type(exc).__name__}: {exc.strerror or exc}): choose another --store "
        f"(or HAYSTACK_AGENTIC_STORE / HAYSTACK_AGENTIC_CACHE).{note}"
    )


def _fsync_folder(folder: Path) -> None:
    """Make the rename durable (POSIX)."""
    with contextlib.suppress(OSError, AttributeError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@contextlib.contextmanager
def store_file_lock(path: Path | str) -> Iterator[None]:
    """
    Hold an exclusive lock on a store file's folder while it is read, changed and saved.

    An exclusive advisory `flock` on a store file's folder (created here) while it is read, changed and saved; a
    no-op without `fcntl`. :raises StoreError: If the folder cannot be created or opened.
    """
    path = Path(path)
    try:
        import fcntl  # noqa: PLC0415 - POSIX only
    except ImportError:
        yield
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path.parent, os.O_RDONLY)
    except OSError as exc:
        raise _unwritable(path, exc) from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock
