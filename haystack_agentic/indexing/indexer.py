# SPDX-License-Identifier: Apache-2.0
"""
Indexing files into a document store without losing anything (`haystack-agentic index`).

Indexing files into a document store without losing anything (what `haystack-agentic index` runs); progress goes to
an optional `progress(stage, done, total)` (`total` `None` while unknown), called as a stage starts (`done=0`) and
advances: `converting` (files), `loading model`, `embedding`, `writing` (chunks), or `indexing` (files, YAML).
"""

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from haystack import Document, Pipeline, logging
from haystack.document_stores.in_memory import InMemoryDocumentStore
from haystack.document_stores.types import DuplicatePolicy

from haystack_agentic.components.preprocessors.sentence_span_annotator import SentenceSpanAnnotator
from haystack_agentic.components.writers.source_replacing_document_writer import SourceReplacingDocumentWriter
from haystack_agentic.document_stores import document_counts, milvus_support
from haystack_agentic.indexing.collections import (
    describe_collection,
    list_collections,
    tag_documents,
    validate_collection_name,
)
from haystack_agentic.indexing.document_stores import check_embedding_dimension, embedding_dimension
from haystack_agentic.indexing.indexing_pipeline import FILES_PER_RUN, MIME_TYPES, convert_files, file_sources
from haystack_agentic.indexing.source_sync import clear_store, document_sources, remove_stale_chunks, source_key
from haystack_agentic.indexing.store_faults import StoreError
from haystack_agentic.indexing.store_files import load_store_file, save_store_file, store_file_lock

logger = logging.getLogger(__name__)

#: Progress stages.
CONVERTING, LOADING_MODEL, EMBEDDING = "converting", "loading model", "embedding"
WRITING, INDEXING = "writing", "indexing"
ProgressCallback = Callable[[str, int, "int | None"], None]

#: Documents embedded and written per batch.
BATCH_SIZE = 64


@dataclass(frozen=True)
class IndexResult:
    """What an indexing run did: files converted, chunks written, stale chunks removed, documents in the store."""

    files: int
    chunks: int
    removed: int
    in_store: int


def _stages(callback: ProgressCallback | None) -> Callable[[str, int, "int | None"], None]:
    """`advance(stage, n, total)`: report `n` more done of `stage` to `callback` (`n=0`: the stage starts)."""
    done: Counter[str] = Counter()

    def advance(stage: str, n: int, total: int | None) -> None:
        done[stage] += n
        if callback is not None:
            callback(stage, done[stage], total)

    return advance


def _write_batches(documents: list[Document], store: Any, embedder: Any, advance: Callable[..., None]) -> None:
    total = len(documents)
    if embedder is not None:
        advance(EMBEDDING, 0, total)
    advance(WRITING, 0, total)
    annotator = SentenceSpanAnnotator()
    for start in range(0, total, BATCH_SIZE):
        batch = annotator.run(documents=documents[start : start + BATCH_SIZE])["documents"]
        if embedder is not None:
            batch = embedder.run(documents=batch)["documents"]
            advance(EMBEDDING, len(batch), total)
        store.write_documents(batch, policy=DuplicatePolicy.OVERWRITE)
        advance(WRITING, len(batch), total)


def _ready_store(store: Any, embedder: Any, progress: ProgressCallback | None, replace: bool) -> Any:
    """
    Prepare a store for writing: warm up the embedder, check dimensions, mark the write begun.

    Warm up the embedder (stage `loading model`) and check its dimension against the store (one probe document),
    mark the write begun, and empty the store if `replace`: the store to write to.
    """
    if embedder is not None:
        advance = _stages(progress)
        advance(LOADING_MODEL, 0, None)
        if hasattr(embedder, "warm_up"):
            embedder.warm_up()
        dimension = len(embedder.run(documents=[Document(content="dimension probe")])["documents"][0].embedding)
        advance(LOADING_MODEL, 1, 1)
        if not replace:  # an emptied store holds no other dimension
            check_embedding_dimension(store, dimension)
    document_counts.begin_write(store)
    return clear_store(store) if replace else store


