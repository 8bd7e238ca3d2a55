# SPDX-License-Identifier: Apache-2.0
import copy
import json

import pytest
from haystack import Document
from haystack.dataclasses import ChatMessage, ToolCall
from hypothesis import given, settings
from hypothesis import strategies as st

from haystack_agentic.dataclasses.loop_state import (
    LoopLimits,
    LoopOutcome,
    LoopState,
    PendingSearch,
    ToolStep,
    merge_chunks,
)


def _doc(doc_id: str, score: float | None, content: str | None = None) -> Document:
    return Document(id=doc_id, content=content or f"text {doc_id}", score=score)


def _full_state() -> LoopState:
    call = ToolCall(tool_name="search", arguments={"query": "Adriana Trigiani"}, id="c1")
    return LoopState(
        question="Where is the director of Big Stone Gap based?",
        limits=LoopLimits(max_iterations=5, chunk_cap=4, max_searches_per_turn=2),
        filters={"field": "meta.kind", "operator": "==", "value": "person"},
        iteration=2,
        chunks=(
            Document(id="a", content="A", meta={"title": "T"}, score=1.5),
            Document(id="b", content="B", score=None, embedding=[0.1, 0.2]),
        ),
        messages=(
            ChatMessage.from_system("sys"),
            ChatMessage.from_user("q"),
            ChatMessage.from_assistant(tool_calls=[call]),
            ChatMessage.from_tool("1 result(s)", origin=call),
        ),
        tool_history=(
            ToolStep(
                1,
                "search",
                query="Big Stone Gap",
                tool_name="search",
                arguments={"query": "Big Stone Gap"},
                returned_chunk_ids=("a", "b"),
                result=None,
                reasoning="first hop",
            ),
            ToolStep(2, "invalid", tool_name="browse", arguments={"raw": "x"}, result="Error"),
        ),
        draft="Greenwich",
        pending=PendingSearch(
            query="Adriana Trigiani", top_k=3, filters={"field": "id", "operator": "!=", "value": "x"}, tool_call=call
        ),
        pending_action=None,
        queries_tried=("Big Stone Gap", "Adriana Trigiani"),
        usage={"controller": {"calls": 2, "prompt_tokens": 100, "completion_tokens": 10}},
        outcome=LoopOutcome(
            citations=({"n": 1, "document_id": "a", "supported": True},),
            grounding={"score": 0.9, "spans": [{"start": 0, "end": 3}]},
        ),
        metadata={"policy": "tools"},
    )


def test_to_dict_from_dict_round_trip():
    state = _full_state()
    data = state.to_dict()
    json.dumps(data)  # JSON-compatible
    restored = LoopState.from_dict(json.loads(json.dumps(data)))
    assert restored == state
    assert restored.to_dict() == data
    assert isinstance(restored.chunks, tuple) and isinstance(restored.tool_history[0].returned_chunk_ids, tuple)
    assert restored.pending.tool_call == state.pending.tool_call


def test_round_trip_of_a_fresh_state():
    state = LoopState(question="q")
    assert LoopState.from_dict(state.to_dict()) == state


def test_tool_step_round_trip():
    step = ToolStep(3, "search", query="q", arguments={"query": "q", "top_k": 2}, returned_chunk_ids=("x",))
    assert ToolStep.from_dict(step.to_dict()) == step
    assert step.to_dict()["returned_chunk_ids"] == ["x"]


def test_deepcopy_and_copy_return_the_same_object():
    state = _full_state()
    assert copy.deepcopy(state) is state
    assert copy.copy(state) is state
    assert copy.deepcopy({"s": state})["s"] is state


def test_state_is_immutable_and_evolve_builds_a_new_one():
    state = LoopState(question="q")
    with pytest.raises(AttributeError):
        state.iteration = 3  # type: ignore[misc]
    later = state.evolve(iteration=3).with_step(ToolStep(1, "search")).with_messages(ChatMessage.from_user("x"))
    assert state.iteration == 0 and state.tool_history == () and state.messages == ()
    assert later.iteration == 3 and len(later.tool_history) == 1 and len(later.messages) == 1


def test_is_last_iteration():
    assert LoopState(question="q", limits=LoopLimits(max_iterations=1)).is_last_iteration
    assert not LoopState(question="q", limits=LoopLimits(max_iterations=3), iteration=1).is_last_iteration
    assert LoopState(question="q", limits=LoopLimits(max_iterations=3), iteration=2).is_last_iteration


def test_finish_sets_the_end_and_clears_pending():
    state = _full_state().evolve(pending_action="answer")
    done = state.finish("answered", answer="Greenwich Village")
    assert (done.outcome.terminated_by, done.outcome.answer, done.outcome.error, done.pending, done.pending_action) == (
        "answered",
        "Greenwich Village",
        None,
        None,
        None,
    )
    assert done.outcome.citations == () and done.outcome.grounding is None  # a new end: nothing from before
    with pytest.raises(ValueError, match="terminated_by must be one of"):
        state.finish("done")
    with pytest.raises(ValueError, match="terminated_by must be one of"):
        state.finish(None)


def test_with_outcome_replaces_outcome_fields_only():
    done = _full_state().finish("answered", answer="Greenwich Village")
    cited = done.with_outcome(answer="Greenwich Village [1]", citations=({"n": 1},))
    assert (cited.outcome.terminated_by, cited.outcome.answer, cited.outcome.citations) == (
        "answered",
        "Greenwich Village [1]",
        ({"n": 1},),
    )
    assert cited.chunks == done.chunks and done.outcome.answer == "Greenwich Village"
    with pytest.raises(TypeError):
        done.with_outcome(iteration=3)


