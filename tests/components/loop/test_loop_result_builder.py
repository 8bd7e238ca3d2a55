# SPDX-License-Identifier: Apache-2.0
import json

import pytest
from haystack import Document
from haystack.dataclasses import ByteStream, ChatMessage, GeneratedAnswer, SparseEmbedding

from haystack_agentic.components.loop.loop_result_builder import RESULT_TYPES, LoopResultBuilder, result_to_dict
from haystack_agentic.dataclasses.loop_state import LoopOutcome, LoopState, ToolStep
from haystack_agentic.grounding.sentence_splitter import SENTENCE_SPANS_KEY

pytestmark = pytest.mark.unit

CHUNKS = (
    Document(id="a", content="Trigiani lives in Greenwich Village.", meta={"title": "T"}, score=1.5),
    Document(id="b", content="B", score=None, embedding=[0.1, 0.2]),
)


def _answered(**outcome) -> LoopState:
    return LoopState(
        question="Where does Trigiani live?",
        iteration=2,
        chunks=CHUNKS,
        tool_history=(ToolStep(1, "search", query="Trigiani", returned_chunk_ids=("a", "b")),),
        usage={"controller": {"calls": 2, "prompt_tokens": 100, "completion_tokens": 10}},
        outcome=LoopOutcome(
            terminated_by="answered",
            answer="Greenwich Village [1]",
            citations=({"n": 1, "document_id": "a", "supported": True},),
            grounding={"score": 0.9},
            **outcome,
        ),
        metadata={"policy": "tools"},
    )


def test_the_result_holds_haystack_objects_one_socket_per_key():
    result = LoopResultBuilder().run(state=_answered())
    assert list(result) == list(RESULT_TYPES)
    assert (result["answer"], result["terminated_by"], result["iterations"], result["error"]) == (
        "Greenwich Village [1]",
        "answered",
        2,
        None,
    )
    documents = result["documents"]
    assert [d.id for d in documents] == ["a", "b"] and all(isinstance(d, Document) for d in documents)
    assert result["documents"][0] is CHUNKS[0]  # nothing to drop: the chunk itself, not a copy
    assert result["documents"][1].embedding is None and CHUNKS[1].embedding == [0.1, 0.2]  # the chunk is not changed
    assert [(m.role.value, m.text) for m in result["messages"]] == [
        ("user", "Where does Trigiani live?"),
        ("assistant", "Greenwich Village"),  # the markers number this run's citations only
    ]
    assert result["usage"]["total"] == {"calls": 2, "prompt_tokens": 100, "completion_tokens": 10}
    assert result["tool_history"] == [_answered().tool_history[0].to_dict()]
    (answer,) = result["answers"]
    assert isinstance(answer, GeneratedAnswer)
    assert (answer.data, answer.query, [d.id for d in answer.documents]) == (
        "Greenwich Village",
        "Where does Trigiani live?",
        ["a"],
    )
    assert answer.meta["citations"] == result["citations"] and answer.meta["terminated_by"] == "answered"


def test_without_an_answer_no_generated_answer_and_no_citations():
    state = LoopState(question="q", chunks=CHUNKS).finish("gave_up")
    state = state.with_outcome(citations=({"n": 1, "document_id": "a"},))
    result = LoopResultBuilder().run(state=state)
    assert result["answer"] is None and result["answers"] == [] and result["citations"] == []
    assert [m.text for m in result["messages"]] == ["q"]


def test_a_state_that_never_ended_is_an_error_result():
    result = LoopResultBuilder().run(state=LoopState(question="q"))
    assert result["terminated_by"] == "error" and "without a termination reason" in result["error"]


def test_the_documents_leave_out_the_stored_sentence_offsets():
    doc = Document(id="x", content="One. Two.", meta={"title": "T", SENTENCE_SPANS_KEY: [0, 4, 5, 9]})
    result = LoopResultBuilder().run(state=LoopState(question="q", chunks=(doc,)).finish("answered", answer="a"))
    assert result["documents"][0].meta == {"title": "T"} and result["documents"][0].id == "x"
    assert doc.meta[SENTENCE_SPANS_KEY] == [0, 4, 5, 9]  # the chunk itself is not changed


def test_hostile_text_and_numbers_are_made_valid():
    doc = Document(id="x", content="bad \ud800 text", score=float("nan"))
    conversation = (ChatMessage.from_user("lone \udfff surrogate"),)
    state = LoopState(question="q", chunks=(doc,), conversation=conversation, metadata={"x": float("inf")})
    result = LoopResultBuilder().run(state=state.finish("error", error="boom \ud800"))
    assert result["documents"][0].content == "bad \ufffd text" and result["documents"][0].score is None
    assert result["messages"][0].text == "lone \ufffd surrogate"
    assert result["error"] == "boom \ufffd" and result["metadata"] == {"x": None}
    json.dumps(result_to_dict(result), allow_nan=False).encode("utf-8")


def test_result_to_dict_is_strict_json_without_embeddings_or_answers():
    doc = Document(
        id="x",
        content="X",
        blob=ByteStream(b"\x00\x01", mime_type="application/octet-stream"),
        meta={"title": "T", "nested": {"k": (1, 2)}},
        score=0.25,
        embedding=[0.5],
        sparse_embedding=SparseEmbedding(indices=[1], values=[0.5]),
    )
    result = LoopResultBuilder().run(state=LoopState(question="q", chunks=(doc,)).finish("answered", answer="a"))
    data = result_to_dict(result)
    assert json.loads(json.dumps(data, allow_nan=False)) == data
    expected = doc.to_dict(flatten=False)
    expected.pop("embedding")
    expected.pop("sparse_embedding")
    assert data["documents"] == [json.loads(json.dumps(expected))]
    assert data["messages"] == [m.to_dict() for m in result["messages"]]
    assert set(data) == set(RESULT_TYPES) - {"answers"}
    assert [ChatMessage.from_dict(m) for m in data["messages"]] == result["messages"]  # the next turn's input