def write_documents(
    documents: list[Document], document_store: Any, embedder: Any = None, progress: ProgressCallback | None = None
) -> int:
    """
    Annotate, embed and write Documents into a store in batches; returns the store's count.

    Give Documents their sentence spans (`SentenceSpanAnnotator`), embed them (optionally) and write them in batches
    of `BATCH_SIZE`, upserting by id.

    :param embedder: A Haystack document embedder (warmed up here), or `None` to write without embeddings.
    :param progress: The progress callback (stages `loading model`, `embedding`, `writing`).
    :returns: The number of documents in the store afterwards.
    :raises EmbeddingDimensionError: Before any write, if the embedder's dimension differs from the store's.
    """
    store = _ready_store(document_store, embedder, progress, replace=False)
    _write_batches(documents, store, embedder, _stages(progress))
    milvus_support.flush(store)
    return store.count_documents()


NOTHING_CONVERTED = (
    "None of the files gave any chunk (each failed to convert or is empty), so --replace would only empty the store; "
    "nothing was changed. Fix those files or index others."
)


def index_files(
    files: list[Path],
    store: Any,
    *,
    embedder: Any = None,
    emptied: Iterable[Path] = (),
    replace: bool = False,
    progress: ProgressCallback | None = None,
    collection: str | None = None,
    collection_description: str | None = None,
) -> IndexResult:
    """
    Convert files to chunks and write them into any Haystack document store.

    Each file replaces its own earlier chunks.

    :param files: Supported files (`indexing_pipeline.collect_files`; skip unreadable ones first).
    :param embedder: A Haystack document embedder, or `None` to write without embeddings.
    :param emptied: Files that are empty now: their earlier chunks are deleted.
    :param replace: Empty the store before writing (after converting and loading the model).
    :param collection: Put the chunks into this collection (a re-indexed file replaces only its chunks there).
    :param collection_description: Set on the collection's new and held chunks (`None`: it keeps the one it has).
    :raises ValueError: If a JSONL file is malformed or the collection name is bad, or `replace` is set and no file
        gave any chunk (which would only empty the store); nothing is written.
    :raises EmbeddingDimensionError: If the embedder's dimension differs from the store's (nothing is written).
    """
    advance = _stages(progress)
    advance(CONVERTING, 0, len(files))
    documents = convert_files(files, on_files=lambda n: advance(CONVERTING, n, len(files)))
    if collection is not None:
        collection = validate_collection_name(collection)
        held = None if collection_description else list_collections(store).get(collection)
        # new chunks take the description the collection already has, unless a new one is given
        documents = tag_documents(documents, collection, collection_description or (held and held.description))
    if replace and not documents:
        raise ValueError(NOTHING_CONVERTED)
    store = _ready_store(store, embedder, progress, replace)
    _write_batches(documents, store, embedder, advance)
    # A file that gave no chunks (it failed to convert) keeps the chunks an earlier index took from it.
    converted = set(document_sources(documents))
    sources = [key for key in map(source_key, files) if key in converted] + [source_key(f) for f in emptied]
    removed = remove_stale_chunks(store, sources, [d.id for d in documents], collection=collection)
    if collection is not None and collection_description:
        describe_collection(store, collection, collection_description)
    milvus_support.flush(store)
    return IndexResult(files=len(files), chunks=len(documents), removed=removed, in_store=store.count_documents())


#: Why chunks with and without embeddings cannot share a store file, by whether the file's chunks have embeddings.
_MIXED_EMBEDDINGS = {
    True: "The store {} holds embeddings (it was indexed with --embed): index into it with --embed too, or rebuild it "
    "without embeddings with --replace.",
    False: "The store {} has no embeddings: index into it without --embed, or rebuild it with --embed --replace "
    "(every file you want in it).",
}


def index_files_into_file(
    files: list[Path], store_path: Path, *, embedder: Any = None, replace: bool = False, **options: Any
) -> IndexResult:
    """
    Index files into an in-memory store saved as a JSON file, under a lock on the file.

    `index_files` (`options`: its other keyword arguments) for an in-memory store saved as a JSON file (created with
    its folder when missing): read it (unless `replace` or new), index, save it atomically, under a lock on the file.

    :raises StoreError: If the existing file cannot be read, its chunks' embeddings (or their absence) differ from
        the new ones', or the new file cannot be written (the old file is then unchanged).
    :raises ValueError: As `index_files`.
    """
    with store_file_lock(store_path):
        fresh = replace or not store_path.exists()
        store = InMemoryDocumentStore(shared=False) if fresh else load_store_file(store_path)
        has_embeddings = embedding_dimension(store) is not None
        if store.count_documents() and has_embeddings != (embedder is not None):
            raise StoreError(_MIXED_EMBEDDINGS[has_embeddings].format(store_path))
        result = index_files(files, store, embedder=embedder, replace=replace, **options)
        save_store_file(store, store_path)
    return result


