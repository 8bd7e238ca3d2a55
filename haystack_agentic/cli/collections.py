# SPDX-License-Identifier: Apache-2.0
"""`haystack-agentic collections`: list the collections of a document store; also `index`'s `--collection` checks."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from haystack_agentic.cli.common import CLIError, add_backend_arguments, add_command, open_backend_store
from haystack_agentic.presentation import printable
from haystack_agentic.settings import default_store_path

if TYPE_CHECKING:
    from rich.console import Console

_DESCRIPTION = """\
List the collections of a document store: each collection's name, how many
chunks it holds and its description. A collection is the chunks indexed with
`index --collection NAME` (their meta.collection); one store holds many, and
`ask --collection NAME` (repeatable) searches only those named. The names come
from the store itself, so this lists what every writer put there.
"""

_EXAMPLES = """\
examples:
  haystack-agentic collections --store my_store.json
  haystack-agentic collections --backend milvus --uri ./docs.db --json
"""


def add_collections_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the `collections` sub-command."""
    summary = "List the collections of a document store (name, chunks, description)."
    parser = add_command(subparsers, "collections", summary, _DESCRIPTION, _EXAMPLES)
    parser.add_argument("--store", help="Store file to read (default: $HAYSTACK_AGENTIC_STORE or the user cache).")
    parser.add_argument("--json", action="store_true", help="Print the collections as JSON.")
    add_backend_arguments(parser)
    return parser


def collection_options(args: argparse.Namespace) -> dict[str, Any]:
    """
    The indexer's `collection` / `collection_description` keywords from `index`'s options (`{}` without any).

    :raises CLIError: For a description without a name, a bad name, or `--collection` with `--pipeline`.
    """
    name, description = args.collection, args.collection_description
    if name is None:
        if description:
            msg = "--collection-description needs --collection NAME: the collection it describes."
            raise CLIError(msg)
        return {}
    if args.pipeline:
        msg = "--collection works with the built-in indexing, not with --pipeline: leave --pipeline out."
        raise CLIError(msg)
    from haystack_agentic.indexing.collections import validate_collection_name

    try:
        name = validate_collection_name(name)
    except ValueError as exc:
        msg = f"--collection: {exc}"
        raise CLIError(msg) from exc
    return {"collection": name, "collection_description": (description or "").strip() or None}


def open_store(args: argparse.Namespace) -> tuple[Any, str]:
    """`(store, where)`: the store `--store` / `--backend` / `--uri` name, opened for reading (`CLIError`: cannot)."""
    if args.backend != "memory":
        store, address = open_backend_store(args.backend, args.uri, args.store_collection, must_exist=True)
        return store, f"{args.backend} at {address}"
    from haystack_agentic.indexing.store_files import load_store_file

    path = Path(args.store) if args.store else default_store_path()
    if not path.exists():
        msg = f"The store {path} does not exist: create it with `haystack-agentic index PATH`."
        raise CLIError(msg)
    try:
        return load_store_file(path), str(path)
    except ValueError as exc:
        raise CLIError(str(exc)) from exc


def cmd_collections(args: argparse.Namespace, console: Console) -> int:
    """Run `haystack-agentic collections` (0; `CLIError` if the store cannot be read)."""
    from haystack_agentic.indexing.collections import list_collections

    store, where = open_store(args)
    collections = list_collections(store)
    if args.json:
        print(json.dumps([info.to_dict() for info in collections.values()], ensure_ascii=False, indent=2))
        return 0
    if not collections:
        console.print(
            f"The store {where} has no collections ({store.count_documents()} chunks, none with meta.collection): "
            "index into one with `haystack-agentic index PATH --collection NAME`.",
            highlight=False,
        )
        return 0
    console.print(f"{len(collections)} collection(s) in {where}:", highlight=False)
    width = max(len(name) for name in collections)
    for info in collections.values():
        line = f"  {info.name:<{width}}  {info.documents:>7} chunk(s)  {info.description or '(no description)'}"
        console.print(printable(line), highlight=False, markup=False)
    return 0
