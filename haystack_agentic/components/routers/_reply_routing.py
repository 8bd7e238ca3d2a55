# SPDX-License-Identifier: Apache-2.0

"""How AgenticRouter routes the controller's reply: the json-mode decision and the tools-mode tool calls."""

import json
from typing import Any

from haystack import logging
from haystack.dataclasses import ChatMessage, ToolCall
from haystack.tools import Tool

from haystack_agentic.components.routers._tool_arguments import (
    _BUILTIN_TOOL_NAMES,
    _JSON_ACTIONS,
    ANSWER_TOOL_NAME,
    GIVE_UP_TOOL_NAME,
    READ_TOOL_NAME,
    SEARCH_TOOL_NAME,
    _builtin_tools,
    _chosen_collection,
    _give_up,
    _InvalidArgumentsError,
    _parse_arguments,
    _required_text,
    _safe_arguments,
    parse_json_decision,
)
from haystack_agentic.dataclasses.loop_state import LoopState, PendingSearch, ToolStep
from haystack_agentic.dataclasses.pending_search import SEARCH_PLACEHOLDER
from haystack_agentic.indexing.collections import and_filters, collection_filter
from haystack_agentic.llm.calls import LLMCall
from haystack_agentic.llm.result_digests import find_chunk, read_chunk_text, short_id, with_digest
from haystack_agentic.llm.text_tool_calls import RECOVERED_TOOL_CALLS, recover_tool_calls
from haystack_agentic.llm.tool_arguments import decode_arguments, whole_number
from haystack_agentic.llm.user_tools import invoke_user_tool

logger = logging.getLogger(__name__)

#: Text of a search's place-holding tool message (replaced by the search's result before the model sees it).
_PLACEHOLDER_TEXT = "Search queued; its result replaces this message."

#: Tool call id and step reasoning of the run's first search (the question, sent without an LLM call).
QUESTION_SEARCH_ID = "search-question"
QUESTION_SEARCH_REASON = "the question itself, searched first without an LLM call"

_EMPTY_REPLY_NUDGE = (
    "Your reply was empty. Call one tool: search(query) to look something up, answer(text) to answer, "
    "or give_up(reason)."
)


