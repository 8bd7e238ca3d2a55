# SPDX-License-Identifier: Apache-2.0
"""
Evaluate any loop pipeline YAML: a packaged one by name (`agentic_rag_embedded_dense`) or a file path.

`haystack-agentic eval --pipeline X` loads the YAML the way `ask` does (allow-listed modules, in-memory stores
isolated, Milvus stores pointed at a fresh Milvus Lite file under the output folder), writes the QA set's
paragraphs into the pipeline's own retriever store (with MiniLM embeddings when the pipeline embeds its queries),
and runs every question through it. It is built by `build_loop`; retrieval-only runs (`--no-answer`) build it with
a `RetrievalOnlyAnswerer` and the fallback off, so dense, hybrid and BM25 first hops compare in one command.

Usage example:
```python
from haystack_agentic.evaluation.pipeline_configs import pipeline_config
from haystack_agentic.evaluation.runner import run_eval
from haystack_agentic.datasets.hotpotqa import load_hotpotqa_questions

rows = load_hotpotqa_questions("examples/data/hotpotqa_dev_sample.jsonl")[:10]
config = pipeline_config("agentic_rag_embedded_dense", rows, "eval-out", with_answer=False)
print(run_eval(rows, [config], with_answer=False)["configs"][config.name]["summary"]["all_gold_recall"])
```
"""

import uuid
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from haystack import logging

from haystack_agentic.datasets.hotpotqa import hotpotqa_documents
from haystack_agentic.indexing.collections import COLLECTION_FIELD

logger = logging.getLogger(__name__)

def _documents(rows: Sequence[dict[str, Any]]) -> list[Any]:
    docs: dict[str, Any] = {}
    groups: dict[str | None, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(row.get("collection"), []).append(row)
    for collection, group in groups.items():
        for doc in hotpotqa_documents(group, title_in_content=True):
            if collection is not None:
                doc = replace(doc, meta={**doc.meta, COLLECTION_FIELD: collection})
            docs[doc.id] = doc
    return list(docs.values())


def pipeline_config(
    spec: str,
    rows: Sequence[dict[str, Any]],
    out_dir: str | Path,
    with_answer: bool = True,
    name: str | None = None,
) -> Any:
    """
    An `EvalConfig` running the pipeline YAML `spec` over `rows`' paragraphs.

    :param spec: A YAML path or a packaged pipeline name.
    :param rows: The QA rows whose paragraphs fill the pipeline's store (every row's, pooled).
    :param out_dir: Where a Milvus Lite database for the run goes (a fresh file per call).
    :param with_answer: `False`: the answerer is replaced by a `RetrievalOnlyAnswerer` and the fallback disabled.
    :param name: The configuration's name (default: the YAML's stem).
    :returns: The `EvalConfig`.
    :raises ValueError: If the YAML cannot be found, read or loaded, or is not a loop pipeline.
    """
    from haystack_agentic.evaluation.runner import EvalConfig
    from haystack_agentic.indexing.indexer import write_documents
    from haystack_agentic.pipelines.loop_builder import LoopOptions, build_loop
    from haystack_agentic.loop_loading import read_loop_yaml, retriever_store, store_addresses

    path = LoopOptions(pipeline=spec).pipeline_path()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    store_uri = None
    if any(kind == "milvus" for kind, _ in store_addresses(read_loop_yaml(path)["components"])):
        store_uri = str((out / f"eval-{path.stem}-{uuid.uuid4().hex[:8]}.db").resolve())
    options = LoopOptions(
        pipeline=str(path), store_uri=store_uri, retrieval_only=not with_answer, new_store=True, grounding="pipeline"
    )
    pipeline = build_loop(options)
    store = retriever_store(pipeline)
    if store is None:
        raise ValueError(f"{path}: its retriever has no document_store to fill with the QA set's paragraphs.")
    embedder = None
    if "query_embedder" in pipeline.graph.nodes:
        from haystack_agentic.components.embedders.minilm_document_embedder import MiniLMDocumentEmbedder

        embedder = MiniLMDocumentEmbedder()
    write_documents(_documents(rows), store, embedder=embedder)
    retriever = type(getattr(pipeline.get_component("retriever"), "retriever", pipeline.get_component("retriever")))
    description = f"{path.name}: {retriever.__name__} over {type(store).__name__}"
    return EvalConfig(name or path.stem, description, pipeline)
