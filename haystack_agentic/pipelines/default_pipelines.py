# SPDX-License-Identifier: Apache-2.0
"""
The packaged pipelines, built in Python.

`python -m haystack_agentic.pipelines.default_pipelines [DIR]` (`make pipelines`) writes them as the YAML files under
`pipelines/`.
"""

import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from haystack import Pipeline
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever, InMemoryEmbeddingRetriever
from haystack.document_stores.in_memory import InMemoryDocumentStore
from haystack.utils import Secret

from haystack_agentic.components.evidence.evidence_checker import EvidenceChecker
from haystack_agentic.components.extractors.short_answer_extractor import ShortAnswerExtractor
from haystack_agentic.components.generators.answerer import Answerer
from haystack_agentic.components.generators.embedded_chat_generator import EmbeddedChatGenerator
from haystack_agentic.components.generators.fallback_synthesizer import FallbackSynthesizer
from haystack_agentic.components.grounders.hhem_grounder import HHEMGrounder
from haystack_agentic.components.loop.loop_controller import LoopController
from haystack_agentic.components.retrievers.safe_retriever import SafeRetriever
from haystack_agentic.components.routers.bridge_entity_router import BridgeEntityRouter
from haystack_agentic.document_stores.sparse_bm25_document_store import SparseBM25DocumentStore
from haystack_agentic.pipelines.loop_pipeline import build_loop_pipeline
from haystack_agentic.pipelines.packaged_yaml import packaged_yaml
from haystack_agentic.resources import pipelines_dir
from haystack_agentic.settings import DEFAULT_OPENAI_MODEL, ENV_OPENAI_API_KEY

if TYPE_CHECKING:  # the OpenAI client and the LLM router are imported by the pipelines that use them
    from haystack.components.generators.chat import OpenAIChatGenerator

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

#: Where the packaged Milvus pipelines' Milvus Lite file is (relative to the working directory; `ask --backend
#: milvus` sets it to the user cache, `--uri` to a file or a server URI).
MILVUS_URI = "haystack_agentic_milvus.db"

#: `max_tokens` of each LLM role in the packaged OpenAI pipelines, sized to what the role writes so that a CPU server
#: finishes within the 60 s timeout and a rambling small model stops (json mode: the schema caps `query` at 120 and
#: `reasoning` at 160 characters, about 80 tokens). Raise them in the YAML or with `--max-tokens`.
ROLE_MAX_TOKENS = {"controller": 256, "controller_json": 160, "answer": 256, "fallback": 256}


#: Turns of the packaged LLM-routed loops: the bridge-entity policy's free searches (the question and up to two
#: entities), then the model's turns (search more or answer). With a small local model each turn costs tens of
#: seconds; raise it in the YAML or with `--max-iterations`.
LLM_MAX_ITERATIONS = 5

#: Chunks the json-mode answer LLM reads (the Answerer's default is 6): the policy's searches and the model's bring
#: up to ~12. Replayed on the same searches, Qwen2.5-Coder-1.5B answered better from 8 than from 6 (docs/benchmarks.md,
#: issue 38, fourth session: HotpotQA F1 0.519 vs 0.494, MuSiQue 0.251 vs 0.242).
JSON_ANSWER_CHUNKS = 8
#: The json-mode answer reads the best 3 chunks of each search, in search order, not the run's best 8 by score: BM25
#: scores of different queries do not compare (a long query outscores a bridge entity's page), and the page a hop
#: reached is what the answer needs. Replayed on the exact chunks of the fifth session's runs, Qwen2.5-Coder-1.5B
#: scored HotpotQA F1 0.554 with 3 per search, 0.499 with 2, 0.510 by score (docs/benchmarks.md, issue 38, sixth
#: session).
JSON_ANSWER_CHUNKS_PER_SEARCH = 3


