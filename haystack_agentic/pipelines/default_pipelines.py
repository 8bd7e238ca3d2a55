# SPDX-License-Identifier: Apache-2.0
"""
The packaged pipelines, built in Python.

`python -m haystack_agentic.pipelines.default_pipelines [DIR]` (`make pipelines`) writes them as the YAML files under
`pipelines/`.
"""

import sys
import tempfile
from pathlib import Path
from typing import Any

from haystack import Pipeline
from haystack.components.generators.chat import OpenAIChatGenerator
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever, InMemoryEmbeddingRetriever
from haystack.document_stores.in_memory import InMemoryDocumentStore

from haystack_agentic.components.evidence.evidence_checker import EvidenceChecker
from haystack_agentic.components.extractors.short_answer_extractor import ShortAnswerExtractor
from haystack_agentic.components.generators.answerer import Answerer
from haystack_agentic.components.generators.embedded_chat_generator import EmbeddedChatGenerator
from haystack_agentic.components.generators.fallback_synthesizer import FallbackSynthesizer
from haystack_agentic.components.grounders.hhem_grounder import HHEMGrounder
from haystack_agentic.components.loop.loop_controller import LoopController
from haystack_agentic.components.loop.loop_result_builder import RESULT_TYPES
from haystack_agentic.components.retrievers.safe_retriever import SafeRetriever
from haystack_agentic.components.routers.agentic_router import AgenticRouter
from haystack_agentic.components.routers.bridge_entity_router import BridgeEntityRouter
from haystack_agentic.document_stores.sparse_bm25_document_store import SparseBM25DocumentStore
from haystack_agentic.pipelines.loop_pipeline import build_loop_pipeline
from haystack_agentic.pipelines.packaged_yaml import packaged_yaml
from haystack_agentic.resources import pipelines_dir
from haystack_agentic.settings import DEFAULT_OPENAI_MODEL

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
#: Characters of each chunk the embedded answer and fallback prompts show (SmolLM2-135M's short context).
EMBEDDED_CHUNK_CHARS = 700

#: What hayhooks serves of a packaged loop YAML: the input `query` (hayhooks makes every declared input required)
#: and one output per key of the loop's result (answered as `{"result": {"result": {...}}}`).
HAYHOOKS_INPUTS = {"query": "controller.query"}
HAYHOOKS_OUTPUTS = {key: f"result.{key}" for key in RESULT_TYPES}

#: Where the packaged Milvus pipelines' Milvus Lite file is (relative to the working directory; `ask --backend
#: milvus` sets it to the user cache, `--uri` to a file or a server URI).
MILVUS_URI = "haystack_agentic_milvus.db"

#: `max_tokens` of each LLM role in the packaged OpenAI pipelines, sized to what the role writes so that a CPU server
#: finishes within the 60 s timeout and a rambling small model stops (json mode: the schema caps `query` at 120 and
#: `reasoning` at 160 characters, about 80 tokens). Raise them in the YAML or with `--max-tokens`.
ROLE_MAX_TOKENS = {"controller": 256, "controller_json": 160, "answer": 256, "fallback": 256}


#: Turns of the packaged LLM-routed loops, as the offline default's: the question's free search, up to three
#: searches the model picks (HotpotQA questions take two hops, MuSiQue's up to four), and one turn for an answer
#: the evidence check refuses. With a small local model each turn costs tens of seconds; raise it in the YAML or
#: with `--max-iterations`.
LLM_MAX_ITERATIONS = 5


class HayhooksPipeline(Pipeline):
    """A `Pipeline` whose `to_dict()` also declares hayhooks' `inputs` and `outputs` (`Pipeline.loads` ignores them)."""

    def to_dict(self) -> dict[str, Any]:
        """`Pipeline.to_dict()` plus `inputs` and `outputs`."""
        return {**super().to_dict(), "inputs": dict(HAYHOOKS_INPUTS), "outputs": dict(HAYHOOKS_OUTPUTS)}


def servable(pipeline: Pipeline) -> HayhooksPipeline:
    """The same loop pipeline object as a `HayhooksPipeline` (same state, one overridden method: no copy)."""
    pipeline.__class__ = HayhooksPipeline
    return pipeline


