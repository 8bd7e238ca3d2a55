# SPDX-License-Identifier: Apache-2.0
"""
The packaged loop pipelines, built in Python and written as the YAML files under `pipelines/`.

`python -m haystack_agentic.pipelines.default_pipelines [DIR]` rewrites the YAML files (default: the packaged directory)
as `packaged_yaml` writes them (non-default parameters only, with comments); a test checks the committed files
match what this module builds.

- `agentic_rag.yml`: `AgenticRouter` in `tools` mode driven by an OpenAI-compatible chat generator
  (`OPENAI_API_KEY`; `OPENAI_BASE_URL` for Ollama / vLLM / llama.cpp servers), in-memory BM25.
- `agentic_rag_json.yml`: the same in `json` mode, for models without tool calling.
- `agentic_rag_embedded.yml`: the offline default: `BridgeEntityRouter` (deterministic) with the packaged
  SmolLM2-135M writing the answer and a `ShortAnswerExtractor` keeping its short span; no API key, no server.
- Each of them checks the evidence before the final answer (`EvidenceChecker`, component `evidence`): the offline
  check in the embedded pipelines, the LLM as judge in the OpenAI-compatible ones; a run whose chunks do not
  support an answer searches again while the budget allows, then ends `gave_up` saying so.
- Each of them ends with an `HHEMGrounder` stage (sentence-level grounding, local HHEM weights only: without
  them grounding is skipped with the reason in the result). `agentic_rag_ungrounded.yml` and
  `agentic_rag_embedded_ungrounded.yml` are the same loops without that stage, for users who do not want its cost.

Each file also declares the `inputs` (`query`) and `outputs` (the result's keys) that `hayhooks` needs to serve a YAML
pipeline (`hayhooks pipeline deploy-yaml`, `hayhooks run --pipelines-dir`); Haystack ignores those keys.
"""

import sys
import tempfile
from pathlib import Path
from typing import Any

from haystack import Pipeline
from haystack.components.generators.chat import OpenAIChatGenerator
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.document_stores.in_memory import InMemoryDocumentStore

from haystack_agentic.components.routers.agentic_router import AgenticRouter
from haystack_agentic.components.generators.answerer import Answerer
from haystack_agentic.components.routers.bridge_entity_router import BridgeEntityRouter
from haystack_agentic.components.evidence.evidence_checker import EvidenceChecker
from haystack_agentic.components.extractors.short_answer_extractor import ShortAnswerExtractor
from haystack_agentic.components.generators.embedded_chat_generator import EmbeddedChatGenerator
from haystack_agentic.components.generators.fallback_synthesizer import FallbackSynthesizer
from haystack_agentic.components.grounders.hhem_grounder import HHEMGrounder
from haystack_agentic.components.loop.loop_controller import LoopController
from haystack_agentic.components.loop.loop_result_builder import RESULT_TYPES
from haystack_agentic.pipelines.loop_pipeline import build_loop_pipeline
from haystack_agentic.pipelines.packaged_yaml import packaged_yaml
from haystack_agentic.resources import pipelines_dir
from haystack_agentic.settings import DEFAULT_OPENAI_MODEL
from haystack_agentic.components.retrievers.safe_retriever import SafeRetriever
from haystack_agentic.document_stores.sparse_bm25_document_store import SparseBM25DocumentStore

#: The in-memory store index the packaged pipelines share (in-memory stores with one index share storage).
INDEX_NAME = "haystack-agentic"

#: System message and answer prompt for SmolLM2-135M (it still tends to answer in a full sentence: the
#: `ShortAnswerExtractor` after the answerer keeps the span).
EMBEDDED_SYSTEM_PROMPT = (
    "You answer questions from documents. Give the shortest possible answer, a few words, no explanation."
)
EMBEDDED_GENERATE_PROMPT = """\
Documents:
{{ chunks }}

Question: {{ question }}
Short answer:"""


