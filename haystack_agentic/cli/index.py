# SPDX-License-Identifier: Apache-2.0
"""`haystack-agentic index`: its arguments, progress display and messages (the indexing is `indexing.indexer`)."""

from __future__ import annotations

import argparse
import contextlib
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from haystack_agentic.cli.collections import collection_options
from haystack_agentic.cli.common import (
    CLIError,
    add_backend_arguments,
    add_command,
    hide_model_progress_bars,
    open_backend_store,
)
from haystack_agentic.settings import default_store_path

if TYPE_CHECKING:
    from collections.abc import Iterator

    from rich.console import Console

#: The progress clock shows seconds below a minute, then minutes:seconds
SECONDS_PER_MINUTE = 60

_DESCRIPTION = """\
Index documents into a document store: an in-memory store saved as a JSON
file (default), Milvus (a Milvus Lite folder or a server) or Weaviate.

Indexing adds to what the store holds (chunks are upserted by id), and a file
indexed again replaces its own earlier chunks, so an edited file leaves no
stale chunks. A chunk's source is the resolved path of its file; for a
HotpotQA-format JSONL file, the JSONL file. --replace rebuilds the store from
the given files only. A store file is written atomically: an interrupted index
leaves the previous one intact.

Formats it reads (a file, or a folder searched recursively; other files are
left out):
  .jsonl           HotpotQA / MuSiQue format: one document per paragraph
  .txt             plain text (UTF-8)
  .md .markdown    Markdown, converted to plain text
  .html .htm       HTML, main text extracted
  .pdf             PDF text layer (scanned pages without text give nothing)
Text is cleaned and split into chunks of 200 words with 20 words of overlap.
Empty files, text files that are not UTF-8 and PDFs that cannot be read are
skipped with a one-line reason on stderr. With --pipeline, every format but
.jsonl. Exit code 0 when files were indexed (skipped ones do not change it),
2 when no file gave a document or the store cannot be written.
"""

_EXAMPLES = """\
examples:
  # your files (.jsonl .txt .md .html .pdf, or folders of them)
  haystack-agentic index docs/ --store my_store.json
  # more files: added to the same store
  haystack-agentic index more_docs/ --store my_store.json
  # rebuild the store from docs/ alone
  haystack-agentic index docs/ --store my_store.json --replace
  # a Milvus Lite database (MiniLM embeddings + BM25)
  haystack-agentic index docs/ --backend milvus --uri ./docs.db
  # into a named, described collection (ask --collection NAME searches it)
  haystack-agentic index manuals/ --collection product_docs \\
      --collection-description 'Product manuals and how-to guides'
  # a YAML indexing pipeline (a packaged name, or the path of your own YAML)
  haystack-agentic index docs/ --pipeline indexing_milvus --uri ./docs.db
  # the shipped HotpotQA sample into a store file of your own
  haystack-agentic index sample --store store.json
"""

#: The name `index` takes for the shipped sample corpus (a path of that name, if it exists, wins).
SAMPLE_NAME = "sample"


