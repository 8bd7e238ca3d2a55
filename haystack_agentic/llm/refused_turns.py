# SPDX-License-Identifier: Apache-2.0
"""
What `AgenticRouter` does with a refused decision (a repeated or empty search, an invalid reply, an answer with no
words of its own): it tells the model why, offers the searches the chunks suggest (the bridge entities of
`policies.mention_search`, numbered, no LLM call), and after `MAX_REFUSED_TURNS` refused turns in a row stops the
loop so that the run answers from its chunks instead of spending the rest of its turns.
"""

import re
from typing import Any

from haystack import logging
from haystack.dataclasses import ChatMessage, ChatRole

from haystack_agentic.dataclasses.loop_state import LoopState, ToolStep
from haystack_agentic.grounding.markers import has_own_words
from haystack_agentic.policies.entity_scoring import PageIndex
from haystack_agentic.policies.mention_search import entity_names

logger = logging.getLogger(__name__)

#: Refused turns in a row after which the loop stops and answers from its chunks: one refusal is a slip the
#: feedback can fix; a second in a row shows the model is not getting anywhere, and each further turn costs a call.
MAX_REFUSED_TURNS = 2

#: Most candidate searches offered after a refusal (a short numbered list a small model can pick from).
MAX_CANDIDATES = 4

#: How many of the run's best chunks the candidates are read from (the bridge policy scans its best chunks too).
CANDIDATE_SCAN = 3

#: `LoopState.metadata` key: the candidate searches offered after the last refused turn, in their numbered order.
CANDIDATES_KEY = "search_candidates"

#: `LoopState.metadata` key set when the run's answer is forced at the turn limit (it ends `max_iterations`).
FORCED_AT_CAP = "answer_forced_at_cap"

#: A pick of a numbered candidate: "2", "#2", "2.", "(2)", "option 2".
_NUMBER_PICK = re.compile(r"^\s*(?:option|candidate|number|no\.?)?\s*[#(]?\s*(\d{1,2})\s*[.)]?\s*$", re.IGNORECASE)


def search_candidates(state: LoopState, limit: int = MAX_CANDIDATES) -> list[str]:
    """
    The next searches the run's chunks suggest: names in its best chunks that the question does not contain and
    that were not searched yet (the bridge entities), best first.

    :param state: The run's state (its question, chunks and searches).
    :param limit: Most candidates returned.
    :returns: Up to `limit` names; `[]` without chunks.
    """
    # Only chunks the policy can read: text content, and a title that is a string when there is one (a user tool's
    # Document may carry anything).
    chunks = [
        doc for doc in state.chunks
        if isinstance(doc.content, str) and isinstance(doc.meta, dict) and isinstance(doc.meta.get("title") or "", str)
    ]  # fmt: skip
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


def picked_candidate(state: LoopState, query: str) -> str:
    """The search a query picks: the candidate it numbers ("2" -> the second one offered), else the query itself."""
    offered = list((state.metadata or {}).get(CANDIDATES_KEY) or ())
    match = _NUMBER_PICK.match(query or "")
    if match and offered and 1 <= int(match.group(1)) <= len(offered):
        return offered[int(match.group(1)) - 1]
    return query


def refused_turns(state: LoopState) -> int:
    """How many of the latest router turns in a row were refused (every step of the turn `invalid`)."""
    turns: dict[int, list[ToolStep]] = {}
    for step in state.tool_history:
        turns.setdefault(step.iteration, []).append(step)
    count = 0
    for iteration in sorted(turns, reverse=True):
        if not all(step.action == "invalid" for step in turns[iteration]):
            break
        count += 1
    return count


def _last_turn_refusals(state: LoopState) -> list[str]:
    """Why each step of the latest turn was refused; `[]` when that turn was not refused."""
    if not state.tool_history or refused_turns(state) == 0:
        return []
    last = state.tool_history[-1].iteration
    return [step.result or "invalid reply" for step in state.tool_history if step.iteration == last]


def refused_turn_note(state: LoopState, mode: str = "json", say_why: bool = True) -> str | None:
    """The feedback after a refused turn: why (unless `say_why` is off: a tool error said it), and the numbered
    candidate searches; `None` after any other turn."""
    reasons = _last_turn_refusals(state)
    if not reasons:
        return None
    why = "; ".join(dict.fromkeys(reason.strip().rstrip(".") for reason in reasons))
    note = f"Your last reply was not used ({why})." if say_why else ""
    offered = list((state.metadata or {}).get(CANDIDATES_KEY) or ()) or search_candidates(state)
    if offered:
        listed = "\n".join(f"{number}. {name}" for number, name in enumerate(offered, 1))
        how = 'search(query="1")' if mode == "tools" else '"action": "search", "query": "1"'
        note += (
            f"{chr(10) if note else ''}Searches the chunks found so far suggest:\n{listed}\n"
            f"Pick one by its number or its name ({how}), search for something else that is new, or answer from the "
            "chunks."
        )
    else:
        note = f"{note} Search for something new, or answer from the chunks.".strip()
    return note


def with_candidates(state: LoopState, mode: str) -> LoopState:
    """
    Before a router turn: after a refused turn, the candidate searches in `metadata` (so a number picks one) and, in
    tools mode, the feedback added to the refusal's last tool error (or user nudge; else a new user message);
    otherwise no candidates.
    """
    metadata = dict(state.metadata or {})
    if not _last_turn_refusals(state):
        if CANDIDATES_KEY in metadata:
            metadata.pop(CANDIDATES_KEY)
            return state.evolve(metadata=metadata)
        return state
    metadata[CANDIDATES_KEY] = search_candidates(state)
    state = state.evolve(metadata=metadata)
    if mode != "tools":
        return state
    last = state.messages[-1] if state.messages else None
    if last is not None and last.tool_call_result is not None:  # the refusal's tool error said why: the rest follows
        note, result = refused_turn_note(state, mode, say_why=False), last.tool_call_result
        told = ChatMessage.from_tool(f"{result.result}\n{note}", origin=result.origin, error=result.error)
        return state.evolve(messages=(*state.messages[:-1], told))
    note = refused_turn_note(state, mode) or ""
    if last is not None and last.role == ChatRole.USER and last.text:
        return state.evolve(messages=(*state.messages[:-1], ChatMessage.from_user(f"{last.text}\n{note}")))
    return state.with_messages(ChatMessage.from_user(note))


def absorb_refusals(routed: dict[str, Any], turn: int) -> dict[str, Any]:
    """
    A router turn's route, with refusals absorbed: an answer with no words of its own (only markers, whitespace or
    tool-call text) becomes a refused step; after `MAX_REFUSED_TURNS` refused turns in a row the loop stops
    (`stop_reason`) so that the run answers from its chunks.
    """
    answering = routed.get("answer")
    if answering is not None and answering.pending_action == "answer" and answering.tool_history:
        last = answering.tool_history[-1]
        if last.action == "answer" and not (has_own_words(answering.draft) and not _call_text(answering)):
            why = f"the answer {(answering.draft or '')[:80]!r} has no words of its own: write the answer in words"
            step = ToolStep(turn, "invalid", tool_name=last.tool_name, arguments=last.arguments, result=why)
            state = answering.evolve(
                tool_history=(*answering.tool_history[:-1], step), draft=None, pending_action=None
            )
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
    """Whether the draft only repeats the text of an earlier assistant message that made tool calls: a small model
    copies it back as its answer."""
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