#: The inputs `hayhooks` exposes for a packaged YAML (hayhooks makes every declared input required, so only `query`).
HAYHOOKS_INPUTS = {"query": "controller.query"}

#: The outputs `hayhooks` returns for a packaged YAML: the loop's result, one key per output socket of `result`
#: (plain hayhooks answers `{"result": {"result": {"answer": ..., "terminated_by": ..., ...}}}`: its envelope, then
#: the component's name).
HAYHOOKS_OUTPUTS = {key: f"result.{key}" for key in RESULT_TYPES}


class HayhooksPipeline(Pipeline):
    """
    A `Pipeline` whose serialised form also declares the `inputs`/`outputs` that hayhooks serves.

    `Pipeline.loads` ignores the two extra keys, so the YAML stays a plain Haystack pipeline.
    """

    hayhooks_inputs: dict[str, str] = HAYHOOKS_INPUTS
    hayhooks_outputs: dict[str, str] = HAYHOOKS_OUTPUTS

    def to_dict(self) -> dict[str, Any]:
        """
        Serialize the pipeline, with hayhooks' `inputs` and `outputs` declarations.

        :returns: `Pipeline.to_dict()` plus `inputs` and `outputs`.
        """
        return {**super().to_dict(), "inputs": dict(self.hayhooks_inputs), "outputs": dict(self.hayhooks_outputs)}


def servable(pipeline: Pipeline) -> HayhooksPipeline:
    """
    Make a built loop pipeline serialise with hayhooks' `inputs`/`outputs` declarations.

    :param pipeline: A pipeline from `build_loop_pipeline` (input `controller.query`, outputs under `result`).
    :returns: The same pipeline object, as a `HayhooksPipeline`.
    """
    pipeline.__class__ = HayhooksPipeline  # same state, one overridden method: no copy of the graph needed
    return pipeline


def default_grounder() -> HHEMGrounder:
    """
    The grounder of the packaged pipelines: HHEM-2.1-Open from local files / the Hub cache only (no download at run
    time). Without the weights every run skips grounding with the reason in `metadata["grounding_skipped"]`.

    :returns: The grounder (not warmed up).
    """
    return HHEMGrounder(local_files_only=True)


#: Characters of each chunk the embedded answer and fallback prompts show (SmolLM2-135M's short context).
EMBEDDED_CHUNK_CHARS = 700


def embedded_answer_stages(
    chat_generator: Any, max_chunks: int, chunks_per_search: int | None = None
) -> dict[str, Any]:
    """
    The answerer of the embedded pipelines and `eval`'s offline configurations (SmolLM2's prompts, short chunks)
    and, since the 135M model answers in sentences, the `ShortAnswerExtractor` that keeps the span it adds.

    :returns: `build_loop_pipeline`'s `answerer` and `extractor` arguments.
    """
    answerer = Answerer(
        chat_generator=chat_generator, system_prompt=EMBEDDED_SYSTEM_PROMPT, generate_prompt=EMBEDDED_GENERATE_PROMPT,
        max_chunks=max_chunks, chunk_chars=EMBEDDED_CHUNK_CHARS, chunks_per_search=chunks_per_search,
        stream_answer=False,  # the extractor streams the answer
    )  # fmt: skip
    return {"answerer": answerer, "extractor": ShortAnswerExtractor(max_chunks, chunks_per_search)}


def embedded_fallback(chat_generator: Any, max_chunks: int) -> FallbackSynthesizer:
    """The fallback of the embedded pipelines (disabled without a `chat_generator`): short chunks, as the answerer."""
    return FallbackSynthesizer(
        chat_generator=chat_generator, max_chunks=max_chunks, chunk_chars=EMBEDDED_CHUNK_CHARS,
        enabled=chat_generator is not None,
    )  # fmt: skip