@dataclass(frozen=True)
class LLMSettings:
    """
    What the LLM roles of a packaged loop pipeline are built with; `None` keeps each role's own setting.

    ### Usage example
    ```python
    pipeline = openai_pipeline("tools", llm=LLMSettings(api_base_url="http://127.0.0.1:8080/v1", timeout=300.0))
    ```

    :param model: Model of every `OpenAIChatGenerator`. Default: `settings.DEFAULT_OPENAI_MODEL`.
    :param api_base_url: Base URL of every `OpenAIChatGenerator` (a local server, e.g. Ollama or llama.cpp).
    :param api_key: Key of every `OpenAIChatGenerator` (`None`: its default, `$OPENAI_API_KEY`).
    :param timeout: Seconds one LLM call of any role (and its chat generator's HTTP client) may take.
    :param max_tokens: Most tokens one LLM reply of any role may have.
    :param context_tokens: The LLM server's context size (llama.cpp's `/props`): the router's prompt budget fits it.
    """

    model: str = DEFAULT_OPENAI_MODEL
    api_base_url: str | None = None
    api_key: Secret | None = None
    timeout: float | None = None
    max_tokens: int | None = None
    context_tokens: int | None = None

    def role(self, timeout: bool = True) -> dict[str, Any]:
        """
        Give an LLM role the run's limits.

        :param timeout: `False` for a role without a `timeout` parameter (`LLMJudgeGrounder`).
        :returns: The role's keyword arguments for the run's seconds (`timeout`) and tokens (`generation_kwargs`) per
            call; none for a setting left `None`.
        """
        kwargs: dict[str, Any] = {}
        if timeout and self.timeout is not None:
            kwargs["timeout"] = self.timeout
        if self.max_tokens is not None:
            kwargs["generation_kwargs"] = {"max_tokens": self.max_tokens}
        return kwargs

    def router_budget(self) -> dict[str, Any]:
        """The router's `context_budget_tokens` keyword argument fitting `context_tokens` (none without it)."""
        if not self.context_tokens:
            return {}
        from haystack_agentic.components.routers.agentic_router import DEFAULT_CONTEXT_BUDGET_TOKENS  # noqa: PLC0415
        from haystack_agentic.llm.server_info import ServerInfo  # noqa: PLC0415

        return {
            "context_budget_tokens": ServerInfo(n_ctx=self.context_tokens).prompt_budget(DEFAULT_CONTEXT_BUDGET_TOKENS)
        }

    def openai_generator(self, role: str) -> "OpenAIChatGenerator":
        """
        Build the chat generator of an LLM role (a key of `ROLE_MAX_TOKENS`); no own retries: `llm.calls` retries.

        Its HTTP client's timeout is `timeout` (default 60 s), its `max_tokens` is `max_tokens` (default: the role's).
        """
        from haystack.components.generators.chat import OpenAIChatGenerator  # noqa: PLC0415

        return OpenAIChatGenerator(
            api_key=self.api_key or Secret.from_env_var(ENV_OPENAI_API_KEY),
            model=self.model,
            api_base_url=self.api_base_url,
            max_retries=0,
            timeout=self.timeout if self.timeout is not None else 60.0,
            generation_kwargs={"max_tokens": self.max_tokens or ROLE_MAX_TOKENS[role]},
        )

    def embedded_generator(self) -> EmbeddedChatGenerator:
        """The packaged SmolLM2 chat generator, its reply capped at `max_tokens` when given."""
        return EmbeddedChatGenerator(generation_kwargs={"max_tokens": self.max_tokens} if self.max_tokens else None)


def embedded_answer_stages(
    chat_generator: Any, max_chunks: int, chunks_per_search: int | None = None, llm: LLMSettings | None = None
) -> dict[str, Any]:
    """
    The `answerer` and `extractor` of the embedded (SmolLM2) pipelines.

    `build_loop_pipeline`'s `answerer` (SmolLM2's prompts, short chunks, `llm`'s limits) and `extractor` (the 135M
    model answers in sentences: a `ShortAnswerExtractor` keeps the span) of the embedded pipelines and `eval`'s
    offline configs.
    """
    answerer = Answerer(
        chat_generator=chat_generator,
        system_prompt=EMBEDDED_SYSTEM_PROMPT,
        generate_prompt=EMBEDDED_GENERATE_PROMPT,
        max_chunks=max_chunks,
        chunk_chars=EMBEDDED_CHUNK_CHARS,
        chunks_per_search=chunks_per_search,
        stream_answer=False,  # the extractor streams the answer
        **(llm.role() if llm and chat_generator is not None else {}),
    )
    return {"answerer": answerer, "extractor": ShortAnswerExtractor(max_chunks, chunks_per_search)}