def add_index_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the `index` sub-command."""
    summary = "Index documents into a document store (adds; re-indexed files replace their chunks)."
    index = add_command(subparsers, "index", summary, _DESCRIPTION, _EXAMPLES)
    index.add_argument(
        "path",
        nargs="?",
        help="A .jsonl (HotpotQA format), .txt, .md, .html or .pdf file, or a folder of them; "
        f"`{SAMPLE_NAME}` (or nothing) is the shipped HotpotQA sample.",
    )
    index.add_argument("--store", help="Store file to write (default: $HAYSTACK_AGENTIC_STORE or the user cache).")
    index.add_argument("--replace", action="store_true", help="Rebuild the store from these files only.")
    index.add_argument("--quiet", action="store_true", help="No progress display.")
    index.add_argument(
        "--embed",
        action="store_true",
        help="With the in-memory backend: also store MiniLM embeddings (for the packaged agentic_rag_embedded_dense "
        "pipeline).",
    )
    index.add_argument(
        "--pipeline",
        help="Run this YAML indexing pipeline (a file, or a packaged name: indexing_milvus) instead; --uri sets its "
        "store.",
    )
    index.add_argument(
        "--collection", help="Put the chunks into this collection (meta.collection) of the store; see `collections`."
    )
    index.add_argument(
        "--collection-description", help="What the collection holds (shown to the LLM); with --collection."
    )
    add_backend_arguments(index)
    return index


def readable_files(path: Path) -> tuple[list[Path], list[Path]]:
    """`(files to index, empty files)` under `path`, other skipped files reported on stderr (`CLIError`: no `path`)."""
    from rich.console import Console

    from haystack_agentic.indexing.indexing_pipeline import EMPTY, collect_files, unreadable_files

    if not path.exists():
        msg = (
            f"{path} does not exist: give a .jsonl file in the HotpotQA format, a .txt/.md/.html/.pdf file or a folder."
        )
        raise CLIError(msg)
    files = collect_files(path)
    skipped = unreadable_files(files)
    err = Console(stderr=True, soft_wrap=True)
    for file, reason in skipped.items():
        suffix = " (its chunks from an earlier index are removed)" if reason == EMPTY else ""
        err.print(f"Skipped {file}: {reason}{suffix}.", highlight=False, markup=False)
    return [f for f in files if f not in skipped], [f for f, why in skipped.items() if why == EMPTY]


class IndexProgress:
    """
    Show the indexer's progress: a line per stage with a bar, the count done and the ETA.

    The indexer's `progress` callback as a context manager (nothing when `quiet` or `console` is not a terminal).
    """

    UNITS: ClassVar[dict[str, str]] = {
        "converting": "files",
        "indexing": "files",
        "embedding": "chunks",
        "writing": "chunks",
    }

    def __init__(self, console: Console, quiet: bool = False) -> None:
        from rich.progress import BarColumn, Progress, ProgressColumn, SpinnerColumn, TextColumn
        from rich.text import Text

        class EtaColumn(ProgressColumn):
            def render(self, task: Any) -> Text:
                """The task's time: elapsed, its ETA, or its total once done."""

                def clock(seconds: float | None) -> str:
                    seconds = seconds or 0.0
                    return (
                        f"{seconds:.1f} s"
                        if seconds < SECONDS_PER_MINUTE
                        else f"{int(seconds) // 60}:{int(seconds) % 60:02d}"
                    )

                if task.finished:
                    return Text(f"done in {clock(task.finished_time)}", style="green")
                if not task.total or not task.completed:  # rich's own estimate needs updates < 30 s apart
                    return Text(f"{clock(task.elapsed)} elapsed", style="dim")
                remaining = (task.elapsed or 0.0) * (task.total - task.completed) / task.completed
                return Text(f"ETA {clock(remaining)}", style="cyan")

        self.progress = Progress(
            SpinnerColumn(finished_text="[green]done"),
            TextColumn("[bold]{task.description:<14}"),
            BarColumn(),
            TextColumn("{task.fields[count]}"),
            EtaColumn(),
            console=console,
            disable=quiet or not console.is_terminal,
        )
        self.tasks: dict[str, Any] = {}

    def __enter__(self) -> IndexProgress:
        self.progress.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.progress.stop()

    def __call__(self, stage: str, done: int, total: int | None) -> None:
        """Show `done` of `total` (`None`: unknown) for `stage`."""
        unit = self.UNITS.get(stage)
        count = f"{done}/{total} {unit}" if unit and total is not None else ""
        task = self.tasks.get(stage)
        if task is None:
            self.tasks[stage] = self.progress.add_task(stage.capitalize(), total=total, count=count)
        else:
            self.progress.update(task, completed=done, total=total, count=count)


def index_path(path: Path, store_path: Path, console: Console, quiet: bool = False) -> int:
    """
    Index a file or folder into an in-memory store file; returns the number of documents in it.

    The documents are added to the store file, with the progress display; returns the number of documents in the store.

    :raises CLIError: If there is nothing to index or the store cannot be read or written.
    """
    from haystack_agentic.indexing.indexer import index_files_into_file

    files, emptied = readable_files(path)
    if not files:
        msg = f"No documents found in {path}: supported are .jsonl (HotpotQA format), .txt, .md, .html and .pdf files."
        raise CLIError(msg)
    with IndexProgress(console, quiet) as progress, _as_cli_errors(store_path):
        return index_files_into_file(files, store_path, emptied=emptied, progress=progress).in_store