def test_with_usage_counts_reported_tokens():
    reply = ChatMessage.from_assistant("abc", meta={"usage": {"prompt_tokens": 7, "completion_tokens": 3}})
    state = LoopState(question="q").with_usage("answer", [reply], prompt_tokens_estimate=999)
    state = state.with_usage("answer", [reply])
    assert state.usage == {"answer": {"calls": 2, "prompt_tokens": 14, "completion_tokens": 6}}


def test_with_usage_estimates_when_nothing_is_reported():
    reply = ChatMessage.from_assistant("x" * 40)
    state = LoopState(question="q").with_usage("controller", [reply], prompt_tokens_estimate=12)
    assert state.usage["controller"] == {"calls": 1, "prompt_tokens": 12, "completion_tokens": 10}
    failed = state.with_usage("controller", [], prompt_tokens_estimate=5)
    assert failed.usage["controller"] == {"calls": 2, "prompt_tokens": 17, "completion_tokens": 10}


# --- merge_chunks -------------------------------------------------------------------------------------------


def test_merge_keeps_the_highest_score_per_id():
    merged = merge_chunks([_doc("a", 0.2), _doc("b", 0.5)], [_doc("a", 0.9), _doc("b", 0.1)], 10)
    assert [(d.id, d.score) for d in merged] == [("a", 0.9), ("b", 0.5)]


def test_missing_score_ranks_lowest_and_zero_is_a_real_score():
    merged = merge_chunks([], [_doc("none", None), _doc("zero", 0.0), _doc("neg", -1.0), _doc("pos", 0.3)], 10)
    assert [d.id for d in merged] == ["pos", "zero", "neg", "none"]
    # A real score (even 0.0) replaces a missing one for the same id.
    assert merge_chunks([_doc("a", None)], [_doc("a", 0.0)], 5)[0].score == 0.0
    assert merge_chunks([_doc("a", 0.0)], [_doc("a", None)], 5)[0].score == 0.0


def test_cap_evicts_the_lowest_scores_first():
    existing = [_doc("a", 0.9), _doc("b", None), _doc("c", 0.0)]
    new = [_doc("d", 0.5), _doc("e", 0.1)]
    assert [d.id for d in merge_chunks(existing, new, 3)] == ["a", "d", "e"]
    assert [d.id for d in merge_chunks(existing, new, 4)] == ["a", "d", "e", "c"]
    assert [d.id for d in merge_chunks(existing, new, 5)] == ["a", "d", "e", "c", "b"]


def test_equal_scores_keep_first_seen_order():
    merged = merge_chunks([_doc("x", 1.0), _doc("y", 1.0)], [_doc("z", 1.0), _doc("x", 1.0)], 10)
    assert [d.id for d in merged] == ["x", "y", "z"]


def test_merge_never_mutates_documents():
    old = _doc("a", 0.2)
    new = _doc("a", 0.9)
    merge_chunks([old], [new], 1)
    assert old.score == 0.2 and new.score == 0.9


def test_chunk_cap_below_one_is_rejected():
    with pytest.raises(ValueError, match="chunk_cap"):
        merge_chunks([], [], 0)


def test_state_merge_chunks_uses_its_cap():
    state = LoopState(question="q", limits=LoopLimits(chunk_cap=2))
    state = state.merge_chunks([_doc("a", 0.1), _doc("b", 0.2), _doc("c", 0.3)])
    assert [d.id for d in state.chunks] == ["c", "b"]


_scores = st.one_of(st.none(), st.just(0.0), st.floats(min_value=-5, max_value=5, allow_nan=False))
_batches = st.lists(st.lists(st.tuples(st.sampled_from("abcdefghij"), _scores), max_size=8), max_size=5)


def _rank(score: float | None) -> float:
    return float("-inf") if score is None else score


@settings(max_examples=300, deadline=None)
@given(batches=_batches, cap=st.integers(min_value=1, max_value=12))
def test_merge_chunks_properties(batches, cap):
    chunks: tuple[Document, ...] = ()
    best: dict[str, float | None] = {}
    for batch in batches:
        docs = [_doc(doc_id, score) for doc_id, score in batch]
        for doc in docs:
            if doc.id not in best or _rank(doc.score) > _rank(best[doc.id]):
                best[doc.id] = doc.score
        chunks = merge_chunks(chunks, docs, cap)

        ids = [d.id for d in chunks]
        assert len(ids) == len(set(ids)), "no duplicates"
        assert len(chunks) <= cap
        ranks = [_rank(d.score) for d in chunks]
        assert ranks == sorted(ranks, reverse=True), "sorted by score, highest first, None last"

    # Every chunk kept across all batches holds the highest score seen for its id, and the kept set is the
    # top-`cap` of the best scores (ties may go either way, so compare by rank).
    for doc in chunks:
        assert _rank(doc.score) == _rank(best[doc.id])
    expected_ranks = sorted((_rank(s) for s in best.values()), reverse=True)[:cap]
    assert sorted((_rank(d.score) for d in chunks), reverse=True) == expected_ranks
    assert len(chunks) == min(cap, len(best))


def test_evolve_rejects_unknown_fields_and_keeps_equality():
    state = _full_state()
    with pytest.raises(TypeError, match="no field"):
        state.evolve(iterations=3)
    same = state.evolve()
    assert same == state and same is not state
    assert state.evolve(iteration=7) == LoopState.from_dict({**state.to_dict(), "iteration": 7})
