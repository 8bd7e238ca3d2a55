# SPDX-License-Identifier: Apache-2.0
"""
Document-store faults reported as one line (`StoreError`) instead of a traceback.

Document-store faults as one line (`StoreError`: which store, what is wrong, what to do) instead of a traceback, a
pymilvus RPC log or Haystack's dump of a configuration.
"""

import contextlib
import logging as std_logging
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from haystack import logging

from haystack_agentic.document_stores import document_counts
from haystack_agentic.extras import is_instance
from haystack_agentic.llm.retries import exception_chain

logger = logging.getLogger(__name__)

#: URI schemes pymilvus treats as a server; any other URI is a Milvus Lite path (pymilvus' own rule).
MILVUS_SERVER_SCHEMES = ("unix", "http", "https", "tcp", "grpc")

#: Loggers whose error records repeat what `StoreError` says, with tracebacks (silenced by `quiet_store_logs`).
NOISY_LOGGERS = ("pymilvus", "milvus_lite", "milvus_haystack")
#: Most characters of an exception's one-line message.
ONE_LINE_MAX_CHARS = 600
#: Missing pieces a store check names before "(+N more)".
SHOWN_MISSING = 3

_REBUILD = "restore it from a backup, or move it aside and index again"


class StoreError(ValueError):
    """A document store that cannot be used; the message names it and says what to do, on one line."""


def one_line(exc: BaseException) -> str:
    """An exception's message on one line, at most 600 characters (pymilvus' `message` when it has one)."""
    message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    text = " ".join(str(message).split())
    return text if len(text) <= ONE_LINE_MAX_CHARS else text[: ONE_LINE_MAX_CHARS - 3] + "..."


def milvus_lite_path(uri: str | Path) -> Path | None:
    """The local path of a Milvus `connection_args.uri`, or `None` when it names a server."""
    text = str(uri)
    return None if urlparse(text).scheme.lower() in MILVUS_SERVER_SCHEMES else Path(text)


def check_milvus_lite_uri(uri: str | Path, must_exist: bool = False) -> None:
    """
    Refuse a Milvus Lite path that cannot hold a database, before Milvus Lite opens it.

    Before Milvus Lite opens (or creates) it: refuse a path that cannot hold a database. Server URIs pass unchecked.
    (Damage inside a database shows when it is opened: `watch_store`, `check_document_count`.)

    :param must_exist: Also refuse a path with no database yet (a query run must not create an empty one).
    :raises StoreError: If the path is a file, lacks `.db`, sits in a missing folder, or (with `must_exist`) does not
        exist.
    """
    path = milvus_lite_path(uri)
    if path is None:
        return
    if path.suffix != ".db":
        msg = f"The Milvus Lite path {uri} must end in .db (pymilvus' rule), e.g. {path.name or 'store'}.db."
        raise StoreError(msg)
    if path.exists() and not path.is_dir():
        msg = (
            f"{uri} is not a Milvus Lite database: it is a file, and Milvus Lite keeps a database in a folder. "
            "Give another --uri, or move the file away."
        )
        raise StoreError(msg)
    if not path.exists() and not path.parent.is_dir():
        msg = f"The folder of the Milvus Lite database {uri} does not exist: create {path.parent} first."
        raise StoreError(msg)
    if must_exist and not path.exists():
        msg = (
            f"There is no Milvus Lite database at {uri}: index into it first with "
            f"`haystack-agentic index PATH --backend milvus --uri {uri}`."
        )
        raise StoreError(msg)


#: What to do about an index that did not finish: indexing replaces each file's chunks by source, so the same
#: command again leaves the store as a finished run would have (with `--replace`: rebuilt).
INTERRUPTED_FIX = (
    "so it may hold only part of that run's chunks, next to older chunks of the files it was re-indexing. Run the same "
    "`haystack-agentic index` command again (it replaces each file's chunks by source; with --replace it rebuilds "
    "the store) before relying on answers from it"
)


#: The interrupted-write warnings this process gave.
_WARNED: set[str] = set()


def check_document_count(store: Any) -> str | None:
    """
    Check an opened store's Milvus Lite document count against the recorded one.

    After opening a store: refuse a Milvus Lite collection holding fewer documents than recorded, and report one
    whose last write did not finish (an `index` killed mid-way): a warning, also returned, saying what to do.

    :returns: The interrupted-write warning, or `None`.
    :raises StoreError: If a Milvus Lite collection holds fewer documents than recorded.
    """
    interrupted = document_counts.interrupted_write(store)
    if interrupted:
        uri = store.connection_args["uri"]
        warning = f"The Milvus Lite database {uri} was not fully written: {interrupted}, {INTERRUPTED_FIX}."
        if warning not in _WARNED:  # a command opens its store more than once: one warning
            _WARNED.add(warning)
            logger.warning("{warning}", warning=warning)
        return warning
    shortfall = document_counts.count_shortfall(store)
    if shortfall:
        uri = store.connection_args["uri"]
        msg = (
            f"The Milvus Lite database {uri} is damaged ({shortfall}): {_REBUILD}; if documents were deleted on "
            f"purpose with another program, delete {document_counts.record_path(uri)}."
        )
        raise StoreError(msg)
    return None