class _ReplyRouting:
    """`AgenticRouter`'s reply routing (a mixin using its `strict`, `default_top_k`, `max_top_k`, `_user_tools`)."""

    def _offered_tools(self, state: LoopState) -> list[Tool]:
        """The tools of a tools-mode call: the loop's own (a scoped run's `search` takes a `collection`), the user's."""
        if state.collections:
            return [*_builtin_tools(self.max_top_k, state.collections), *self._user_tools.values()]
        return self._all_tools

    def _route_json(self, state: LoopState, call: LLMCall, turn: int) -> dict[str, Any]:
        decision = parse_json_decision(call.text)
        action = str(decision.get("action", "")).strip().lower() if decision else ""
        reasoning = decision.get("reasoning") if decision else None
        reasoning = reasoning if isinstance(reasoning, str) else None
        if action not in _JSON_ACTIONS:
            problem = "no JSON object with an 'action'" if decision is None else f"unknown action {action!r}"
            if self.strict:
                msg = f"AgenticRouter (json mode, strict) got {problem} in the reply: {call.text!r}"
                raise ValueError(msg)
            logger.warning("Invalid json-mode decision ({problem}); going on to the next turn", problem=problem)
            step = ToolStep(iteration=turn, action="invalid", arguments=decision or {}, result=problem)
            return {"loop": state.with_step(step)}
        if action == "search":
            query = decision.get("query") if isinstance(decision.get("query"), str) else ""
            query = query.strip()
            query = query or (state.question if state.question not in state.queries_tried else "")
            query = query or (reasoning or "").strip()
            try:
                if not query:
                    msg = "search without query"
                    raise _InvalidArgumentsError(msg)
                collection = _chosen_collection(state.collections, decision.get("collection"))
                if _searched_in(state, query, collection):
                    msg = f'already searched for "{query}"'
                    raise _InvalidArgumentsError(msg)
            except _InvalidArgumentsError as exc:
                step = ToolStep(
                    turn,
                    "invalid",
                    query=query or None,
                    arguments=decision,
                    reasoning=reasoning if query else None,
                    result=str(exc),
                )
                return {"loop": state.with_step(step)}
            pending, step = _planned_search(state, turn, query, self.default_top_k, collection, decision, reasoning)
            return _sent(state.with_step(step), [pending])
        # Reflecting with no draft yet: the answerer writes a first draft instead.
        pending = ("reflect" if state.draft else "draft") if action == "reflect" else "answer"
        step = ToolStep(iteration=turn, action=action, arguments=decision, reasoning=reasoning)
        return {"answer": state.with_step(step).evolve(pending_action=pending)}

    def _route_tools(self, state: LoopState, call: LLMCall, turn: int) -> dict[str, Any]:
        reply = call.replies[0] if call.replies else None
        tool_calls = list(reply.tool_calls) if reply is not None else []
        text = call.text
        if reply is not None and not tool_calls and text:
            # Calls the model wrote as text run as calls, in the conversation as the reply's tool calls.
            finish_reason = (reply.meta or {}).get("finish_reason")
            tool_calls = recover_tool_calls(
                text, self._offered_tools(state), truncated=finish_reason == "length", id_prefix=f"text-call-{turn}"
            )
            if tool_calls:
                recovered = (state.metadata or {}).get(RECOVERED_TOOL_CALLS, 0) + len(tool_calls)
                state = state.evolve(metadata={**(state.metadata or {}), RECOVERED_TOOL_CALLS: recovered})
                reply = ChatMessage.from_assistant(text=text, meta=reply.meta, name=reply.name, tool_calls=tool_calls)
        if reply is not None:
            state = state.with_messages(_with_call_text(reply) if tool_calls and not text else reply)
        if not tool_calls:
            if text:
                step = ToolStep(iteration=turn, action="answer", result="plain-text reply", reasoning=None)
                return {"answer": state.with_step(step).evolve(draft=text, pending_action="answer")}
            if reply is None:
                state = state.with_messages(ChatMessage.from_assistant(""))
            # Reasoning models may think without a final text: that is an empty reply too.
            thought = reply.reasoning.reasoning_text if reply is not None and reply.reasoning else None
            return self._empty_reply(state, turn, "empty reply" + (" (reasoning only)" if thought else ""), None)

        # Every call runs, in call order. Searches run after the reply, one after another through the pipeline's
        # retriever (`pending`, then `queued`); a placeholder holds each one's place among the tool results.
        searches: list[tuple[PendingSearch, ToolStep, ChatMessage]] = []
        for tool_call in tool_calls:
            name = tool_call.tool_name
            if name == GIVE_UP_TOOL_NAME and not isinstance(decode_arguments(tool_call.arguments)[0], dict):
                # Giving up needs no reason: arguments the model could not write do not keep it looping.
                return {"finished": _give_up(_without(state, searches), turn, tool_call, _safe_arguments(tool_call))}
            try:
                arguments = _parse_arguments(tool_call)
                if name in (ANSWER_TOOL_NAME, GIVE_UP_TOOL_NAME):  # the turn ends: its searches do not run
                    return self._end_turn(_without(state, searches), turn, tool_call, arguments)
                if name == SEARCH_TOOL_NAME:
                    state = self._plan_search(state, turn, tool_call, arguments, searches)
                elif name == READ_TOOL_NAME:
                    state = _read_chunk(state, turn, tool_call, arguments)
                elif name in self._user_tools:
                    state = self._invoke_user_tool(state, turn, tool_call, arguments)
                else:
                    known = ", ".join([*_BUILTIN_TOOL_NAMES, *self._user_tools])
                    msg = f"unknown tool '{name}'; the tools are: {known}"
                    raise _InvalidArgumentsError(msg)
            except _InvalidArgumentsError as exc:
                message = f"Error in {name}: {exc}."
                step = ToolStep(turn, "invalid", tool_name=name, arguments=_safe_arguments(tool_call), result=message)
                state = state.with_messages(ChatMessage.from_tool(message, origin=tool_call, error=True))
                state = state.with_step(step)
        return _sent(state, [pending for pending, _, _ in searches]) if searches else {"loop": state}

    def _end_turn(self, state: LoopState, turn: int, tool_call: ToolCall, arguments: dict[str, Any]) -> dict[str, Any]:
        """An `answer` or `give_up` call (`_InvalidArgumentsError` for an answer without text)."""
        if tool_call.tool_name == GIVE_UP_TOOL_NAME:
            return {"finished": _give_up(state, turn, tool_call, arguments)}
        if isinstance(arguments.get("text"), str) and not arguments["text"].strip():
            # A blank answer is an empty reply: it counts towards the nudge-once limit.
            problem = "'text' is required and must be a non-empty string (blank answer)"
            return self._empty_reply(state, turn, f"Error in answer: {problem}.", tool_call)
        answer = _required_text(arguments, "text")
        step = ToolStep(iteration=turn, action="answer", tool_name=ANSWER_TOOL_NAME, arguments=arguments)
        return {"answer": state.with_step(step).evolve(draft=answer, pending_action="answer")}

    def _plan_search(
        self, state: LoopState, turn: int, tool_call: ToolCall, arguments: dict[str, Any], searches: list[Any]
    ) -> LoopState:
        """
        Add a search to `searches` (run after the reply), with a placeholder for its result; a repeated one is
        answered at once.
        """
        query = _required_text(arguments, "query")
        top_k = self._top_k(arguments.get("top_k"))
        collection = _chosen_collection(state.collections, arguments.get("collection"))
        limit = state.limits.max_searches_per_turn
        if len(searches) >= limit:
            msg = f"at most {limit} searches run per turn; search again next turn"
            raise _InvalidArgumentsError(msg)
        pending, step = _planned_search(state, turn, query, top_k, collection, arguments, tool_call=tool_call)
        if _searched_in(state, query, collection) or any(
            earlier.query.casefold() == query.casefold() and earlier_step.collections == step.collections
            for earlier, earlier_step, _ in searches
        ):
            again = f'You already searched for "{query}"; its chunks are above. Search for something else, or answer.'
            step = ToolStep(turn, "invalid", query=query, tool_name=SEARCH_TOOL_NAME, arguments=arguments, result=again)
            return state.with_messages(ChatMessage.from_tool(again, origin=tool_call)).with_step(step)
        held = ChatMessage.from_tool(_PLACEHOLDER_TEXT, origin=tool_call, meta={SEARCH_PLACEHOLDER: True})
        searches.append((pending, step, held))
        return state.with_step(step).with_messages(held)

    def _search_question(self, state: LoopState) -> dict[str, Any]:
        """
        The run's first search, sent without an LLM call: the question itself (in tools mode as a `search` call of
        the model's, so its result comes back to the model in the conversation).
        """
        return self._free_search(state, state.question, QUESTION_SEARCH_REASON, QUESTION_SEARCH_ID)

    def _free_search(self, state: LoopState, query: str, reason: str, call_id: str) -> dict[str, Any]:
        """
        A search the loop makes without an LLM call (the question first, or the chunks' suggestion after a
        refused decision); in tools mode it enters the conversation as a `search` call with id `call_id`.
        """
        turn, arguments = state.iteration + 1, {"query": query}
        tool_call = None
        if self.mode == "tools":
            tool_call = ToolCall(tool_name=SEARCH_TOOL_NAME, arguments=arguments, id=call_id)
        pending, step = _planned_search(state, turn, query, self.default_top_k, None, arguments, reason, tool_call)
        state = state.with_step(step)
        if tool_call is not None:
            held = ChatMessage.from_tool(_PLACEHOLDER_TEXT, origin=tool_call, meta={SEARCH_PLACEHOLDER: True})
            call = ChatMessage.from_assistant(call_text([tool_call]), tool_calls=[tool_call])
            state = self._opening(state).with_messages(call, held)
        return _sent(state, [pending])

    @staticmethod
    def _dispatch_queued(state: LoopState) -> dict[str, Any]:
        """Send the turn's next queued search to the retriever (no LLM call: the turn's reply asked for it)."""
        search, *rest = state.queued
        state = state.evolve(pending=search, queued=tuple(rest))
        filters = dict(search.filters) if search.filters else None
        return {"query": search.query, "filters": filters, "top_k": search.top_k, "loop": state}

    @staticmethod
    def _empty_reply(state: LoopState, turn: int, what: str, tool_call: ToolCall | None) -> dict[str, Any]:
        """An empty reply or a blank answer is never an answer: nudge the model once, then go to the fallback."""
        state = state.evolve(empty_replies=state.empty_replies + 1)
        name, arguments = (tool_call.tool_name, _safe_arguments(tool_call)) if tool_call else (None, {})
        state = state.with_step(ToolStep(turn, "invalid", tool_name=name, arguments=arguments, result=what))
        if tool_call is not None:
            state = state.with_messages(ChatMessage.from_tool(what, origin=tool_call, error=True))
        if state.empty_replies > 1:
            logger.warning("The controller LLM replied with nothing twice; handing over to the fallback.")
            return {"loop": state.evolve(stop_reason=f"controller LLM gave no usable reply twice ({what})")}
        if tool_call is not None:  # the tool error above is the nudge
            return {"loop": state}
        return {"loop": state.with_messages(ChatMessage.from_user(_EMPTY_REPLY_NUDGE))}

    def _top_k(self, value: Any) -> int | None:
        """
        The model's `top_k` (1..`max_top_k`, larger capped), the default if absent (`None`: the retriever's own);
        else `_InvalidArgumentsError`.
        """
        if value is None:
            return self.default_top_k
        try:
            return whole_number(value, 1, self.max_top_k)
        except ValueError as exc:
            msg = f"'top_k' {exc}"
            raise _InvalidArgumentsError(msg) from exc

    def _invoke_user_tool(
        self, state: LoopState, turn: int, tool_call: ToolCall, arguments: dict[str, Any]
    ) -> LoopState:
        """Run a user tool with Haystack's tool invocation; its Documents join the chunks (see `llm.user_tools`)."""
        tool = self._user_tools[tool_call.tool_name]
        outcome = invoke_user_tool(tool, tool_call, arguments, state.tool_state, state.filters)
        step = ToolStep(
            turn,
            "tool",
            tool_name=tool.name,
            arguments=arguments,
            result=outcome.text,
            returned_chunk_ids=tuple(doc.id for doc in outcome.documents),
        )
        state = state.with_step(step).with_messages(outcome.message).evolve(tool_state=outcome.tool_state)
        return state.merge_chunks(outcome.documents) if outcome.documents else state