def embedded_fallback(chat_generator: Any, max_chunks: int, llm: LLMSettings | None = None) -> FallbackSynthesizer:
    """The fallback of the embedded pipelines (disabled without a `chat_generator`): short chunks, as the answerer."""
    return FallbackSynthesizer(
        chat_generator=chat_generator,
        max_chunks=max_chunks,
        chunk_chars=EMBEDDED_CHUNK_CHARS,
        enabled=chat_generator is not None,
        **(llm.role() if llm and chat_generator is not None else {}),
    )


def embedded_pipeline(
    grounded: bool = True,
    store: Any = None,
    retriever_class: Any = None,
    query_embedder: Any = None,
    *,
    llm: LLMSettings | None = None,
    max_iterations: int | None = None,
    on_insufficient_evidence: Literal["give_up", "answer_with_warning"] = "give_up",
    index: str = INDEX_NAME,
) -> Pipeline:
    """
    Build the offline default loop pipeline.

    The offline default: bridge-entity routing, SmolLM2-135M answers, 6 chunks, over in-memory BM25 (a
    `SparseBM25DocumentStore` of `index`) or `store` with `retriever_class` and `query_embedder`; local-only HHEM
    (`grounded`). `llm` (its limits), `max_iterations` (default: the policy's searches + 3) and
    `on_insufficient_evidence` (the evidence check's policy, default `give_up`) are a run's options.
    """
    llm = llm or LLMSettings()
    store = store if store is not None else SparseBM25DocumentStore(index=index)
    router = BridgeEntityRouter(document_store=store, first_top_k=4, follow_up_top_k=1, max_follow_ups=2)
    return build_loop_pipeline(
        router,
        SafeRetriever((retriever_class or InMemoryBM25Retriever)(document_store=store)),
        query_embedder=query_embedder,
        # One turn more than the policy's searches and answer: room for one answer the evidence check refuses.
        controller=LoopController(
            max_iterations=max_iterations or router.max_follow_ups + 3, chunk_cap=router.max_chunks
        ),
        **embedded_answer_stages(llm.embedded_generator(), router.max_chunks, chunks_per_search=2, llm=llm),
        fallback=embedded_fallback(llm.embedded_generator(), router.max_chunks, llm=llm),
        evidence_checker=EvidenceChecker(on_insufficient_evidence=on_insufficient_evidence),
        grounder=HHEMGrounder(local_files_only=True) if grounded else None,
        metadata={
            "llm": "SmolLM2-135M-Instruct (embedded, offline)",
            "policy": "bridge-entity (deterministic: search the question, then bridge entities)",
        },
    )


def _dense(store: Any, retriever_class: Any, **options: Any) -> Pipeline:
    """The offline default over `store` with a MiniLM query embedder (dense or hybrid retrieval)."""
    from haystack_agentic.components.embedders.minilm_text_embedder import MiniLMTextEmbedder  # noqa: PLC0415

    return embedded_pipeline(
        store=store, retriever_class=retriever_class, query_embedder=MiniLMTextEmbedder(), **options
    )


def _milvus_store_for_yaml(bm25: bool = True) -> Any:
    """A Milvus store whose YAML points at MILVUS_URI (Milvus connects in `__init__`: built on a scratch file)."""
    from haystack_agentic.indexing.document_stores import milvus_document_store  # noqa: PLC0415

    with tempfile.TemporaryDirectory() as scratch:
        store = milvus_document_store(str(Path(scratch) / "build.db"), bm25=bm25)
        store.client.close()
    store.connection_args = {"uri": MILVUS_URI}
    return store