def embedded_pipeline(
    grounded: bool = True, store: Any = None, retriever: Any = None, query_embedder: Any = None
) -> Pipeline:
    """
    The offline default: deterministic bridge-entity routing, SmolLM2-135M answers, in-memory BM25 over 6 chunks.

    :param grounded: Add the grounding stage.
    :param store: The document store (default: a `SparseBM25DocumentStore`, Haystack's in-memory store with
        sparse-matrix BM25, index `INDEX_NAME`); the router reads its titles.
    :param retriever: The retriever over `store` (default: `InMemoryBM25Retriever`).
    :param query_embedder: A text embedder for dense/hybrid retrievers, or `None`.
    :returns: The pipeline (not warmed up; the model loads on first run).
    """
    store = store if store is not None else SparseBM25DocumentStore(index=INDEX_NAME)
    router = BridgeEntityRouter(document_store=store, first_top_k=4, follow_up_top_k=1, max_follow_ups=2)
    return build_loop_pipeline(
        router,
        retriever if retriever is not None else SafeRetriever(InMemoryBM25Retriever(document_store=store)),
        query_embedder=query_embedder,
        # One turn more than the policy's searches and answer: room for one answer the evidence check refuses.
        controller=LoopController(max_iterations=router.max_follow_ups + 3, chunk_cap=router.max_chunks),
        **embedded_answer_stages(EmbeddedChatGenerator(), router.max_chunks, chunks_per_search=2),
        fallback=embedded_fallback(EmbeddedChatGenerator(), router.max_chunks),
        evidence_checker=EvidenceChecker(),
        grounder=default_grounder() if grounded else None,
        metadata={
            "llm": "SmolLM2-135M-Instruct (embedded, offline)",
            "policy": "bridge-entity (deterministic: search the question, then bridge entities)",
        },
    )


#: Where the packaged Milvus pipeline's Milvus Lite file is (relative to the working directory; `haystack-agentic
#: ask --backend milvus` sets it to the user cache, `--uri` to a file or a Milvus server URI).
MILVUS_URI = "haystack_agentic_milvus.db"


def _milvus_store_for_yaml(bm25: bool = True) -> Any:
    """A Milvus store whose YAML points at MILVUS_URI, built against a throw-away Milvus Lite file."""
    from haystack_agentic.indexing.document_stores import milvus_document_store  # noqa: PLC0415

    # Milvus connects in __init__: build against a scratch file, then point the serialised store at MILVUS_URI.
    with tempfile.TemporaryDirectory() as scratch:
        store = milvus_document_store(str(Path(scratch) / "build.db"), bm25=bm25)
        store.client.close()
    store.connection_args = {"uri": MILVUS_URI}
    return store


def indexing_pipelines() -> dict[str, Pipeline]:
    """
    The packaged YAML indexing pipelines (files -> converters -> cleaner -> splitter -> MiniLM -> store).

    Run one with `haystack-agentic index PATH --pipeline pipelines/indexing_milvus.yml [--uri ...]`, or in Python
    with `{"router": {"sources": [paths]}}`. They write with `DuplicatePolicy.OVERWRITE` (re-indexing overwrites).

    :returns: `{"indexing_milvus.yml": ..., "indexing_weaviate.yml": ...}`.
    """
    from haystack_agentic.indexing.document_stores import weaviate_document_store  # noqa: PLC0415
    from haystack_agentic.indexing.indexing_pipeline import build_indexing_pipeline  # noqa: PLC0415
    from haystack_agentic.components.embedders.minilm_document_embedder import MiniLMDocumentEmbedder  # noqa: PLC0415

    return {
        "indexing_milvus.yml": build_indexing_pipeline(_milvus_store_for_yaml(), MiniLMDocumentEmbedder()),
        "indexing_weaviate.yml": build_indexing_pipeline(
            weaviate_document_store(), MiniLMDocumentEmbedder()
        ),
    }


