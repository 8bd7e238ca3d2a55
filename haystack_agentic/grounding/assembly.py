# SPDX-License-Identifier: Apache-2.0
"""
What every grounder shares: when to skip, how a skip is recorded, and the result shape.

Result (`LoopOutcome.grounding`, `result["grounding"]`), derived from the citations by `citations.settle`::

    {"method": "hhem" | "llm_judge", "model": str, "threshold": float,
     "score": float,                      # length-weighted mean of the sentence scores, in [0, 1]
     "faithful_spans": [span, ...],       # sentences with a supported citation
     "hallucinated_spans": [span, ...],   # the others
     ...method-specific figures}

    span = {"text", "start", "end",       # answer[start:end] == text (the answer with its [n] markers)
            "score", "supported",         # the best score of its citations; supported when one of them is
            "chunk_ids": [...],           # the chunks of its supported citations (empty when unsupported)
            "sources": [{"chunk_id", "title", "iteration", "query"}],  # which search first found each chunk
            "citations": [n, ...]}        # the numbers of its citations (`result["citations"]`)

When a grounder does not ground, `grounding` stays `None` and `metadata["grounding_skipped"]` says why.
"""

from typing import Any

from haystack_agentic.dataclasses.loop_state import LoopState

#: The `LoopState.metadata` key (and `result["metadata"]` key) holding why grounding was skipped.
SKIPPED_KEY = "grounding_skipped"


def skip_reason(state: LoopState) -> str | None:
    """Why this ended run cannot be grounded (an error, a give-up, no answer, no chunks), or `None` when it can."""
    outcome = state.outcome
    if outcome.terminated_by == "error":
        return "the run ended in error"
    if outcome.terminated_by == "gave_up":
        return "the run gave up (its answer says why; there is no claim to check)"
    if outcome.answer is None or not outcome.answer.strip():
        return "there is no answer"
    if not state.chunks:
        return "there are no chunks to ground the answer in"
    return None


def skipped(state: LoopState, reason: str) -> LoopState:
    """The state with grounding skipped: `grounding` `None`, `reason` in `metadata["grounding_skipped"]`."""
    return state.with_outcome(grounding=None).evolve(metadata={**state.metadata, SKIPPED_KEY: reason})


def chunk_sources(state: LoopState) -> dict[str, dict[str, Any]]:
    """For each chunk id, the search that first returned it: `{chunk_id: {"iteration": int, "query": str | None}}`."""
    first: dict[str, dict[str, Any]] = {}
    for step in state.tool_history:
        for chunk_id in step.returned_chunk_ids:
            first.setdefault(chunk_id, {"iteration": step.iteration, "query": step.query})
    return first


def assemble(spans: list[dict[str, Any]], threshold: float, method: str, model: str, **extra: Any) -> dict[str, Any]:
    """The grounding dict (module docstring) from scored spans in answer order, with `extra` figures."""
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
