# SPDX-License-Identifier: Apache-2.0
"""
Indexing: files to chunks to (embedded) Documents in any Haystack document store, idempotently.

- `.jsonl` in the HotpotQA/MuSiQue format: one Document per paragraph (`haystack_agentic.datasets.hotpotqa`, stable ids).
- `.txt`, `.md`, `.html`/`.htm`, `.pdf`: Haystack converters (`TextFileToDocument`, `MarkdownToDocument`,
  `HTMLToDocument`, `PyPDFToDocument`), `DocumentCleaner`, then `DocumentSplitter` (words, 200 with 20 overlap).
  Haystack's Document ids hash content and meta (file path, split index), so the same files give the same ids.

`write_documents` embeds in batches (default: the packaged all-MiniLM-L6-v2; any Haystack document embedder),
checks the embedding dimension against the store's collection before the first write, and writes with
`DuplicatePolicy.OVERWRITE`: re-indexing the same files keeps the same count on every backend.

`build_indexing_pipeline` is the same as a YAML-able Haystack pipeline (`FileTypeRouter` -> converters -> cleaner
-> splitter -> embedder -> `DocumentWriter`), for users who run indexing as a pipeline.
"""

from collections.abc import Callable
from pathlib import Path
from typing import Any

from haystack import Document, Pipeline, logging
from haystack.components.converters import (
    HTMLToDocument,
    MarkdownToDocument,
    PyPDFToDocument,
    TextFileToDocument,
)
from haystack.components.joiners import DocumentJoiner
from haystack.components.preprocessors import DocumentCleaner, DocumentSplitter
from haystack.components.routers import FileTypeRouter
from haystack.components.writers import DocumentWriter
from haystack.document_stores.types import DuplicatePolicy

from haystack_agentic.document_stores import milvus_support
from haystack_agentic.components.preprocessors.chunk_metadata_cleaner import ChunkMetadataCleaner
from haystack_agentic.indexing.document_stores import check_embedding_dimension
from haystack_agentic.datasets.hotpotqa import hotpotqa_documents

logger = logging.getLogger(__name__)

#: File suffix -> MIME type handled by the converters.
MIME_TYPES = {
    ".txt": "text/plain",
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".html": "text/html",
    ".htm": "text/html",
    ".pdf": "application/pdf",
}
SUPPORTED_SUFFIXES = (".jsonl", *MIME_TYPES)

#: Splitting defaults (words).
SPLIT_LENGTH = 200
SPLIT_OVERLAP = 20

#: Documents embedded and written per batch.
BATCH_SIZE = 64