def embedded_milvus_pipeline() -> Pipeline:
    """
    The offline default on Milvus (Lite for a file URI, or a server): hybrid retrieval (dense MiniLM + BM25, RRF).

    :returns: The pipeline; the store connects when the pipeline is built or loaded.
    """
    from milvus_haystack import MilvusHybridRetriever  # noqa: PLC0415 - optional dependency

    from haystack_agentic.components.embedders.minilm_text_embedder import MiniLMTextEmbedder  # noqa: PLC0415

    store = _milvus_store_for_yaml()
    return embedded_pipeline(
        store=store, retriever=SafeRetriever(MilvusHybridRetriever(document_store=store)), query_embedder=MiniLMTextEmbedder()
    )


def embedded_milvus_dense_pipeline() -> Pipeline:
    """
    The offline default on Milvus with dense retrieval only (MiniLM): for Milvus servers older than 2.5, which have
    no BM25 (`haystack-agentic ask --backend milvus` picks it for a collection without a BM25 field).

    :returns: The pipeline; the store connects when the pipeline is built or loaded.
    """
    from milvus_haystack import MilvusEmbeddingRetriever  # noqa: PLC0415 - optional dependency

    from haystack_agentic.components.embedders.minilm_text_embedder import MiniLMTextEmbedder  # noqa: PLC0415

    store = _milvus_store_for_yaml(bm25=False)
    retriever = SafeRetriever(MilvusEmbeddingRetriever(document_store=store))
    return embedded_pipeline(store=store, retriever=retriever, query_embedder=MiniLMTextEmbedder())


def embedded_dense_pipeline() -> Pipeline:
    """
    The offline default with in-memory dense retrieval (MiniLM embeddings; index with `index --embed`).

    :returns: The pipeline.
    """
    from haystack.components.retrievers.in_memory import InMemoryEmbeddingRetriever  # noqa: PLC0415

    from haystack_agentic.components.embedders.minilm_text_embedder import MiniLMTextEmbedder  # noqa: PLC0415

    store = InMemoryDocumentStore(index=INDEX_NAME)
    return embedded_pipeline(
        store=store,
        retriever=SafeRetriever(InMemoryEmbeddingRetriever(document_store=store)),
        query_embedder=MiniLMTextEmbedder(),
    )


def embedded_weaviate_pipeline() -> Pipeline:
    """
    The offline default on a Weaviate server: hybrid retrieval (dense MiniLM + BM25).

    :returns: The pipeline; the store connects on warm-up (an unreachable server fails there, with its URL).
    """
    from haystack_integrations.components.retrievers.weaviate import WeaviateHybridRetriever  # noqa: PLC0415

    from haystack_agentic.indexing.document_stores import weaviate_document_store  # noqa: PLC0415
    from haystack_agentic.components.embedders.minilm_text_embedder import MiniLMTextEmbedder  # noqa: PLC0415

    store = weaviate_document_store()
    return embedded_pipeline(
        store=store, retriever=SafeRetriever(WeaviateHybridRetriever(document_store=store)), query_embedder=MiniLMTextEmbedder()
    )


#: `max_tokens` of each LLM role in the packaged OpenAI pipelines, sized to what the role writes so that a CPU server
#: finishes within the 60 s timeout, and a rambling small model stops: the
#: controller's tool calls with a short answer (tools mode) or one JSON decision (json mode: the schema caps `query`
#: at 120 and `reasoning` at 160 characters, about 80 tokens), the answer and fallback roles a short answer, the
#: evidence judge one JSON verdict. A cloud model with long answers: raise them in the YAML or with `--max-tokens`.
ROLE_MAX_TOKENS = {"controller": 256, "controller_json": 160, "answer": 256, "fallback": 256, "evidence": 128}


