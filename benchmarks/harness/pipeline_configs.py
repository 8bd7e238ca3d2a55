# SPDX-License-Identifier: Apache-2.0
"""`benchmarks/eval.py --pipeline X`: a loop pipeline YAML (a packaged name or a path) loaded as `ask` loads it, its
own retriever store filled with the QA set's paragraphs (MiniLM embeddings when it embeds queries)."""

import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from haystack import Pipeline, logging

from benchmarks.harness.retrieval_only_answerer import RetrievalOnlyAnswerer
from benchmarks.harness.runner import EvalConfig, eval_documents
from haystack_agentic.indexing.indexer import write_documents
from haystack_agentic.loop_loading import read_loop_yaml, retriever_store, set_store_uri, store_addresses
from haystack_agentic.pipelines.loop_builder import LoopOptions, build_loop, packaged_loop_name

logger = logging.getLogger(__name__)


def pipeline_config(
    spec: str, rows: Sequence[dict[str, Any]], out_dir: str | Path, with_answer: bool = True
) -> EvalConfig:
    """
    An `EvalConfig` (named after the YAML's stem) running the pipeline YAML `spec` over the paragraphs of all `rows`.

    :param out_dir: Where a Milvus Lite database for the run goes (a fresh file per call).
    :param with_answer: `False`: the answerer is replaced by a `RetrievalOnlyAnswerer` and the fallback disabled.
    :raises ValueError: If the YAML cannot be found, read or loaded, or is not a loop pipeline.
    """
    path = LoopOptions(pipeline=spec).pipeline_path()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    store_uri, loaded = None, path
    data = read_loop_yaml(path)
    if any(kind == "milvus" for kind, _ in store_addresses(data["components"])):
        store_uri = str((out / f"eval-{path.stem}-{uuid.uuid4().hex[:8]}.db").resolve())
        if packaged_loop_name(path) is None:  # `--uri` is for packaged pipelines: a copy of the YAML names the file
            set_store_uri(data["components"], store_uri)
            store_uri, loaded = None, out / f"eval-{path.stem}-{uuid.uuid4().hex[:8]}.yml"
            loaded.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    options = LoopOptions(pipeline=str(loaded), store_uri=store_uri, new_store=True, grounding="pipeline")
    pipeline = build_loop(options)
    if not with_answer:
        retrieval_only(pipeline)
    store = retriever_store(pipeline)
    if store is None:
        msg = f"{path}: its retriever has no document_store to fill with the QA set's paragraphs."
        raise ValueError(msg)
    embedder = None
    if "query_embedder" in dict(pipeline.walk()):
        from haystack_agentic.components.embedders.minilm_document_embedder import MiniLMDocumentEmbedder

        embedder = MiniLMDocumentEmbedder()
    write_documents(eval_documents(rows), store, embedder=embedder)
    retriever = pipeline.get_component("retriever")
    retriever_name = type(getattr(retriever, "retriever", retriever)).__name__
    return EvalConfig(path.stem, f"{path.name}: {retriever_name} over {type(store).__name__}", pipeline)


def retrieval_only(pipeline: Pipeline) -> None:
    """
    Turn a built loop pipeline into a retrieval-only one, in place: its `answerer` becomes a `RetrievalOnlyAnswerer`
    on the same connections and its `fallback` (if any) is off, so no run makes an answer LLM call. (The library's
    builder has no such option: only this harness needs it.)

    :raises ValueError: If the pipeline has no `answerer`.
    """
    if "answerer" not in dict(pipeline.walk()):
        msg = "A retrieval-only run replaces the pipeline's `answerer` component; this pipeline has none."
        raise ValueError(msg)
    edges = [
        (c["sender"], c["receiver"])
        for c in pipeline.to_dict()["connections"]
        if "answerer" in (c["sender"].split(".")[0], c["receiver"].split(".")[0])
    ]
    pipeline.remove_component("answerer")
    pipeline.add_component("answerer", RetrievalOnlyAnswerer())
    for sender, receiver in edges:
        pipeline.connect(sender, receiver)
    if "fallback" in dict(pipeline.walk()):
        pipeline.get_component("fallback").enabled = False