def collect_files(path: Path) -> list[Path]:
    """
    The supported files under `path` (itself, if a file), sorted.

    :param path: A file or folder.
    :returns: The files.
    :raises FileNotFoundError: If `path` does not exist.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(path)
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    return [f for f in files if f.suffix.lower() in SUPPORTED_SUFFIXES]


def _converters() -> dict[str, Any]:
    return {
        "text/plain": TextFileToDocument(),
        "text/markdown": MarkdownToDocument(progress_bar=False),
        "text/html": HTMLToDocument(),
        # A list, not pypdf's default tuple, so the pipeline's YAML stays loadable with `yaml.safe_load`.
        "application/pdf": PyPDFToDocument(plain_mode_orientations=[0, 90, 180, 270]),
    }


def _add_converters(pipeline: Pipeline) -> None:
    """Add router -> converters -> joiner -> cleaner -> splitter -> chunk_meta to `pipeline` (input `router.sources`)."""
    pipeline.add_component("router", FileTypeRouter(mime_types=sorted(set(MIME_TYPES.values()))))
    pipeline.add_component("joiner", DocumentJoiner())
    for mime, converter in _converters().items():
        name = "converter_" + mime.split("/")[1]
        pipeline.add_component(name, converter)
        pipeline.connect(f"router.{mime}", f"{name}.sources")
        pipeline.connect(f"{name}.documents", "joiner.documents")
    pipeline.add_component("cleaner", DocumentCleaner())
    pipeline.add_component(
        "splitter", DocumentSplitter(split_by="word", split_length=SPLIT_LENGTH, split_overlap=SPLIT_OVERLAP)
    )
    pipeline.add_component("chunk_meta", ChunkMetadataCleaner())
    pipeline.connect("joiner.documents", "cleaner.documents")
    pipeline.connect("cleaner.documents", "splitter.documents")
    pipeline.connect("splitter.documents", "chunk_meta.documents")


def convert_files(files: list[Path]) -> list[Document]:
    """
    Turn files into chunk Documents (JSONL: HotpotQA paragraphs; others: converted, cleaned and split).

    :param files: Supported files.
    :returns: The Documents, with stable ids (empty files give none).
    :raises ValueError: If a JSONL file is not in the HotpotQA format (the message names the file and line).
    """
    documents: list[Document] = []
    jsonl = [f for f in files if f.suffix.lower() == ".jsonl"]
    others = [f for f in files if f.suffix.lower() in MIME_TYPES]
    for file in jsonl:
        documents.extend(hotpotqa_documents(file, title_in_content=True))
    if others:
        pipeline = Pipeline()
        _add_converters(pipeline)
        # FileTypeRouter guesses MIME types from suffixes; .md is not known everywhere, so pass ByteStreams.
        documents.extend(pipeline.run({"router": {"sources": file_sources(others)}})["chunk_meta"]["documents"])
    # the same chunk twice (e.g. a file listed twice) would be one id: keep the first
    unique: dict[str, Document] = {}
    for document in documents:
        unique.setdefault(document.id, document)
    return list(unique.values())


#: Suffixes of text formats that must decode as UTF-8 (the converters would otherwise skip them noisily).
_TEXT_SUFFIXES = {".txt", ".md", ".markdown", ".html", ".htm"}


def unreadable_files(files: list[Path]) -> dict[Path, str]:
    """
    The files that cannot give any text, with why: empty, or a text format that is not UTF-8 (e.g. a binary
    file named .txt, or Latin-1 text).

    :param files: Candidate files.
    :returns: `{file: reason}` for the files to skip; the others are fine to convert.
    """
    problems: dict[Path, str] = {}
    for file in files:
        try:
            data = file.read_bytes()
        except OSError as exc:
            problems[file] = f"cannot be read ({exc.strerror or exc})"
            continue
        if not data.strip():
            problems[file] = "empty"
        elif file.suffix.lower() in _TEXT_SUFFIXES:
            try:
                data.decode("utf-8")
            except UnicodeDecodeError:
                problems[file] = "not UTF-8 text (convert it to UTF-8 first)"
    return problems


def file_sources(files: list[Path]) -> list[Any]:
    """
    ByteStreams for converter pipelines, with the MIME type from the suffix (FileTypeRouter does not know .md
    everywhere) and `file_path` and `title` (the file name without suffix) in the meta.

    :param files: Files with a supported suffix (see `MIME_TYPES`).
    :returns: The ByteStreams.
    """
    from haystack.dataclasses import ByteStream  # noqa: PLC0415

    sources = []
    for file in files:
        stream = ByteStream.from_file_path(file, mime_type=MIME_TYPES[file.suffix.lower()])
        stream.meta.update({"file_path": str(file), "title": file.stem})
        sources.append(stream)
    return sources


def run_indexing_pipeline(pipeline: Pipeline, files: list[Path]) -> int:
    """
    Run a YAML indexing pipeline (from `build_indexing_pipeline`) over files, checking the dimension first.

    :param pipeline: The indexing pipeline (components `router`, optional `embedder`, `writer`).
    :param files: The files (.txt, .md, .html, .pdf; HotpotQA JSONL goes through `convert_files` instead).
    :returns: The number of documents in the writer's store afterwards.
    :raises ValueError: If a file is JSONL or unsupported, or the pipeline has no `writer`.
    :raises EmbeddingDimensionError: Before anything is written, if the embedder's dimension differs from the
        store's existing collection.
    """
    unsupported = [str(f) for f in files if f.suffix.lower() not in MIME_TYPES]
    if unsupported:
        raise ValueError(
            f"An indexing pipeline converts {', '.join(sorted(MIME_TYPES))} files; not: {', '.join(unsupported)}. "
            "Index HotpotQA-format JSONL without --pipeline."
        )
    try:
        store = pipeline.get_component("writer").document_store
    except ValueError as exc:
        raise ValueError("The indexing pipeline has no component named `writer`.") from exc
    try:
        embedder = pipeline.get_component("embedder")
    except ValueError:
        embedder = None
    if embedder is not None:
        if hasattr(embedder, "warm_up"):
            embedder.warm_up()
        check_embedding_dimension(store, embedding_size(embedder))
    pipeline.run({"router": {"sources": file_sources(files)}})
    milvus_support.flush(store)
    return store.count_documents()


def embedding_size(embedder: Any) -> int:
    """
    The dimension of a document embedder's embeddings (embeds one probe document).

    :param embedder: A warmed-up Haystack document embedder.
    :returns: The dimension.
    """
    probe = embedder.run(documents=[Document(content="dimension probe")])["documents"][0]
    return len(probe.embedding)


def write_documents(
    documents: list[Document],
    document_store: Any,
    embedder: Any = None,
    batch_size: int = BATCH_SIZE,
    on_batch: Callable[[int], None] | None = None,
) -> int:
    """
    Embed (optionally) and write Documents in batches, overwriting same ids.

    :param documents: The Documents.
    :param document_store: Any Haystack document store.
    :param embedder: A Haystack document embedder (warmed up here), or `None` to write without embeddings.
    :param batch_size: Documents per batch. Default 64.
    :param on_batch: Called with each batch's size after it is written (progress).
    :returns: The number of documents in the store afterwards.
    :raises EmbeddingDimensionError: Before any write, if the embedder's dimension differs from the store's.
    """
    if embedder is not None:
        if hasattr(embedder, "warm_up"):
            embedder.warm_up()
        check_embedding_dimension(document_store, embedding_size(embedder))
    for start in range(0, len(documents), batch_size):
        batch = documents[start : start + batch_size]
        if embedder is not None:
            batch = embedder.run(documents=batch)["documents"]
        document_store.write_documents(batch, policy=DuplicatePolicy.OVERWRITE)
        if on_batch is not None:
            on_batch(len(batch))
    milvus_support.flush(document_store)  # Milvus: searches use the indexes, not a brute-force growing segment
    return document_store.count_documents()


def build_indexing_pipeline(document_store: Any, embedder: Any = None) -> Pipeline:
    """
    The indexing pipeline for files: router -> converters -> cleaner -> splitter -> chunk_meta -> [embedder] -> writer.

    Run it with `{"router": {"sources": [paths]}}`; it writes with `DuplicatePolicy.OVERWRITE`.

    :param document_store: Where the writer writes.
    :param embedder: A Haystack document embedder, or `None`.
    :returns: The pipeline (serialisable to YAML with `dumps()`).
    """
    pipeline = Pipeline(metadata={"purpose": "haystack-agentic indexing"})
    _add_converters(pipeline)
    pipeline.add_component("writer", DocumentWriter(document_store=document_store, policy=DuplicatePolicy.OVERWRITE))
    if embedder is not None:
        pipeline.add_component("embedder", embedder)
        pipeline.connect("chunk_meta.documents", "embedder.documents")
        pipeline.connect("embedder.documents", "writer.documents")
    else:
        pipeline.connect("chunk_meta.documents", "writer.documents")
    return pipeline
