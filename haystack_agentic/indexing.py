# SPDX-License-Identifier: Apache-2.0
"""
Indexing: files to chunks to (embedded) Documents in any Haystack document store, idempotently.

- `.jsonl` in the HotpotQA/MuSiQue format: one Document per paragraph (`haystack_agentic.hotpotqa`, stable ids).
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

from haystack_agentic.document_stores import check_embedding_dimension
from haystack_agentic.hotpotqa import hotpotqa_documents

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
        "application/pdf": PyPDFToDocument(),
    }


def _add_converters(pipeline: Pipeline) -> None:
    """Add router -> converters -> joiner -> cleaner -> splitter to `pipeline` (input `router.sources`)."""
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
    pipeline.connect("joiner.documents", "cleaner.documents")
    pipeline.connect("cleaner.documents", "splitter.documents")


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
        from haystack.dataclasses import ByteStream  # noqa: PLC0415

        sources = []
        for file in others:
            stream = ByteStream.from_file_path(file, mime_type=MIME_TYPES[file.suffix.lower()])
            stream.meta.update({"file_path": str(file), "title": file.stem})
            sources.append(stream)
        chunks = pipeline.run({"router": {"sources": sources}})["splitter"]["documents"]
        for chunk in chunks:  # `_split_overlap` is a list of dicts, which Milvus cannot store
            chunk.meta.pop("_split_overlap", None)
        documents.extend(Document(content=d.content, meta=d.meta) for d in chunks if d.content and d.content.strip())
    # the same chunk twice (e.g. a file listed twice) would be one id: keep the first
    unique: dict[str, Document] = {}
    for document in documents:
        unique.setdefault(document.id, document)
    return list(unique.values())


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
    return document_store.count_documents()


def build_indexing_pipeline(document_store: Any, embedder: Any = None) -> Pipeline:
    """
    The indexing pipeline for files: router -> converters -> cleaner -> splitter -> [embedder] -> writer.

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
        pipeline.connect("splitter.documents", "embedder.documents")
        pipeline.connect("embedder.documents", "writer.documents")
    else:
        pipeline.connect("splitter.documents", "writer.documents")
    return pipeline