def openai_pipeline(
    mode: Literal["tools", "json"] = "tools",
    grounded: bool = True,
    *,
    llm: LLMSettings | None = None,
    max_iterations: int | None = None,
    on_insufficient_evidence: Literal["give_up", "answer_with_warning"] = "give_up",
    judge: bool = False,
    index: str = INDEX_NAME,
) -> Pipeline:
    """
    Build the LLM-routed loop (`mode` `tools` or `json`) on an OpenAI-compatible endpoint, in-memory BM25.

    `llm` (the endpoint, model and limits), `max_iterations` (default `LLM_MAX_ITERATIONS`), `on_insufficient_evidence`
    (the evidence check's policy, default `give_up`) and `judge` (ground with the router's LLM as judge,
    `LLMJudgeGrounder`, instead of HHEM) are a run's options; `index` names the in-memory store's storage.
    The router's first searches are the bridge-entity policy's (the question's top 5, as one-shot RAG's, then up to two
    entities its chunks name), without LLM calls (`search_policy: null` in the YAML: only the question's).
    """
    from haystack_agentic.components.grounders.llm_judge_grounder import LLMJudgeGrounder  # noqa: PLC0415
    from haystack_agentic.components.routers.agentic_router import AgenticRouter  # noqa: PLC0415

    llm = llm or LLMSettings()
    store = SparseBM25DocumentStore(index=index)
    controller_role = "controller_json" if mode == "json" else "controller"
    # In tools mode the controller's answer is final; json mode needs an answer LLM to write it from the chunks.
    answer_llm = llm.openai_generator("answer") if mode == "json" else None
    grounder: Any = None
    if grounded:
        grounder = (
            LLMJudgeGrounder(chat_generator=llm.openai_generator(controller_role), **llm.role(timeout=False))
            if judge
            else HHEMGrounder(local_files_only=True)
        )
    return build_loop_pipeline(
        AgenticRouter(
            chat_generator=llm.openai_generator(controller_role),
            mode=mode,
            temperature=0.0,
            **llm.role(),
            **llm.router_budget(),
            # json mode only: in tools mode the policy's searches enter the conversation as the model's own calls, and
            # Qwen2.5-Coder-1.5B then answered about the last (one-chunk) result, not the question: HotpotQA 20 F1
            # 0.042 with the policy, 0.259 without (docs/benchmarks.md, issue 38, sixth session).
            search_policy=(
                BridgeEntityRouter(document_store=store, first_top_k=5, follow_up_top_k=1, max_follow_ups=2)
                if mode == "json"
                else None
            ),
        ),
        SafeRetriever(InMemoryBM25Retriever(document_store=store, top_k=5)),
        controller=LoopController(max_iterations=max_iterations or LLM_MAX_ITERATIONS),
        answerer=Answerer(
            chat_generator=answer_llm,
            temperature=0.0,
            **(
                {"max_chunks": JSON_ANSWER_CHUNKS, "chunks_per_search": JSON_ANSWER_CHUNKS_PER_SEARCH, **llm.role()}
                if answer_llm
                else {}
            ),
        ),
        fallback=FallbackSynthesizer(chat_generator=llm.openai_generator("fallback"), temperature=0.0, **llm.role()),
        # The offline check, not an LLM judge: no call per answer, and a small model's verdicts contradicted its own
        # reasons (issue 38's measurement with Qwen2.5-Coder-1.5B). Give it a chat_generator for an LLM judge.
        evidence_checker=EvidenceChecker(on_insufficient_evidence=on_insufficient_evidence),
        grounder=grounder,
        metadata={"llm": f"OpenAI-compatible ({llm.model})", "policy": f"LLM router ({mode} mode)"},
    )


#: The packaged loop pipelines on an OpenAI-compatible endpoint (the others run the embedded LLM).
OPENAI_LOOPS = ("agentic_rag", "agentic_rag_json", "agentic_rag_ungrounded")
#: The packaged loop pipelines whose store is given to `loop_pipeline` (a Milvus or Weaviate one).
STORE_LOOPS = ("agentic_rag_embedded_milvus", "agentic_rag_embedded_milvus_dense", "agentic_rag_embedded_weaviate")
#: Every packaged loop pipeline, by name (its file in `pipelines/` is `<name>.yml`).
LOOP_PIPELINES = (
    *OPENAI_LOOPS,
    "agentic_rag_embedded",
    "agentic_rag_embedded_ungrounded",
    "agentic_rag_embedded_dense",
    *STORE_LOOPS,
)


