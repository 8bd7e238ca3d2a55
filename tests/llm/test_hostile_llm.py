# SPDX-License-Identifier: Apache-2.0
"""
Issue 26, case 2: an LLM that writes a lone UTF-16 surrogate (half an emoji, "\\ud83d") into a search query, an
answer or a tool argument. Every reply is made valid Unicode where the loop receives it (`call_generator`), so the
query embedder's tokenizer (which raises on a surrogate), the store and the JSON result never see one.
"""

import json

import pytest
from conftest import DOCS, QUESTION, answer, search
from haystack import Document, component
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever, InMemoryEmbeddingRetriever
from haystack.document_stores.in_memory import InMemoryDocumentStore
from scripted_chat_generator import ScriptedChatGenerator

from haystack_agentic import AgenticRouter, build_loop_pipeline
from haystack_agentic.components.embedders.minilm_document_embedder import MiniLMDocumentEmbedder
from haystack_agentic.components.embedders.minilm_text_embedder import MiniLMTextEmbedder
from haystack_agentic.components.loop.loop_result_builder import result_to_dict
from haystack_agentic.components.retrievers.safe_retriever import SafeRetriever
from haystack_agentic.grounding.citations import strip_markers
from haystack_agentic.llm.valid_text import valid_reply, valid_text

LONE = "\ud83d"


def test_valid_text_replaces_lone_surrogates_and_joins_pairs():
    assert valid_text(f"a{LONE}b\udc00") == "a\ufffdb\ufffd"
    assert valid_text("\ud83d\ude00") == "\U0001f600"
    text = "plain"
    assert valid_text(text) is text


@pytest.fixture(scope="module")
def embedded_store() -> InMemoryDocumentStore:
    embedder = MiniLMDocumentEmbedder()
    embedder.warm_up()
    store = InMemoryDocumentStore()
    docs = [Document(id=d.id, content=d.content, meta=dict(d.meta)) for d in DOCS]
    store.write_documents(embedder.run(docs)["documents"])
    return store


def run_loop(script, retriever, query_embedder=None) -> dict:
    router = AgenticRouter(chat_generator=ScriptedChatGenerator(script), search_question_first=False)
    pipeline = build_loop_pipeline(router, retriever, query_embedder=query_embedder, check_evidence=False)
    return pipeline.run({"controller": {"query": QUESTION}})["result"]


@pytest.mark.integration  # the packaged MiniLM
@pytest.mark.parametrize("backend", ["dense", "bm25"])
def test_a_search_query_with_a_lone_surrogate_runs(embedded_store, backend):
    script = [search(f"Adriana Trigiani {LONE}"), answer(f"Greenwich Village {LONE}")]
    if backend == "dense":  # the MiniLM tokenizer raised "TextEncodeInput must be Union[...]" and so did the run
        result = run_loop(
            script, SafeRetriever(retriever=InMemoryEmbeddingRetriever(embedded_store)), MiniLMTextEmbedder()
        )
    else:
        result = run_loop(script, InMemoryBM25Retriever(embedded_store))
    assert result["terminated_by"] == "answered"
    assert strip_markers(result["answer"]) == "Greenwich Village \ufffd"
    assert result["tool_history"][0]["query"] == "Adriana Trigiani \ufffd"
    assert result["documents"]  # the search found something
    json.dumps(result_to_dict(result), allow_nan=False).encode("utf-8")  # strict JSON, encodable as UTF-8


def test_a_reply_is_repaired_in_its_text_tool_arguments_and_reasoning():
    from haystack.dataclasses import ChatMessage, ToolCall

    reply = ChatMessage.from_assistant(
        f"t{LONE}",
        tool_calls=[ToolCall(tool_name=f"search{LONE}", arguments={"query": [f"q{LONE}"]})],
        reasoning=f"r{LONE}",
    )
    repaired = valid_reply(reply)
    assert repaired.text == "t\ufffd" and repaired.reasoning.reasoning_text == "r\ufffd"
    assert repaired.tool_calls[0].tool_name == "search\ufffd"
    assert repaired.tool_calls[0].arguments == {"query": ["q\ufffd"]}
    clean = ChatMessage.from_assistant("fine")
    assert valid_reply(clean) is clean


def test_streamed_chunks_carry_no_lone_surrogate(embedded_store):
    from haystack_agentic import Answerer
    from haystack_agentic.llm.streaming import ANSWER_META
    from haystack_agentic.pipelines.loop_pipeline import loop_inputs

    answer_llm = ScriptedChatGenerator([{"text": f"Greenwich Village {LONE}"}], per_call=True)
    router = AgenticRouter(chat_generator=ScriptedChatGenerator([search("Adriana Trigiani"), answer("draft")]))
    pipeline = build_loop_pipeline(
        router,
        InMemoryBM25Retriever(embedded_store),
        answerer=Answerer(chat_generator=answer_llm),
        check_evidence=False,
    )
    chunks = []
    result = pipeline.run(loop_inputs(pipeline, query=QUESTION, streaming_callback=chunks.append))["result"]
    assert strip_markers(result["answer"]) == "Greenwich Village \ufffd"
    for chunk in chunks:
        chunk.content.encode("utf-8")  # a terminal or a JSON encoder would raise on a lone surrogate
    streamed = "".join(c.content for c in chunks if c.meta.get(ANSWER_META))
    assert streamed.strip() == result["answer"]  # the citation marker streams after the answer


@component
class _StoreWithBrokenText:
    """A retriever whose store holds text with lone surrogates (e.g. a JSON store file with "\\ud800" escapes)."""

    @component.output_types(documents=list[Document])
    def run(self, query: str, filters: dict | None = None, top_k: int | None = None) -> dict:
        return {
            "documents": [
                Document(
                    id="a",
                    content=f"Adriana Trigiani {LONE} is based in Greenwich Village.",
                    score=float("nan"),
                    meta={"title": f"Adriana Trigiani {LONE}"},
                ),
                Document(id="b", content="Big Stone Gap is a film directed by Adriana Trigiani.", score=1.0),
            ]
        }


@pytest.mark.integration  # the packaged MiniLM
def test_documents_with_lone_surrogates_and_nan_scores_reach_the_evidence_check_as_valid_text():
    from haystack_agentic.components.evidence.evidence_checker import EvidenceChecker

    script = [search("Adriana Trigiani"), answer("Greenwich Village")]
    router = AgenticRouter(chat_generator=ScriptedChatGenerator(script))
    # the MiniLM tokenizer of the evidence check raised on the surrogate, and so did the run
    pipeline = build_loop_pipeline(router, _StoreWithBrokenText(), evidence_checker=EvidenceChecker())
    result = pipeline.run({"controller": {"query": QUESTION}})["result"]
    assert result["terminated_by"] in {"answered", "gave_up"}
    assert [doc.id for doc in result["documents"]] == ["b", "a"]  # the NaN score ranks as no score: last
    assert result["documents"][1].score is None and "\ufffd" in result["documents"][1].content
    json.dumps(result_to_dict(result), allow_nan=False).encode("utf-8")