#: Most characters of a chunk's text that `read_chunk` returns.
READ_CHUNK_MAX_CHARS = 8000


def _planned_search(
    state: LoopState,
    turn: int,
    query: str,
    top_k: int | None,
    collection: str | None,
    arguments: dict[str, Any],
    reasoning: str | None = None,
    tool_call: ToolCall | None = None,
) -> tuple[PendingSearch, ToolStep]:
    """A search and its step; a chosen collection narrows the run's filters (which hold its scope) to that one."""
    filters = and_filters(state.filters, collection_filter([collection] if collection else []))
    step = ToolStep(
        turn,
        "search",
        query=query,
        tool_name=tool_call.tool_name if tool_call else None,
        arguments=arguments,
        reasoning=reasoning,
        collections=(collection,) if collection else tuple(state.collections or ()),
    )
    return PendingSearch(query=query, top_k=top_k, filters=filters, tool_call=tool_call), step


def _sent(state: LoopState, searches: list[PendingSearch]) -> dict[str, Any]:
    """Send the first search to the retriever; the others wait in `queued`."""
    first, *rest = searches
    tried = (*state.queries_tried, *(search.query for search in searches))
    state = state.evolve(pending=first, queued=tuple(rest), queries_tried=tried)
    return {"query": first.query, "filters": first.filters, "top_k": first.top_k, "loop": state}


