# SPDX-License-Identifier: Apache-2.0
"""
What the routers do with an answer `EvidenceChecker` refused.

What the routers do with an answer `EvidenceChecker` refused (its verdict in `state.evidence`, an `evidence` step
last in the history): `BridgeEntityRouter` searches what was missing, `AgenticRouter` tells the controller LLM why.
"""

from haystack.dataclasses import ChatMessage, ChatRole

from haystack_agentic.dataclasses.loop_state import LoopState

#: What the controller LLM is told when its answer is refused. Variables: `reason`, `score`.
REFUSAL_MESSAGE = (
    "Answer not accepted yet: the passages found so far do not support an answer ({reason}; evidence score "
    "{score:.2f}). Search for the missing information with different words, or call give_up if the collection "
    "does not hold it."
)

_NOT_RUN = "Not run: the answer in the same turn ended the turn."


def answer_refused(state: LoopState) -> bool:
    """Whether the last recorded step is the evidence check sending the run back to search again."""
    return bool(state.tool_history) and state.tool_history[-1].action == "evidence" and state.evidence is not None


def refusal_note(state: LoopState) -> str | None:
    """The refusal in one sentence, for a prompt; `None` when the last answer was not refused."""
    if not answer_refused(state):
        return None
    evidence = state.evidence or {}
    return REFUSAL_MESSAGE.format(
        reason=evidence.get("reason", "no reason given"), score=float(evidence.get("score", 0))
    )


def with_refusal_feedback(state: LoopState) -> LoopState:
    """The state with the refusal given to the controller LLM: its open `answer` calls' result, else a user message."""
    note = refusal_note(state)
    if note is None:
        return state
    assistant = [i for i, message in enumerate(state.messages) if message.role == ChatRole.ASSISTANT]
    last = assistant[-1] if assistant else len(state.messages)
    results = [m.tool_call_result for m in state.messages[last + 1 :] if m.tool_call_result is not None]
    calls = state.messages[last].tool_calls if assistant else []
    pending = [call for call in calls if call.id not in {r.origin.id for r in results}]
    if not pending:
        return state.with_messages(ChatMessage.from_user(note))
    return state.with_messages(
        *(
            ChatMessage.from_tool(note if call.tool_name == "answer" else _NOT_RUN, origin=call, error=True)
            for call in pending
        )
    )


def missing_evidence_query(state: LoopState) -> str | None:
    """A search for what the refused answer lacked: the missing entities, else the entities with the missing words."""
    if not answer_refused(state):
        return None
    evidence = state.evidence or {}
    missing = [str(m) for m in evidence.get("missing") or [] if str(m).strip()]
    if not missing:
        return None
    entities = [str(e) for e in evidence.get("entities") or []]
    if evidence.get("missing_kind") == "words" and entities:
        return " ".join([*entities, *missing[:4]])
    return " ".join(missing[:2])
