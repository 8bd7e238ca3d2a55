# SPDX-License-Identifier: Apache-2.0
"""
What every grounder shares: when to skip, how a failure is recorded, and the result shape.

Result (`LoopState.grounding`, `result["grounding"]`)::

    {"method": "hhem" | "llm_judge", "model": str, "threshold": float,
     "score": float,                      # length-weighted mean of the sentence scores, in [0, 1]
     "faithful_spans": [span, ...],       # sentences scored >= threshold
     "hallucinated_spans": [span, ...],   # the others
     ...method-specific figures}

    span = {"text", "start", "end",       # answer[start:end] == text
            "score", "supported",
            "chunk_ids": [...],           # chunks that support it, best first (empty when unsupported)
            "sources": [{"chunk_id", "title", "iteration", "query"}]}  # which search first found each chunk

When a grounder does not ground, `grounding` stays `None` and `metadata["grounding_skipped"]` says why
(an error run, no answer, no chunks, the model not available, or the grounder's own failure).
"""

from collections.abc import Sequence
from typing import Any

from haystack import logging

from haystack_agentic.dataclasses.loop_state import LoopState
from haystack_agentic.grounding.sentence_splitter import Sentence

logger = logging.getLogger(__name__)

#: The `LoopState.metadata` key (and `result["metadata"]` key) holding why grounding was skipped.
SKIPPED_KEY = "grounding_skipped"


def skip_reason(state: LoopState) -> str | None:
    """
    Why this run cannot be grounded, or `None` when it can.

    :param state: The ended run.
    :returns: A reason for an error run, a missing/blank answer, or no chunks.
    """
    if state.terminated_by == "error":
        return "the run ended in error"
    if state.answer is None or not state.answer.strip():
        return "there is no answer"
    if not state.chunks:
        return "there are no chunks to ground the answer in"
    return None


def skipped(state: LoopState, reason: str) -> LoopState:
    """
    The state with grounding skipped: `grounding` `None`, the reason in `metadata["grounding_skipped"]`.

    :param state: The run's state.
    :param reason: Why.
    :returns: The new state (the answer and everything else unchanged).
    """
    return state.evolve(grounding=None, metadata={**state.metadata, SKIPPED_KEY: reason})


def chunk_sources(state: LoopState) -> dict[str, dict[str, Any]]:
    """
    For each chunk id, the search that first returned it (from `tool_history`).

    :param state: The run's state.
    :returns: `{chunk_id: {"iteration": int, "query": str | None}}`.
    """
    first: dict[str, dict[str, Any]] = {}
    for step in state.tool_history:
        for chunk_id in step.returned_chunk_ids:
            first.setdefault(chunk_id, {"iteration": step.iteration, "query": step.query})
    return first


def make_span(
    sentence: Sentence,
    score: float,
    chunk_ids: Sequence[str],
    threshold: float,
    state: LoopState,
    sources: dict[str, dict[str, Any]],
) -> dict[str, Any]:
    """
    One span of the result.

    :param sentence: The sentence (text and offsets in the answer).
    :param score: Its support score in [0, 1].
    :param chunk_ids: Ids of the supporting chunks, best first.
    :param threshold: Supported at `score >= threshold`.
    :param state: The run (for chunk titles).
    :param sources: `chunk_sources(state)`.
    :returns: The span dict.
    """
    titles = {doc.id: (doc.meta or {}).get("title") for doc in state.chunks}
    supported = score >= threshold
    ids = list(chunk_ids) if supported else []
    return {
        "text": sentence.text,
        "start": sentence.start,
        "end": sentence.end,
        "score": round(float(score), 4),
        "supported": supported,
        "chunk_ids": ids,
        "sources": [
            {
                "chunk_id": chunk_id,
                "title": titles.get(chunk_id),
                "iteration": sources.get(chunk_id, {}).get("iteration"),
                "query": sources.get(chunk_id, {}).get("query"),
            }
            for chunk_id in ids
        ],
    }


def assemble(spans: list[dict[str, Any]], threshold: float, method: str, model: str, **extra: Any) -> dict[str, Any]:
    """
    The grounding dict from scored spans.

    :param spans: Spans in answer order (`make_span`).
    :param threshold: The support threshold.
    :param method: `hhem` or `llm_judge`.
    :param model: What scored them.
    :param extra: Method-specific figures to include.
    :returns: The grounding dict (see the module docstring).
    """
    weights = [max(1, span["end"] - span["start"]) for span in spans]
    total = sum(weights)
    score = sum(w * span["score"] for w, span in zip(weights, spans, strict=True)) / total if total else 0.0
    return {
        "method": method,
        "model": model,
        "threshold": threshold,
        "score": round(score, 4),
        "faithful_spans": [span for span in spans if span["supported"]],
        "hallucinated_spans": [span for span in spans if not span["supported"]],
        **extra,
    }