def loop_pipeline(name: str, store: Any = None, **options: Any) -> Pipeline:
    """
    Build the packaged loop pipeline `name` (one of `LOOP_PIPELINES`) with a run's options.

    ### Usage example
    ```python
    pipeline = loop_pipeline("agentic_rag_json", llm=LLMSettings(api_base_url="http://127.0.0.1:8080/v1"))
    ```

    :param name: The pipeline's name, its file name in `pipelines/` without `.yml`.
    :param store: The document store of a pipeline of `STORE_LOOPS` (a `MilvusDocumentStore`, with BM25 for
        `agentic_rag_embedded_milvus`, or a `WeaviateDocumentStore`); ignored by the others.
    :param options: Keyword arguments of `openai_pipeline` (for `OPENAI_LOOPS`) or `embedded_pipeline`: `llm`,
        `max_iterations`, `on_insufficient_evidence`, `index`, and `judge` for `OPENAI_LOOPS`.
    :returns: The pipeline, not warmed up.
    :raises ValueError: If `name` is no packaged loop pipeline, or a `STORE_LOOPS` one has no `store`.
    """
    if name not in LOOP_PIPELINES:
        msg = f"{name!r} is no packaged loop pipeline: one of {', '.join(LOOP_PIPELINES)}."
        raise ValueError(msg)
    if name in OPENAI_LOOPS:
        mode: Literal["tools", "json"] = "json" if name == "agentic_rag_json" else "tools"
        return openai_pipeline(mode, grounded=name != "agentic_rag_ungrounded", **options)
    if name in STORE_LOOPS and store is None:
        msg = f"The packaged pipeline {name} needs its document store (`store=`)."
        raise ValueError(msg)
    if name == "agentic_rag_embedded_dense":
        index = options.pop("index", INDEX_NAME)
        return _dense(InMemoryDocumentStore(index=index), InMemoryEmbeddingRetriever, **options)
    if name in STORE_LOOPS:
        from haystack_integrations.components.retrievers.weaviate import WeaviateHybridRetriever  # noqa: PLC0415
        from milvus_haystack import MilvusEmbeddingRetriever, MilvusHybridRetriever  # noqa: PLC0415

        retrievers = dict(
            zip(STORE_LOOPS, (MilvusHybridRetriever, MilvusEmbeddingRetriever, WeaviateHybridRetriever), strict=True)
        )
        options.pop("index", None)
        return _dense(store, retrievers[name], **options)
    return embedded_pipeline(grounded=name != "agentic_rag_embedded_ungrounded", **options)


def default_pipelines() -> dict[str, Pipeline]:
    """Every packaged pipeline by file name: the loop pipelines and the indexing ones."""
    from haystack_agentic.components.embedders.minilm_document_embedder import MiniLMDocumentEmbedder  # noqa: PLC0415
    from haystack_agentic.indexing.document_stores import weaviate_document_store  # noqa: PLC0415
    from haystack_agentic.indexing.indexing_pipeline import build_indexing_pipeline  # noqa: PLC0415

    stores = dict(
        zip(
            STORE_LOOPS,
            (_milvus_store_for_yaml(), _milvus_store_for_yaml(bm25=False), weaviate_document_store()),
            strict=True,
        )
    )
    pipelines = {f"{name}.yml": loop_pipeline(name, store=stores.get(name)) for name in LOOP_PIPELINES}
    pipelines["indexing_milvus.yml"] = build_indexing_pipeline(_milvus_store_for_yaml(), MiniLMDocumentEmbedder())
    pipelines["indexing_weaviate.yml"] = build_indexing_pipeline(weaviate_document_store(), MiniLMDocumentEmbedder())
    return pipelines


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
