# SPDX-License-Identifier: Apache-2.0
"""
What `AgenticRouter` does with a refused decision: search what the chunks suggest, or stop the loop.

A refused decision is a repeated or empty search, an invalid reply, or an answer with no words of its own. In place
of the model's next decision the loop searches what the chunks suggest (the first bridge entity of
`policies.mention_search` not searched yet, no LLM call), else tells the model why; after
`MAX_REFUSED_TURNS` refused turns in a row (the loop's own searches between them do not count) it stops the loop so
that the run answers from its chunks instead of spending the rest of its turns.
"""

from typing import Any

from haystack import logging
from haystack.dataclasses import ChatMessage, ChatRole

from haystack_agentic.dataclasses.loop_state import LoopState, ToolStep
from haystack_agentic.grounding.markers import has_own_words
from haystack_agentic.llm.loop_tools import run_tool_names
from haystack_agentic.policies.entity_scoring import PageIndex
from haystack_agentic.policies.mention_search import entity_names

logger = logging.getLogger(__name__)

#: Refused turns in a row after which the loop stops and answers from its chunks: one refusal is a slip the
#: feedback can fix; a second in a row shows the model is not getting anywhere, and each further turn costs a call.
MAX_REFUSED_TURNS = 2

#: How many of the run's best chunks the candidates are read from (the bridge policy scans its best chunks too).
CANDIDATE_SCAN = 3

#: The step reasoning of a search the loop makes in place of a refused decision (no LLM call).
SUGGESTED_SEARCH_REASON = "suggested by the chunks after a refused decision, searched without an LLM call"

#: `LoopState.metadata` key set when the run's answer is forced at the turn limit (it ends `max_iterations`).
FORCED_AT_CAP = "answer_forced_at_cap"


def search_candidates(state: LoopState, limit: int = 1) -> list[str]:
    """
    The next searches the run's chunks suggest (the bridge entities), best first.

    They are names in its best chunks that the question does not contain and
    that were not searched yet (the bridge entities), best first.

    :param state: The run's state (its question, chunks and searches).
    :param limit: Most candidates returned.
    :returns: Up to `limit` names; `[]` without chunks.
    """
    # Only chunks the policy can read: text content, and a title that is a string when there is one (a user tool's
    # Document may carry anything).
    chunks = [
        doc
        for doc in state.chunks
        if isinstance(doc.content, str) and isinstance(doc.meta, dict) and isinstance(doc.meta.get("title") or "", str)
    ]
    if not chunks:
        return []
    pages = PageIndex(((doc.meta.get("title") or ""), doc.content) for doc in chunks)
    searched = {query.casefold().strip() for query in state.queries_tried}
    names: list[str] = []
    for entity in entity_names(pages, state.question, chunks, CANDIDATE_SCAN):
        if entity.name.casefold() in searched or entity.name in names:
            continue
        names.append(entity.name)
        if len(names) >= limit:
            break
    return names


def suggested_search(state: LoopState) -> str | None:
    """
    The search the loop makes in place of the model's next decision after a refused turn.

    It is the first candidate the chunks suggest (`search_candidates`), so that a refused decision costs the run no
    progress and no further call.

    :returns: The candidate, or `None` when the latest turn was not refused or the chunks suggest nothing new.
    """
    if not _last_turn_refusals(state):
        return None
    candidates = search_candidates(state, limit=1)
    return candidates[0] if candidates else None


def refused_turns(state: LoopState) -> int:
    """
    How many of the latest router turns in a row were refused.

    A refused turn has every step `invalid`; the searches the loop made in place of refused decisions
    (`SUGGESTED_SEARCH_REASON`) do not break the row.
    """
    turns: dict[int, list[ToolStep]] = {}
    for step in state.tool_history:
        turns.setdefault(step.iteration, []).append(step)
    count = 0
    for iteration in sorted(turns, reverse=True):
        steps = turns[iteration]
        if all(step.action == "search" and step.reasoning == SUGGESTED_SEARCH_REASON for step in steps):
            continue
        if not all(step.action == "invalid" for step in steps):
            break
        count += 1
    return count


def _last_turn_refusals(state: LoopState) -> list[str]:
    """Why each step of the latest turn was refused; `[]` when that turn was not refused."""
    if not state.tool_history:
        return []
    last = [step for step in state.tool_history if step.iteration == state.tool_history[-1].iteration]
    if not all(step.action == "invalid" for step in last):
        return []
    return [step.result or "invalid reply" for step in last]