def load_indexing_pipeline(path: Path | str, store_uri: str | None = None) -> Pipeline:
    """
    Load a YAML indexing pipeline (with a component named `writer`) with the allow-list; its store is opened.

    :param path: The YAML file, or the name of a packaged one (`indexing_milvus`) when no such file exists.
    :param store_uri: Set as the URI of its Milvus / Weaviate store.
    :raises ValueError: If the file cannot be read or is not an indexing pipeline.
    :raises StoreError: If its store cannot be opened.
    """
    from haystack_agentic.loop_loading import pipeline_from_dict, set_store_uri  # noqa: PLC0415
    from haystack_agentic.resources import pipeline_path  # noqa: PLC0415

    if not Path(path).exists() and "/" not in str(path):
        try:
            path = pipeline_path(str(path))
        except FileNotFoundError as exc:
            msg = f"Cannot use the indexing pipeline {path}: no such file, and {exc}"
            raise ValueError(msg) from exc
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        msg = f"Cannot use the indexing pipeline {path}: {exc}"
        raise ValueError(msg) from exc
    if not isinstance(data, dict) or "writer" not in (data.get("components") or {}):
        msg = f"Cannot use the indexing pipeline {path}: it is not one (no component named `writer`)."
        raise ValueError(msg)
    if store_uri:
        set_store_uri(data["components"], store_uri)
    return pipeline_from_dict(data, path)


def run_indexing_pipeline(
    pipeline: Pipeline,
    files: list[Path],
    *,
    emptied: Iterable[Path] = (),
    replace: bool = False,
    progress: ProgressCallback | None = None,
) -> IndexResult:
    """
    Run a YAML indexing pipeline over files, a few at a time.

    Run a YAML indexing pipeline (components `router`, optional `embedder`, `writer`) over files, a few at a time
    (stage `indexing`), dimension checked first; with a `SourceReplacingDocumentWriter` (the packaged pipelines) each
    file replaces its earlier chunks, and `emptied` files lose theirs. `replace` empties the store first.

    :raises ValueError: If a file is not .txt, .md, .html or .pdf, or the pipeline has no `writer`.
    :raises EmbeddingDimensionError: Before anything is written, if the dimensions differ.
    """
    unsupported = [str(f) for f in files if f.suffix.lower() not in MIME_TYPES]
    if unsupported:
        msg = (
            f"An indexing pipeline converts {', '.join(sorted(MIME_TYPES))} files; not: {', '.join(unsupported)}. "
            "Index HotpotQA-format JSONL without --pipeline."
        )
        raise ValueError(msg)
    try:
        writer = pipeline.get_component("writer")
    except ValueError as exc:
        msg = "The indexing pipeline has no component named `writer`."
        raise ValueError(msg) from exc
    embedder = dict(pipeline.walk()).get("embedder")
    store = writer.document_store = _ready_store(writer.document_store, embedder, progress, replace)
    advance, chunks, removed = _stages(progress), 0, 0
    advance(INDEXING, 0, len(files))
    for start in range(0, len(files), FILES_PER_RUN):
        batch = files[start : start + FILES_PER_RUN]
        # A file that gave no chunk this time keeps its earlier chunks: `--replace` rebuilds.
        out = pipeline.run({"router": {"sources": file_sources(batch)}}).get("writer") or {}
        chunks += out.get("documents_written", 0) or 0
        removed += out.get("documents_removed", 0)
        advance(INDEXING, len(batch), len(files))
    if isinstance(writer, SourceReplacingDocumentWriter):
        removed += remove_stale_chunks(store, [source_key(f) for f in emptied], [], writer.source_field)
    milvus_support.flush(store)
    return IndexResult(files=len(files), chunks=chunks, removed=removed, in_store=store.count_documents())