@contextlib.contextmanager
def _as_cli_errors(target: object) -> Iterator[None]:
    """Indexing failures as one-line `CLIError`s: bad input and store faults as they are, anything else named."""
    from haystack_agentic.indexing.store_faults import one_line

    try:
        yield
    except CLIError:
        raise
    except ValueError as exc:  # StoreError, a malformed file, a dimension mismatch: nothing was written
        raise CLIError(str(exc)) from exc
    except Exception as exc:
        msg = f"Indexing into {target} failed: {type(exc).__name__}: {one_line(exc)}"
        raise CLIError(msg) from exc


def _dense_only_on_old_milvus(store: Any, collection: str | None) -> Any:
    """On a Milvus server older than 2.5 (no BM25), index a dense-only collection instead, and say so."""
    import sys

    from haystack_agentic.document_stores import milvus_support
    from haystack_agentic.indexing import document_stores as ds

    version = milvus_support.server_version(store.client)
    if milvus_support.supports_bm25(version):
        return store
    uri = store.connection_args["uri"]
    print(
        f"Milvus {'.'.join(map(str, version))} at {uri} has no BM25 (Milvus >= 2.5): indexing dense vectors only; "
        "`ask --backend milvus` uses dense retrieval on it.",
        file=sys.stderr,
    )
    return ds.milvus_document_store(uri, collection or ds.MILVUS_COLLECTION, bm25=False)


def _embedder() -> Any:
    from haystack_agentic.components.embedders.minilm_document_embedder import MiniLMDocumentEmbedder

    hide_model_progress_bars()
    return MiniLMDocumentEmbedder()


def cmd_index(args: argparse.Namespace, console: Console) -> int:
    """Run `haystack-agentic index`: the summary on `console`, progress on stderr (0; `CLIError` on a fault)."""
    from rich.console import Console

    from haystack_agentic.indexing import indexer
    from haystack_agentic.resources import sample_corpus_path

    by_name = not args.path or (args.path == SAMPLE_NAME and not Path(args.path).exists())
    path = sample_corpus_path() if by_name else Path(args.path)
    store_path = Path(args.store) if args.store else default_store_path()
    backend = args.backend
    start = time.perf_counter()
    files, emptied = readable_files(path)
    if not files and not emptied:
        msg = f"No documents found in {path}: supported are .jsonl (HotpotQA format), .txt, .md, .html and .pdf files."
        raise CLIError(msg)
    if not files and backend == "memory" and not args.pipeline and not store_path.exists():
        msg = f"No documents found in {path}: every file is empty."
        raise CLIError(msg)
    options = {"emptied": emptied, "replace": args.replace, **collection_options(args)}
    err = Console(stderr=True, soft_wrap=True)
    if args.pipeline:
        target = f"the store of {args.pipeline}" + (f" at {args.uri}" if args.uri else "")
        with _as_cli_errors(target):
            pipeline = indexer.load_indexing_pipeline(args.pipeline, args.uri)
        with IndexProgress(err, args.quiet) as progress, _as_cli_errors(target):
            result = indexer.run_indexing_pipeline(pipeline, files, progress=progress, **options)
    elif backend == "memory":
        target = f"{store_path} (with MiniLM embeddings)" if args.embed else str(store_path)
        embedder = _embedder() if args.embed else None
        with IndexProgress(err, args.quiet) as progress, _as_cli_errors(store_path):
            result = indexer.index_files_into_file(files, store_path, embedder=embedder, progress=progress, **options)
    else:
        store, address = open_backend_store(backend, args.uri, args.store_collection)
        target = f"{backend} at {address}"
        if backend == "milvus":
            with _as_cli_errors(target):
                store = _dense_only_on_old_milvus(store, args.store_collection)
        with IndexProgress(err, args.quiet) as progress, _as_cli_errors(target):
            result = indexer.index_files(files, store, embedder=_embedder(), progress=progress, **options)
    if options.get("collection"):
        target += f", collection {options['collection']}"
    removed = f", {result.removed} stale removed" if result.removed else ""
    console.print(
        f"Indexed {result.chunks} documents from {result.files} file(s) in {path} into {target}{removed} "
        f"({result.in_store} in the store) in {time.perf_counter() - start:.1f} s",
        highlight=False,
    )
    return 0
