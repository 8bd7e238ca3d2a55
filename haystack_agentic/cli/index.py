# SPDX-License-Identifier: Apache-2.0
"""
`haystack-agentic index`: write documents into a document store (a saved in-memory store file, Milvus or Weaviate).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from haystack_agentic.cli.common import (
    CLIError,
    add_backend_arguments,
    add_command,
    default_milvus_uri,
    default_store_path,
    default_weaviate_url,
)

if TYPE_CHECKING:
    from haystack import Document
    from haystack.document_stores.in_memory import InMemoryDocumentStore
    from rich.console import Console

_WRITE_BATCH = 200

_DESCRIPTION = """\
Write documents into a document store that `ask`, `serve` and the pipelines
search: by default a JSON file holding an in-memory BM25 store; with --backend,
a Milvus (Lite file or server) or Weaviate collection with MiniLM embeddings.
Document ids come from content and source, so indexing the same files again
duplicates nothing.

Formats it reads (a file, or a folder searched recursively; other files are
left out):
  .jsonl           HotpotQA / MuSiQue format: one document per paragraph
  .txt             plain text (UTF-8)
  .md .markdown    Markdown, converted to plain text
  .html .htm       HTML, main text extracted
  .pdf             PDF text layer (scanned pages without text give nothing)
Text is cleaned and split into chunks of 200 words with 20 words of overlap.
Empty files and text files that are not UTF-8 are skipped with a note on
stderr. With --pipeline, every format but .jsonl.
"""

_EXAMPLES = """\
examples:
  # the shipped HotpotQA sample into the default store (what `ask` uses)
  haystack-agentic index
  # your files into a store file of your own
  haystack-agentic index my_docs/ --store my_store.json
  # with MiniLM embeddings, for pipelines/agentic_rag_embedded_dense.yml
  haystack-agentic index my_docs/ --embed --store my_dense_store.json
  # into a Milvus Lite file (dense + BM25, hybrid retrieval)
  haystack-agentic index my_docs/ --backend milvus --uri my_docs.db
  # with a YAML indexing pipeline of your own
  haystack-agentic index my_docs/ --uri my_docs.db \\
      --pipeline pipelines/indexing_milvus.yml