#: Modules whose exceptions are store faults (others, e.g. a YAML mistake, pass through `watch_store` unchanged).
_STORE_MODULES = (
    "pymilvus",
    "milvus_lite",
    "milvus_haystack",
    "weaviate",
    "grpc",
    "httpx",
    "httpcore",
    "haystack_integrations.document_stores",
    "haystack.document_stores",
)


def _is_store_fault(exc: BaseException) -> bool:
    return any(
        isinstance(e, (OSError, TimeoutError)) or type(e).__module__.startswith(_STORE_MODULES)
        for e in exception_chain(exc)
    )


@contextlib.contextmanager
def watch_store(where: str, uri: str | Path | None = None) -> Iterator[None]:
    """
    Open a document store inside this block: its faults come out as one-line `StoreError`s.

    :param where: How to name the store in messages (e.g. `the milvus store at ./docs.db`).
    :param uri: The Milvus URI, if it is a Milvus store.
    :raises StoreError: On an exception of a store library (or an `OSError`) in the block. Other exceptions pass
        through unchanged.
    """
    lite = milvus_lite_path(uri) if uri is not None else None
    if uri is not None and _QUIET:
        _quiet_pymilvus()
    try:
        yield
    except StoreError:
        raise
    except Exception as exc:
        if not _is_store_fault(exc):
            raise
        raise _describe(exc, where, uri, lite) from exc


def _describe(exc: Exception, where: str, uri: Any, lite: Path | None) -> StoreError:
    """The one-line `StoreError` for a store exception (Haystack's wrappers are skipped: they dump configuration)."""
    root = exception_chain(exc)[-1]
    if lite is not None:
        causes = exception_chain(exc)
        if any(is_instance(e, "milvus_lite.exceptions", "DataDirLockedError") for e in causes):
            return StoreError(
                f"The Milvus Lite database {uri} is in use by another process (e.g. a running `haystack-agentic "
                "serve`): stop it, or use another --uri."
            )
        cause = causes[-1]
        if isinstance(cause, (FileExistsError, NotADirectoryError)):
            return StoreError(f"{uri} is not a Milvus Lite database (it is not a folder): give another --uri.")
        if lite.is_dir():  # Milvus Lite raises the same error for a database another process holds and a damaged one
            return StoreError(
                f"Cannot open the Milvus Lite database {uri} ({one_line(cause)}): it is in use by another process "
                f"(e.g. a running `haystack-agentic serve`: stop it, or use another --uri), or damaged ({_REBUILD})."
            )
        return StoreError(f"Cannot open the Milvus Lite database {uri}: {one_line(cause)}.")
    details = getattr(root, "details", None)  # gRPC errors: the reason without the debug dump
    reason = details() if callable(details) else one_line(root)
    return StoreError(
        f"Cannot open {where}: {type(root).__name__}: {one_line(Exception(reason))}. Is the server "
        "running, at that address?"
    )


#: Whether `quiet_store_logs` was called (pymilvus, imported later, gets quietened when a Milvus store is opened).
_QUIET = False


def quiet_store_logs() -> None:
    """Keep pymilvus', Milvus Lite's and milvus-haystack's error logs off the terminal (`watch_store` sees them)."""
    global _QUIET  # noqa: PLW0603 - a process-wide logging choice
    _QUIET = True
    for name in NOISY_LOGGERS:
        store_logger = std_logging.getLogger(name)
        store_logger.propagate = False
        if not any(isinstance(h, std_logging.NullHandler) for h in store_logger.handlers):
            store_logger.addHandler(std_logging.NullHandler())
    if "pymilvus" in sys.modules:
        _quiet_pymilvus()


def _quiet_pymilvus() -> None:
    """pymilvus configures console handlers of its own when imported (2 s: so only when a Milvus store is used)."""
    with contextlib.suppress(ImportError):
        import pymilvus  # noqa: F401, PLC0415 - its import sets its loggers up; quieten them after

    for name in ("pymilvus", "pymilvus.milvus_client", "pymilvus.bulk_writer"):
        std_logging.getLogger(name).setLevel(std_logging.CRITICAL + 1)