def _read_chunk(state: LoopState, turn: int, tool_call: ToolCall, arguments: dict[str, Any]) -> LoopState:
    """Answer a `read_chunk(id)` call with the chunk's full text (`_InvalidArgumentsError` for an id the run lacks)."""
    doc, problem = find_chunk(state.chunks, _required_text(arguments, "id"))
    if doc is None:
        raise _InvalidArgumentsError(problem)
    message = ChatMessage.from_tool(read_chunk_text(doc, READ_CHUNK_MAX_CHARS), origin=tool_call)
    title = (doc.meta or {}).get("title")
    digest = f"Read earlier: id={short_id(doc.id)}" + (f" title={title}" if title else "") + " (read_chunk again)."
    step = ToolStep(turn, "tool", tool_name=READ_TOOL_NAME, arguments=arguments, result=f"read chunk {doc.id}")
    return state.with_step(step).with_messages(with_digest(message, digest))


def _without(state: LoopState, searches: list[tuple[PendingSearch, ToolStep, ChatMessage]]) -> LoopState:
    """The state without the steps and placeholders of searches that will not run (the turn ended first)."""
    if not searches:
        return state
    steps = {id(step) for _, step, _ in searches}
    held = {id(message) for _, _, message in searches}
    return state.evolve(
        tool_history=tuple(s for s in state.tool_history if id(s) not in steps),
        messages=tuple(m for m in state.messages if id(m) not in held),
    )


def _with_call_text(reply: ChatMessage) -> ChatMessage:
    """
    The reply with its tool calls also written as its text (`call_text`): some local servers' chat templates fail
    (HTTP 500) on an assistant message with tool calls and no content.
    """
    return ChatMessage.from_assistant(
        text=call_text(reply.tool_calls),
        meta=reply.meta,
        name=reply.name,
        tool_calls=reply.tool_calls,
        reasoning=reply.reasoning,
    )


def call_text(tool_calls: list[ToolCall]) -> str:
    """
    The text of an assistant message with `tool_calls`: each call as one JSON object per line, `{"name": ...,
    "arguments": {...}}`. A small model copies the text of earlier turns; copied, this is a call the router recovers
    from text, where a description ("Calling search.") came back as the model's answer (Qwen2.5-Coder 0.5B, issue 38).
    """
    return "\n".join(
        json.dumps({"name": call.tool_name, "arguments": call.arguments}, ensure_ascii=False) for call in tool_calls
    )


def _searched_in(state: LoopState, query: str, collection: str | None) -> bool:
    """Whether this query (ignoring case) was searched before over the same collections."""
    if collection is None and not state.collections:
        return state.already_searched(query)
    covered = (collection,) if collection else tuple(state.collections or ())
    folded = query.casefold()
    return any(
        step.action == "search" and (step.query or "").casefold() == folded and step.collections == covered
        for step in state.tool_history
    )
