# SPDX-License-Identifier: Apache-2.0
"""
Files to chunks: the converters of `haystack-agentic index`, and the same as a YAML-able pipeline.

HotpotQA/MuSiQue `.jsonl`: one Document per paragraph; `.txt`, `.md`, `.html`, `.pdf`: Haystack's converters, cleaner
and splitter.
"""

import dataclasses
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

from haystack_agentic.components.preprocessors.chunk_metadata_cleaner import ChunkMetadataCleaner
from haystack_agentic.components.preprocessors.sentence_span_annotator import SentenceSpanAnnotator
from haystack_agentic.components.writers.source_replacing_document_writer import SourceReplacingDocumentWriter
from haystack_agentic.indexing.hotpotqa import hotpotqa_documents
from haystack_agentic.indexing.source_sync import SOURCE_FIELD, source_key

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

#: Splitting defaults (words), and files converted per pipeline run (progress is reported after each).
SPLIT_LENGTH = 200
SPLIT_OVERLAP = 20
FILES_PER_RUN = 16


def collect_files(path: Path) -> list[Path]:
    """The supported files under `path` (itself, if a file), sorted. :raises FileNotFoundError: If it does not exist."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(path)
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    return [f for f in files if f.suffix.lower() in SUPPORTED_SUFFIXES]


def _add_converters(pipeline: Pipeline) -> None:
    """Add router -> converters -> joiner -> cleaner -> splitter -> chunk_meta (input `router.sources`)."""
    pipeline.add_component("router", FileTypeRouter(mime_types=sorted(set(MIME_TYPES.values()))))
    pipeline.add_component("joiner", DocumentJoiner())
    # store_full_path: `file_path` keeps the path the source names (the resolved one, from `file_sources`).
    converters = {
        "text/plain": TextFileToDocument(store_full_path=True),
        "text/markdown": MarkdownToDocument(progress_bar=False, store_full_path=True),
        "text/html": HTMLToDocument(store_full_path=True),
        # A list, not pypdf's default tuple, so the pipeline's YAML stays loadable with `yaml.safe_load`.
        "application/pdf": PyPDFToDocument(plain_mode_orientations=[0, 90, 180, 270], store_full_path=True),
    }
    for mime, converter in converters.items():
        name = "converter_" + mime.split("/")[1]
        pipeline.add_component(name, converter)
        pipeline.connect(f"router.{mime}", f"{name}.sources")
        pipeline.connect(f"{name}.documents", "joiner.documents")
    pipeline.add_component("cleaner", DocumentCleaner())
    pipeline.add_component(
        "splitter", DocumentSplitter(split_by="word", split_length=SPLIT_LENGTH, split_overlap=SPLIT_OVERLAP)
    )
    pipeline.add_component("chunk_meta", ChunkMetadataCleaner())
    for sender, receiver in (("joiner", "cleaner"), ("cleaner", "splitter"), ("splitter", "chunk_meta")):
        pipeline.connect(f"{sender}.documents", f"{receiver}.documents")


def convert_files(files: list[Path], on_files: Callable[[int], None] | None = None) -> list[Document]:
    """
    Convert supported files into chunk Documents with stable ids.

    Supported files as chunk Documents with stable ids, each with its source in `meta["file_path"]`; `on_files(n)`
    is called as `n` more files are converted.

    :raises ValueError: If a JSONL file is not in the HotpotQA format (the message names the file and line).
    """
    documents: list[Document] = []
    jsonl = [f for f in files if f.suffix.lower() == ".jsonl"]
    others = [f for f in files if f.suffix.lower() in MIME_TYPES]
    for file in jsonl:
        source = {SOURCE_FIELD: source_key(file)}
        paragraphs = hotpotqa_documents(file, title_in_content=True)
        documents.extend(dataclasses.replace(d, meta={**d.meta, **source}) for d in paragraphs)  # ids unchanged
        if on_files is not None:
            on_files(1)
    if others:
        pipeline = Pipeline()
        _add_converters(pipeline)
        for start in range(0, len(others), FILES_PER_RUN):
            batch = others[start : start + FILES_PER_RUN]
            # FileTypeRouter guesses MIME types from suffixes; .md is not known everywhere, so pass ByteStreams.
            documents.extend(pipeline.run({"router": {"sources": file_sources(batch)}})["chunk_meta"]["documents"])
            if on_files is not None:
                on_files(len(batch))
    # the same chunk twice (e.g. a file listed twice) would be one id: keep the first
    unique: dict[str, Document] = {}
    for document in documents:
        unique.setdefault(document.id, document)
    return list(unique.values())


#: The reason `unreadable_files` gives for an empty file.
EMPTY = "empty"


def unreadable_files(files: list[Path]) -> dict[Path, str]:
    """
    Find the files that cannot give any text; returns `{file: reason}`.

    `{file: reason}` for the files that cannot give any text: unreadable, empty, a text format that is not UTF-8,
    or a PDF that pypdf cannot read (`pdf_problem`).
    """
    problems: dict[Path, str] = {}
    for file in files:
        try:
            data = file.read_bytes()
        except OSError as exc:
            problems[file] = f"cannot be read ({exc.strerror or exc})"
            continue
        suffix = file.suffix.lower()
        if not data.strip():
            problems[file] = EMPTY
        elif suffix == ".pdf" and (problem := pdf_problem(data)):
            problems[file] = problem
        elif suffix in MIME_TYPES and suffix != ".pdf":  # the converters need UTF-8
            try:
                data.decode("utf-8")
            except UnicodeDecodeError:
                problems[file] = "not UTF-8 text (convert it to UTF-8 first)"
    return problems


#: Longest part of a PDF parser's error message kept in a skipped file's reason.
_PDF_REASON_CHARS = 120


def pdf_problem(data: bytes) -> str | None:
    """Why a PDF's bytes cannot be indexed (one line, not the converter's warning with raw bytes), or `None`."""
    import io  # noqa: PLC0415
    import logging as std_logging  # noqa: PLC0415
    import warnings  # noqa: PLC0415

    try:
        from pypdf import PdfReader  # noqa: PLC0415 - the pdf extra
    except ImportError:
        return None  # the converter reports the missing package itself
    pypdf_logger = std_logging.getLogger("pypdf")
    level = pypdf_logger.level
    pypdf_logger.setLevel(std_logging.CRITICAL)  # "EOF marker not found" and the like: the reason says it once
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            reader = PdfReader(io.BytesIO(data))
            for page in reader.pages:
                page.extract_text()
    except Exception as exc:
        detail = " ".join(str(exc).split())[:_PDF_REASON_CHARS].encode("ascii", "backslashreplace").decode("ascii")
        return f"not a readable PDF ({type(exc).__name__}{': ' + detail if detail else ''})"
    finally:
        pypdf_logger.setLevel(level)
    return None


def file_sources(files: list[Path]) -> list[Any]:
    """
    ByteStreams of files, with their MIME type, source path and title.

    ByteStreams of files, with the MIME type from the suffix (FileTypeRouter does not know .md everywhere), and
    `file_path` (the source) and `title` (the file name without suffix) in the meta.
    """
    from haystack.dataclasses import ByteStream  # noqa: PLC0415

    return [
        ByteStream.from_file_path(
            file, mime_type=MIME_TYPES[file.suffix.lower()], meta={SOURCE_FIELD: source_key(file), "title": file.stem}
        )
        for file in files
    ]


def build_indexing_pipeline(document_store: Any, embedder: Any = None) -> Pipeline:
    """
    Build the indexing pipeline for files.

    Components: router -> converters -> cleaner -> splitter -> chunk_meta -> sentence_spans -> [embedder] -> writer;
    YAML with `dumps()`. Run it with `{"router": {"sources": [absolute paths]}}`; the writer replaces each file's
    earlier chunks (add `"writer": {"sources": [paths]}` to also clear files that gave no chunk).
    """
    pipeline = Pipeline(metadata={"purpose": "haystack-agentic indexing"})
    _add_converters(pipeline)
    pipeline.add_component("sentence_spans", SentenceSpanAnnotator())
    pipeline.connect("chunk_meta.documents", "sentence_spans.documents")
    pipeline.add_component("writer", SourceReplacingDocumentWriter(document_store=document_store))
    last = "sentence_spans"
    if embedder is not None:
        pipeline.add_component("embedder", embedder)
        pipeline.connect("sentence_spans.documents", "embedder.documents")
        last = "embedder"
    pipeline.connect(f"{last}.documents", "writer.documents")
    return pipeline