def openai_generator(role: str) -> OpenAIChatGenerator:
    """
    The packaged OpenAI-compatible chat generator of one LLM role: the client's own retries are off (`max_retries=0`)
    because the loop retries transient failures itself (with backoff, see `haystack_agentic.llm.calls.call_generator`),
    and stacked retries make an unreachable server slow to report. Its replies are bounded by the role's
    `max_tokens` (`ROLE_MAX_TOKENS`; change it in the YAML's `generation_kwargs`).

    :param role: `controller`, `controller_json` (the controller in json mode), `answer`, `fallback` or `evidence`.
    :returns: The generator (the key is read from `OPENAI_API_KEY` on warm-up).
    """
    return OpenAIChatGenerator(
        model=DEFAULT_OPENAI_MODEL, max_retries=0, timeout=60.0, generation_kwargs={"max_tokens": ROLE_MAX_TOKENS[role]}
    )


def openai_pipeline(mode: str = "tools", grounded: bool = True) -> Pipeline:
    """
    The LLM-routed loop on an OpenAI-compatible endpoint, in-memory BM25.

    :param mode: `"tools"` (native tool calling) or `"json"` (the JSON routing protocol).
    :returns: The pipeline. The API key is read from `OPENAI_API_KEY` when the generator warms up.
    """
    store = SparseBM25DocumentStore(index=INDEX_NAME)
    controller_llm = openai_generator("controller_json" if mode == "json" else "controller")
    # In tools mode the controller's answer is final unless a separate answer LLM is configured; json mode
    # needs an answer LLM to write the answer from the chunks: the controller's.
    answer_llm = openai_generator("answer") if mode == "json" else None
    return build_loop_pipeline(
        AgenticRouter(chat_generator=controller_llm, mode=mode, temperature=0.0),
        SafeRetriever(InMemoryBM25Retriever(document_store=store)),
        controller=LoopController(),
        answerer=Answerer(chat_generator=answer_llm, temperature=0.0),
        fallback=FallbackSynthesizer(chat_generator=openai_generator("fallback"), temperature=0.0),
        evidence_checker=EvidenceChecker(chat_generator=openai_generator("evidence")),
        grounder=default_grounder() if grounded else None,
        metadata={"llm": f"OpenAI-compatible ({DEFAULT_OPENAI_MODEL})", "policy": f"LLM router ({mode} mode)"},
    )


def default_pipelines() -> dict[str, Pipeline]:
    """
    Every packaged pipeline by file name.

    :returns: `{"agentic_rag.yml": ..., "agentic_rag_json.yml": ..., "agentic_rag_embedded.yml": ...}` (the loop
        pipelines, each declaring hayhooks' `inputs`/`outputs` when serialised) and the indexing pipelines.
    """
    return {
        "agentic_rag.yml": servable(openai_pipeline("tools")),
        "agentic_rag_json.yml": servable(openai_pipeline("json")),
        "agentic_rag_embedded.yml": servable(embedded_pipeline()),
        "agentic_rag_embedded_dense.yml": servable(embedded_dense_pipeline()),
        "agentic_rag_embedded_milvus.yml": servable(embedded_milvus_pipeline()),
        "agentic_rag_embedded_milvus_dense.yml": servable(embedded_milvus_dense_pipeline()),
        "agentic_rag_embedded_weaviate.yml": servable(embedded_weaviate_pipeline()),
        "agentic_rag_ungrounded.yml": servable(openai_pipeline("tools", grounded=False)),
        "agentic_rag_embedded_ungrounded.yml": servable(embedded_pipeline(grounded=False)),
        **indexing_pipelines(),
    }


def write_pipelines(directory: Path | None = None) -> list[Path]:
    """
    Write the packaged pipelines as YAML.

    :param directory: Where to write (default: the packaged pipelines directory).
    :returns: The paths written.
    """
    directory = Path(directory) if directory else pipelines_dir()
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, pipeline in default_pipelines().items():
        path = directory / name
        path.write_text(packaged_yaml(pipeline, name), encoding="utf-8")
        written.append(path)
    return written


if __name__ == "__main__":
    for written_path in write_pipelines(Path(sys.argv[1]) if len(sys.argv) > 1 else None):
        print(written_path)