def embedded_answer_stages(
    chat_generator: Any, max_chunks: int, chunks_per_search: int | None = None
) -> dict[str, Any]:
    """
    The `answerer` and `extractor` of the embedded (SmolLM2) pipelines.

    `build_loop_pipeline`'s `answerer` (SmolLM2's prompts, short chunks) and `extractor` (the 135M model answers in
    sentences: a `ShortAnswerExtractor` keeps the span) of the embedded pipelines and `eval`'s offline configs.
    """
    answerer = Answerer(
        chat_generator=chat_generator,
        system_prompt=EMBEDDED_SYSTEM_PROMPT,
        generate_prompt=EMBEDDED_GENERATE_PROMPT,
        max_chunks=max_chunks,
        chunk_chars=EMBEDDED_CHUNK_CHARS,
        chunks_per_search=chunks_per_search,
        stream_answer=False,  # the extractor streams the answer
    )
    return {"answerer": answerer, "extractor": ShortAnswerExtractor(max_chunks, chunks_per_search)}


def embedded_fallback(chat_generator: Any, max_chunks: int) -> FallbackSynthesizer:
    """The fallback of the embedded pipelines (disabled without a `chat_generator`): short chunks, as the answerer."""
    return FallbackSynthesizer(
        chat_generator=chat_generator,
        max_chunks=max_chunks,
        chunk_chars=EMBEDDED_CHUNK_CHARS,
        enabled=chat_generator is not None,
    )


def embedded_pipeline(
    grounded: bool = True, store: Any = None, retriever_class: Any = None, query_embedder: Any = None
) -> Pipeline:
    """
    Build the offline default loop pipeline.

    The offline default: bridge-entity routing, SmolLM2-135M answers, 6 chunks, over in-memory BM25 (a
    `SparseBM25DocumentStore`) or `store` with `retriever_class` and `query_embedder`; local-only HHEM (`grounded`).
    """
    store = store if store is not None else SparseBM25DocumentStore(index=INDEX_NAME)
    router = BridgeEntityRouter(document_store=store, first_top_k=4, follow_up_top_k=1, max_follow_ups=2)
    return build_loop_pipeline(
        router,
        SafeRetriever((retriever_class or InMemoryBM25Retriever)(document_store=store)),
        query_embedder=query_embedder,
        # One turn more than the policy's searches and answer: room for one answer the evidence check refuses.
        controller=LoopController(max_iterations=router.max_follow_ups + 3, chunk_cap=router.max_chunks),
        **embedded_answer_stages(EmbeddedChatGenerator(), router.max_chunks, chunks_per_search=2),
        fallback=embedded_fallback(EmbeddedChatGenerator(), router.max_chunks),
        evidence_checker=EvidenceChecker(),
        grounder=HHEMGrounder(local_files_only=True) if grounded else None,
        metadata={
            "llm": "SmolLM2-135M-Instruct (embedded, offline)",
            "policy": "bridge-entity (deterministic: search the question, then bridge entities)",
        },
    )


def _dense(store: Any, retriever_class: Any) -> Pipeline:
    """The offline default over `store` with a MiniLM query embedder (dense or hybrid retrieval)."""
    from haystack_agentic.components.embedders.minilm_text_embedder import MiniLMTextEmbedder  # noqa: PLC0415

    pipeline = embedded_pipeline(store=store, retriever_class=retriever_class, query_embedder=MiniLMTextEmbedder())
    return servable(pipeline)


def _milvus_store_for_yaml(bm25: bool = True) -> Any:
    """A Milvus store whose YAML points at MILVUS_URI (Milvus connects in `__init__`: built on a scratch file)."""
    from haystack_agentic.indexing.document_stores import milvus_document_store  # noqa: PLC0415

    with tempfile.TemporaryDirectory() as scratch:
        store = milvus_document_store(str(Path(scratch) / "build.db"), bm25=bm25)
        store.client.close()
    store.connection_args = {"uri": MILVUS_URI}
    return store