"""


def add_index_parser(subparsers: Any) -> argparse.ArgumentParser:
    """
    Add the `index` sub-command to the CLI's sub-parsers.

    :param subparsers: The object `ArgumentParser.add_subparsers()` returned.
    :returns: The `index` parser.
    """
    summary = "Index documents (.jsonl .txt .md .html .pdf) into a document store."
    index = add_command(subparsers, "index", summary, _DESCRIPTION, _EXAMPLES)
    index.add_argument(
        "path",
        nargs="?",
        help="A file or folder of .jsonl (HotpotQA/MuSiQue), .txt, .md/.markdown, .html/.htm, .pdf files "
        "(default: the shipped HotpotQA sample).",
    )
    index.add_argument("--store", help="Store file to write (default: $HAYSTACK_AGENTIC_STORE or the user cache).")
    index.add_argument("--quiet", action="store_true", help="No progress bar.")
    index.add_argument(
        "--embed",
        action="store_true",
        help="With the in-memory backend: also store MiniLM embeddings (for pipelines/agentic_rag_embedded_dense.yml).",
    )
    index.add_argument(
        "--pipeline",
        help="Run this YAML indexing pipeline (e.g. pipelines/indexing_milvus.yml) instead; --uri sets its store.",
    )
    add_backend_arguments(index)
    return index


def read_documents(path: Path) -> list[Document]:
    """
    Read documents from a HotpotQA/MuSiQue-format JSONL file, a .txt/.md file, or a directory of them.

    :param path: The file or directory.
    :returns: The documents (one per paragraph for JSONL, one per file otherwise).
    :raises CLIError: If the path does not exist or holds no supported file.
    """
    if not path.exists():
        raise CLIError(
            f"{path} does not exist: give a .jsonl file in the HotpotQA format, a .txt/.md/.html/.pdf file or a folder."
        )
    from haystack_agentic.indexing.indexing_pipeline import convert_files  # noqa: PLC0415 - converters load only for indexing

    files = readable_files(path)
    try:
        documents = convert_files(files)
    except ValueError as exc:
        raise CLIError(str(exc)) from exc
    if not documents:
        raise CLIError(
            f"No documents found in {path}: supported are .jsonl (HotpotQA format), .txt, .md, .html and .pdf files."
        )
    return documents


def readable_files(path: Path) -> list[Path]:
    """
    The supported files under `path`, without those that cannot give text; each skipped file is reported on
    stderr with the reason.

    :param path: A file or folder.
    :returns: The files to index.
    """
    from rich.console import Console  # noqa: PLC0415
    from haystack_agentic.indexing.indexing_pipeline import collect_files, unreadable_files  # noqa: PLC0415

    files = collect_files(path)
    skipped = unreadable_files(files)
    for file, reason in skipped.items():
        Console(stderr=True, soft_wrap=True).print(f"Skipped {file}: {reason}.", highlight=False, markup=False)
    return [f for f in files if f not in skipped]


def index_documents(documents: list[Document], store_path: Path, console: Console, quiet: bool = False) -> int:
    """
    Write documents into a fresh in-memory store (overwriting same ids) and save it to `store_path`.

    :param documents: The documents.
    :param store_path: The JSON file to save the store to (its folder is created).
    :param console: Where progress goes.
    :param quiet: No progress bar.
    :returns: The number of documents in the store.
    """
    from haystack.document_stores.in_memory import InMemoryDocumentStore  # noqa: PLC0415
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn  # noqa: PLC0415
    from haystack.document_stores.types import DuplicatePolicy

    store = InMemoryDocumentStore()
    with Progress(
        TextColumn("[bold]Indexing"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("documents"),
        TimeElapsedColumn(),
        console=console,
        disable=quiet,
        transient=True,
    ) as progress:
        task = progress.add_task("index", total=len(documents))
        for start in range(0, len(documents), _WRITE_BATCH):
            batch = documents[start : start + _WRITE_BATCH]
            store.write_documents(batch, policy=DuplicatePolicy.OVERWRITE)
            progress.advance(task, len(batch))
    return save_store(store, store_path)


def save_store(store: InMemoryDocumentStore, store_path: Path) -> int:
    """
    Save an in-memory store to a JSON file atomically (a temporary file, then a rename), creating its folder.

    :param store: The store.
    :param store_path: The file.
    :returns: The number of documents saved.
    """
    try:
        store_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = store_path.with_suffix(store_path.suffix + ".tmp")
        store.save_to_disk(str(tmp))
        tmp.replace(store_path)
    except OSError as exc:
        raise CLIError(
            f"Cannot write the store {store_path} ({type(exc).__name__}: {exc.strerror or exc}): "
            "choose another --store (or HAYSTACK_AGENTIC_STORE / HAYSTACK_AGENTIC_CACHE)."
        ) from exc
    return store.count_documents()


def index_into_store(
    documents: list[Document], store: Any, embedder: Any, console: Console, quiet: bool = False
) -> int:
    """
    Embed and write documents into any document store (overwriting same ids), with a progress bar (count, rate).

    :param documents: The documents.
    :param store: The document store (Milvus, Weaviate, in-memory...).
    :param embedder: A document embedder, or `None`.
    :param console: Where progress goes.
    :param quiet: No progress bar.
    :returns: The number of documents in the store.
    :raises CLIError: On an embedding dimension mismatch (nothing is written) or a store error.
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn  # noqa: PLC0415
    from haystack_agentic.indexing.document_stores import EmbeddingDimensionError  # noqa: PLC0415
    from haystack_agentic.indexing.indexing_pipeline import write_documents  # noqa: PLC0415

    with Progress(
        TextColumn("[bold]Indexing"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("documents"),
        TextColumn("[dim]{task.fields[rate]}"),
        TimeElapsedColumn(),
        console=console,
        disable=quiet,
        transient=True,
    ) as progress:
        task = progress.add_task("index", total=len(documents), rate="")
        start = time.perf_counter()

        def advance(n: int) -> None:
            done = progress.tasks[0].completed + n
            rate = done / max(time.perf_counter() - start, 1e-9)
            progress.update(task, advance=n, rate=f"{rate:.0f} docs/s")

        try:
            return write_documents(documents, store, embedder, on_batch=advance)
        except EmbeddingDimensionError as exc:
            raise CLIError(str(exc)) from exc


def open_index_store(backend: str, uri: str | None, collection: str | None) -> Any:
    """
    The document store `index --backend` writes to.

    :param backend: `milvus` or `weaviate`.
    :param uri: Milvus Lite file / Milvus server URI, or Weaviate URL (defaults: the user cache's milvus.db,
        http://localhost:8080).
    :param collection: Collection name (default: the packaged pipelines').
    :returns: The store.
    :raises CLIError: If the integration is missing or the store cannot be reached.
    """
    from haystack_agentic.indexing import document_stores as ds  # noqa: PLC0415

    try:
        if backend == "milvus":
            store = ds.milvus_document_store(uri or str(default_milvus_uri()), collection or ds.MILVUS_COLLECTION)
            store = _dense_only_on_old_milvus(store, collection or ds.MILVUS_COLLECTION)
        else:
            store = ds.weaviate_document_store(uri or default_weaviate_url(), collection or ds.WEAVIATE_COLLECTION)
        store.count_documents()
    except ImportError as exc:
        raise CLIError(f"{exc}: install it with `pip install 'haystack-agentic[{backend}]'`.") from exc
    except Exception as exc:  # noqa: BLE001 - one line with the address, not a stack trace
        address = uri or (default_milvus_uri() if backend == "milvus" else default_weaviate_url())
        raise CLIError(f"Cannot open the {backend} store at {address}: {type(exc).__name__}: {exc}") from exc
    return store


def _dense_only_on_old_milvus(store: Any, collection: str) -> Any:
    """On a Milvus server older than 2.5 (no BM25), index a dense-only collection instead, and say so."""
    import sys  # noqa: PLC0415

    from haystack_agentic.document_stores import milvus_support  # noqa: PLC0415
    from haystack_agentic.indexing import document_stores as ds  # noqa: PLC0415

    version = milvus_support.server_version(store.client)
    if milvus_support.supports_bm25(version):
        return store
    uri = store.connection_args["uri"]
    print(
        f"Milvus {'.'.join(map(str, version))} at {uri} has no BM25 (Milvus >= 2.5): indexing dense vectors only; "
        "`ask --backend milvus` uses dense retrieval on it.",
        file=sys.stderr,
    )
    return ds.milvus_document_store(uri, collection, bm25=False)


def _index_with_pipeline(args: argparse.Namespace, path: Path, console: Console, start: float) -> int:
    """`index PATH --pipeline YAML`: run a YAML indexing pipeline over the files (dimension checked first)."""
    import yaml  # noqa: PLC0415
    from haystack import Pipeline  # noqa: PLC0415
    from rich.console import Console  # noqa: PLC0415
    from haystack_agentic.pipelines.loop_pipeline import ALLOWED_MODULES  # noqa: PLC0415
    from haystack_agentic.indexing.indexing_pipeline import run_indexing_pipeline  # noqa: PLC0415
    from haystack_agentic.pipelines.loop_loading import set_store_uri  # noqa: PLC0415

    if not path.exists():
        raise CLIError(f"{path} does not exist: give a file or a folder of .txt/.md/.html/.pdf files.")
    files = readable_files(path)
    try:
        data = yaml.safe_load(Path(args.pipeline).read_text(encoding="utf-8"))
        if not isinstance(data, dict) or "writer" not in (data.get("components") or {}):
            raise ValueError("it is not an indexing pipeline (no component named `writer`)")
        if args.uri:
            set_store_uri(data["components"], args.uri)
        pipeline = Pipeline.from_dict(data, allowed_modules=ALLOWED_MODULES)
    except (OSError, UnicodeDecodeError, yaml.YAMLError, ValueError) as exc:
        raise CLIError(f"Cannot use the indexing pipeline {args.pipeline}: {exc}") from exc
    except Exception as exc:  # noqa: BLE001 - e.g. the store cannot be reached while loading
        raise CLIError(f"Cannot load the indexing pipeline {args.pipeline}: {type(exc).__name__}: {exc}") from exc
    try:
        with Console(stderr=True, quiet=args.quiet).status(f"Indexing {len(files)} file(s) with {args.pipeline}..."):
            count = run_indexing_pipeline(pipeline, files)
    except ValueError as exc:  # unsupported files, a dimension mismatch: nothing was written
        raise CLIError(str(exc)) from exc
    except Exception as exc:  # noqa: BLE001 - e.g. the store's server cannot be reached
        raise CLIError(f"Indexing with {args.pipeline} failed: {type(exc).__name__}: {exc}") from exc
    console.print(
        f"Indexed {len(files)} file(s) from {path} with {args.pipeline} ({count} in the store) "
        f"in {time.perf_counter() - start:.1f} s"
    )
    return 0


def cmd_index(args: argparse.Namespace, console: Console) -> int:
    from haystack.document_stores.in_memory import InMemoryDocumentStore  # noqa: PLC0415
    from haystack_agentic.resources import sample_corpus_path  # noqa: PLC0415
    path = Path(args.path) if args.path else sample_corpus_path()
    store_path = Path(args.store) if args.store else default_store_path()
    start = time.perf_counter()
    if args.pipeline:
        return _index_with_pipeline(args, path, console, start)
    documents = read_documents(path)
    backend = getattr(args, "backend", "memory")
    if backend == "memory" and args.embed:
        from haystack_agentic.components.embedders.minilm_document_embedder import MiniLMDocumentEmbedder  # noqa: PLC0415

        memory = InMemoryDocumentStore()
        index_into_store(documents, memory, MiniLMDocumentEmbedder(), console, args.quiet)
        count = save_store(memory, store_path)
        target = f"{store_path} (with MiniLM embeddings)"
    elif backend == "memory":
        count = index_documents(documents, store_path, console, args.quiet)
        target = store_path
    else:
        from haystack_agentic.components.embedders.minilm_document_embedder import MiniLMDocumentEmbedder  # noqa: PLC0415

        store = open_index_store(backend, args.uri, args.collection)
        count = index_into_store(documents, store, MiniLMDocumentEmbedder(), console, args.quiet)
        target = f"{backend} at {args.uri or (default_milvus_uri() if backend == 'milvus' else default_weaviate_url())}"
    console.print(
        f"Indexed {len(documents)} documents from {path} into {target} "
        f"({count} in the store) in {time.perf_counter() - start:.1f} s"
    )
    return 0