def refused_turn_note(state: LoopState, say_why: bool = True) -> str | None:
    """
    The feedback after a refused turn the loop made no search in place of.

    The chunks suggested nothing new. It says why (unless `say_why` is off: a tool error said it) and what to do
    instead; `None` after any other turn.
    """
    reasons = _last_turn_refusals(state)
    if not reasons:
        return None
    why = "; ".join(dict.fromkeys(reason.strip().rstrip(".") for reason in reasons))
    note = f"Your last reply was not used ({why})." if say_why else ""
    return f"{note} Search for something new, or answer from the chunks.".strip()


def with_refused_turn_note(state: LoopState) -> LoopState:
    """
    Tools mode: the state with the feedback of a refused turn added to the next turn's messages.

    Before a router turn after a refused turn: the feedback added to the refusal's last tool error (or
    to the user's nudge; else a new user message). Any other turn: the state as it is.
    """
    if not _last_turn_refusals(state):
        return state
    last = state.messages[-1] if state.messages else None
    if last is not None and last.tool_call_result is not None:  # the refusal's tool error said why: the rest follows
        note, result = refused_turn_note(state, say_why=False), last.tool_call_result
        told = ChatMessage.from_tool(f"{result.result}\n{note}", origin=result.origin, error=result.error)
        return state.evolve(messages=(*state.messages[:-1], told))
    note = refused_turn_note(state) or ""
    if last is not None and last.role == ChatRole.USER and last.text:
        return state.evolve(messages=(*state.messages[:-1], ChatMessage.from_user(f"{last.text}\n{note}")))
    return state.with_messages(ChatMessage.from_user(note))


def absorb_refusals(routed: dict[str, Any], turn: int) -> dict[str, Any]:
    """
    A router turn's route, with refusals absorbed.

    An answer with no words of its own (only markers, whitespace or
    tool-call text) becomes a refused step; after `MAX_REFUSED_TURNS` refused turns in a row the loop stops
    (`stop_reason`) so that the run answers from its chunks.
    """
    answering = routed.get("answer")
    if answering is not None and answering.pending_action == "answer" and answering.tool_history:
        last = answering.tool_history[-1]
        if last.action == "answer" and not (
            has_own_words(answering.draft, run_tool_names(answering)) and not _call_text(answering)
        ):
            why = f"the answer {(answering.draft or '')[:80]!r} has no words of its own: write the answer in words"
            step = ToolStep(turn, "invalid", tool_name=last.tool_name, arguments=last.arguments, result=why)
            state = answering.evolve(tool_history=(*answering.tool_history[:-1], step), draft=None, pending_action=None)
            routed = {"loop": _close_open_calls(state, why)}
    state = routed.get("loop")
    if state is None or state.stop_reason or state.pending is not None or state.queued:
        return routed
    refused = refused_turns(state)
    if refused >= MAX_REFUSED_TURNS:
        reason = f"{refused} refused decisions in a row: answering from the chunks found"
        logger.warning("AgenticRouter: {reason}", reason=reason)
        routed["loop"] = state.evolve(stop_reason=reason)
    return routed


def _call_text(state: LoopState) -> bool:
    """
    Whether the draft only repeats the text of an earlier assistant message that made tool calls.

    A small model copies it back as its answer.
    """
    draft = (state.draft or "").strip().casefold()
    return any(
        message.tool_calls and (message.text or "").strip().casefold() == draft
        for message in state.messages
        if message.role == ChatRole.ASSISTANT
    )


def _close_open_calls(state: LoopState, why: str) -> LoopState:
    """Answer every tool call of the latest assistant message that has no result yet with `why` (a tool error)."""
    assistant = [i for i, message in enumerate(state.messages) if message.role == ChatRole.ASSISTANT]
    if not assistant:
        return state
    answered = {m.tool_call_result.origin.id for m in state.messages[assistant[-1] + 1 :] if m.tool_call_result}
    open_calls = [call for call in state.messages[assistant[-1]].tool_calls if call.id not in answered]
    return state.with_messages(*(ChatMessage.from_tool(why, origin=call, error=True) for call in open_calls))