def openai_generator(role: str) -> OpenAIChatGenerator:
    """The packaged chat generator of an LLM role (a key of `ROLE_MAX_TOKENS`); no own retries: `llm.calls` retries."""
    return OpenAIChatGenerator(
        model=DEFAULT_OPENAI_MODEL, max_retries=0, timeout=60.0, generation_kwargs={"max_tokens": ROLE_MAX_TOKENS[role]}
    )


def openai_pipeline(mode: str = "tools", grounded: bool = True) -> Pipeline:
    """The LLM-routed loop (`mode` `tools` or `json`) on an OpenAI-compatible endpoint, in-memory BM25."""
    store = SparseBM25DocumentStore(index=INDEX_NAME)
    controller_llm = openai_generator("controller_json" if mode == "json" else "controller")
    # In tools mode the controller's answer is final; json mode needs an answer LLM to write it from the chunks.
    answer_llm = openai_generator("answer") if mode == "json" else None
    return build_loop_pipeline(
        AgenticRouter(chat_generator=controller_llm, mode=mode, temperature=0.0),
        SafeRetriever(InMemoryBM25Retriever(document_store=store, top_k=5)),
        controller=LoopController(max_iterations=LLM_MAX_ITERATIONS),
        answerer=Answerer(chat_generator=answer_llm, temperature=0.0),
        fallback=FallbackSynthesizer(chat_generator=openai_generator("fallback"), temperature=0.0),
        # The offline check, not an LLM judge: no call per answer, and a small model's verdicts contradicted its own
        # reasons (issue 38's measurement with Qwen2.5-Coder-1.5B). Give it a chat_generator for an LLM judge.
        evidence_checker=EvidenceChecker(),
        grounder=HHEMGrounder(local_files_only=True) if grounded else None,
        metadata={"llm": f"OpenAI-compatible ({DEFAULT_OPENAI_MODEL})", "policy": f"LLM router ({mode} mode)"},
    )


def default_pipelines() -> dict[str, Pipeline]:
    """Every packaged pipeline by file name: the loop pipelines (as `HayhooksPipeline`s) and the indexing ones."""
    from haystack_integrations.components.retrievers.weaviate import WeaviateHybridRetriever  # noqa: PLC0415
    from milvus_haystack import MilvusEmbeddingRetriever, MilvusHybridRetriever  # noqa: PLC0415

    from haystack_agentic.components.embedders.minilm_document_embedder import MiniLMDocumentEmbedder  # noqa: PLC0415
    from haystack_agentic.indexing.document_stores import weaviate_document_store  # noqa: PLC0415
    from haystack_agentic.indexing.indexing_pipeline import build_indexing_pipeline  # noqa: PLC0415

    return {
        "agentic_rag.yml": servable(openai_pipeline("tools")),
        "agentic_rag_json.yml": servable(openai_pipeline("json")),
        "agentic_rag_embedded.yml": servable(embedded_pipeline()),
        "agentic_rag_embedded_dense.yml": _dense(InMemoryDocumentStore(index=INDEX_NAME), InMemoryEmbeddingRetriever),
        "agentic_rag_embedded_milvus.yml": _dense(_milvus_store_for_yaml(), MilvusHybridRetriever),
        # for Milvus servers older than 2.5 (no BM25): `ask --backend milvus` picks it for them
        "agentic_rag_embedded_milvus_dense.yml": _dense(_milvus_store_for_yaml(bm25=False), MilvusEmbeddingRetriever),
        "agentic_rag_embedded_weaviate.yml": _dense(weaviate_document_store(), WeaviateHybridRetriever),
        "agentic_rag_ungrounded.yml": servable(openai_pipeline("tools", grounded=False)),
        "agentic_rag_embedded_ungrounded.yml": servable(embedded_pipeline(grounded=False)),
        "indexing_milvus.yml": build_indexing_pipeline(_milvus_store_for_yaml(), MiniLMDocumentEmbedder()),
        "indexing_weaviate.yml": build_indexing_pipeline(weaviate_document_store(), MiniLMDocumentEmbedder()),
    }


def write_pipelines(directory: Path | None = None) -> list[Path]:
    """Write the packaged pipelines as YAML into `directory` (default: the packaged directory); returns the paths."""
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
        sys.stdout.write(f"{written_path}\n")
