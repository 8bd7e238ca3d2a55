# SPDX-License-Identifier: Apache-2.0
"""
The tools-mode protocol of the controller LLM: the loop's own tools and the route of a reply's calls.

The tools are `search`, `answer`, `give_up` and `read_chunk`. A reply's calls (`route_tool_calls`) plan, deduplicate
and queue searches for the retriever, read a chunk, run a user tool, end the turn with an answer or a give-up; an
empty reply is nudged once.
"""

from collections.abc import Mapping
from typing import Any

from haystack import logging
from haystack.dataclasses import ChatMessage, ToolCall
from haystack.tools import Tool

from haystack_agentic.dataclasses.loop_state import LoopState, PendingSearch, ToolStep
from haystack_agentic.dataclasses.pending_search import SEARCH_PLACEHOLDER
from haystack_agentic.indexing.collections import and_filters, collection_filter
from haystack_agentic.llm.calls import LLMCall
from haystack_agentic.llm.result_digests import find_chunk, read_chunk_text, short_id, with_digest
from haystack_agentic.llm.text_tool_calls import RECOVERED_TOOL_CALLS, recover_tool_calls, with_call_text
from haystack_agentic.llm.tool_arguments import (
    InvalidArgumentsError,
    chosen_collection,
    decode_arguments,
    finite,
    parse_arguments,
    required_text,
    safe_arguments,
    top_k_argument,
)
from haystack_agentic.llm.user_tools import invoke_user_tool

logger = logging.getLogger(__name__)

ANSWER_TOOL_NAME = "answer"
SEARCH_TOOL_NAME = "search"
GIVE_UP_TOOL_NAME = "give_up"
READ_TOOL_NAME = "read_chunk"
#: The loop's own tools, which user tools may not be named like.
BUILTIN_TOOL_NAMES = (SEARCH_TOOL_NAME, ANSWER_TOOL_NAME, GIVE_UP_TOOL_NAME, READ_TOOL_NAME)

#: `LoopState.metadata` key: the names of the user tools the router offers in the run (tools mode), set when the
#: run's conversation opens, so that the answer roles know which calls written as text are the run's tools.
USER_TOOLS_KEY = "user_tools"


def run_tool_names(state: LoopState) -> tuple[str, ...]:
    """
    The names of the tools of a run: the loop's own (`BUILTIN_TOOL_NAMES`) and the user tools the router offers.

    The names of the tools of a run: the loop's own (`BUILTIN_TOOL_NAMES`, which name json mode's actions too) and
    the user tools the router offers (`USER_TOOLS_KEY`). Text that calls one of them is tool-call text, not an
    answer in words (`grounding.markers.has_own_words`).
    """
    user = (state.metadata or {}).get(USER_TOOLS_KEY) or ()
    return (*BUILTIN_TOOL_NAMES, *(name for name in user if isinstance(name, str)))


#: Most characters of a chunk's text that `read_chunk` returns.
READ_CHUNK_MAX_CHARS = 8000

#: Text of a search's place-holding tool message (replaced by the search's result before the model sees it).
PLACEHOLDER_TEXT = "Search queued; its result replaces this message."

#: What the model is told after its first empty reply.
EMPTY_REPLY_NUDGE = (
    "Your reply was empty. Call one tool: search(query) to look something up, answer(text) to answer, "
    "or give_up(reason)."
)


def _not_invoked(**_kwargs: Any) -> str:
    msg = "Built-in loop tools are handled by AgenticRouter, not invoked directly."
    raise RuntimeError(msg)


def _tool(name: str, description: str, properties: dict[str, Any], required: list[str]) -> Tool:
    parameters = {"type": "object", "properties": properties, **({"required": required} if required else {})}
    return Tool(name=name, description=description, parameters=parameters, function=_not_invoked)


def builtin_tools(max_top_k: int, collections: Mapping[str, str] | None = None) -> list[Tool]:
    """
    The loop's own tools, for the controller LLM; with a run's `collections` (name -> description), `search` takes one.

    Their functions raise `RuntimeError`: `AgenticRouter` handles their calls.
    """
    search: dict[str, Any] = {
        "query": {"type": "string", "description": "What to look for: one entity or fact."},
        "top_k": {
            "type": "integer",
            "description": f"How many chunks to return (1-{max_top_k}).",
            "minimum": 1,
            "maximum": max_top_k,
        },
    }
    description = "Search the document collection. Returns numbered chunks with their ids."
    if collections:
        search["collection"] = {
            "type": "string",
            "enum": list(collections),
            "description": "Search only this collection; leave it out to search all of them.",
        }
        listed = "\n".join(f"- {name}: {text}" if text else f"- {name}" for name, text in collections.items())
        description += f" Collections you may search (argument `collection`; default: all of them):\n{listed}"
    sources_ids = "The ids (id=...) of the chunks the answer rests on."
    sources = {"type": "array", "items": {"type": "string"}, "description": sources_ids}
    return [
        _tool(SEARCH_TOOL_NAME, description, search, ["query"]),
        _tool(
            ANSWER_TOOL_NAME,
            "Give the final answer to the question, based on the chunks found.",
            {"text": {"type": "string", "description": "The answer."}, "sources": sources},
            ["text"],
        ),
        _tool(
            GIVE_UP_TOOL_NAME,
            "Stop without an answer, saying why the collection cannot answer the question.",
            {"reason": {"type": "string", "description": "Why no answer can be given (optional)"}},
            [],
        ),
        _tool(
            READ_TOOL_NAME,
            "Show the full text of a chunk found earlier (earlier results are shown as digests).",
            {"id": {"type": "string", "description": "The chunk's id as listed (id=...)."}},
            ["id"],
        ),
    ]


def give_up(state: LoopState, turn: int, tool_call: ToolCall, arguments: dict[str, Any]) -> LoopState:
    """End the run with `gave_up`, with the model's `reason` when it gave one."""
    reason = arguments.get("reason")
    reason = reason.strip() if isinstance(reason, str) and reason.strip() else "no reason given."
    step = ToolStep(iteration=turn, action="give_up", tool_name=tool_call.tool_name, arguments=finite(arguments))
    return state.with_step(step).finish("gave_up", answer=f"I could not find an answer: {reason}")


def end_turn(state: LoopState, turn: int, tool_call: ToolCall, arguments: dict[str, Any]) -> dict[str, Any]:
    """
    The route of an `answer` or `give_up` call: `answer` (the draft set) or `finished`.

    A blank answer is an empty reply (`empty_reply`).

    :raises InvalidArgumentsError: For an answer whose `text` is missing or not a string.
    """
    if tool_call.tool_name == GIVE_UP_TOOL_NAME:
        return {"finished": give_up(state, turn, tool_call, arguments)}
    if isinstance(arguments.get("text"), str) and not arguments["text"].strip():
        # A blank answer is an empty reply: it counts towards the nudge-once limit.
        problem = "'text' is required and must be a non-empty string (blank answer)"
        return empty_reply(state, turn, f"Error in answer: {problem}.", tool_call)
    answer = required_text(arguments, "text")
    step = ToolStep(iteration=turn, action="answer", tool_name=ANSWER_TOOL_NAME, arguments=arguments)
    return {"answer": state.with_step(step).evolve(draft=answer, pending_action="answer")}


def empty_reply(state: LoopState, turn: int, what: str, tool_call: ToolCall | None) -> dict[str, Any]:
    """
    The `loop` route of an empty reply or a blank answer (`what` happened, from `tool_call` if any), never an answer.

    The model is nudged once; the second time the state carries a `stop_reason` for the fallback.
    """
    state = state.evolve(empty_replies=state.empty_replies + 1)
    name, arguments = (tool_call.tool_name, safe_arguments(tool_call)) if tool_call else (None, {})
    state = state.with_step(ToolStep(turn, "invalid", tool_name=name, arguments=arguments, result=what))
    if tool_call is not None:
        state = state.with_messages(ChatMessage.from_tool(what, origin=tool_call, error=True))
    if state.empty_replies > 1:
        logger.warning("The controller LLM replied with nothing twice; handing over to the fallback.")
        return {"loop": state.evolve(stop_reason=f"controller LLM gave no usable reply twice ({what})")}
    if tool_call is not None:  # the tool error above is the nudge
        return {"loop": state}
    return {"loop": state.with_messages(ChatMessage.from_user(EMPTY_REPLY_NUDGE))}


def read_chunk(state: LoopState, turn: int, tool_call: ToolCall, arguments: dict[str, Any]) -> LoopState:
    """
    Answer a `read_chunk(id)` call with the chunk's full text (at most `READ_CHUNK_MAX_CHARS`).

    :raises InvalidArgumentsError: For an id the run's chunks lack, or share with another chunk.
    """
    doc, problem = find_chunk(state.chunks, required_text(arguments, "id"))
    if doc is None:
        raise InvalidArgumentsError(problem)
    message = ChatMessage.from_tool(read_chunk_text(doc, READ_CHUNK_MAX_CHARS), origin=tool_call)
    title = (doc.meta or {}).get("title")
    digest = f"Read earlier: id={short_id(doc.id)}" + (f" title={title}" if title else "") + " (read_chunk again)."
    step = ToolStep(turn, "tool", tool_name=READ_TOOL_NAME, arguments=arguments, result=f"read chunk {doc.id}")
    return state.with_step(step).with_messages(with_digest(message, digest))


def run_user_tool(state: LoopState, turn: int, tool: Tool, tool_call: ToolCall, arguments: dict[str, Any]) -> LoopState:
    """Run a user tool with Haystack's tool invocation; its Documents join the chunks (see `llm.user_tools`)."""
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


def planned_search(
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


def searched_in(state: LoopState, query: str, collection: str | None) -> bool:
    """
    Whether this query (ignoring case) was searched before over the same collections.

    A search narrowed to one page (the search policy's: `filters` in its step's arguments) does not count: the same
    words over the whole store are a new search.
    """
    folded = query.casefold()
    same = [step for step in state.tool_history if step.action == "search" and (step.query or "").casefold() == folded]
    narrowed = sum("filters" in (step.arguments or {}) for step in same)
    if collection is None and not state.collections:
        return sum(q.casefold() == folded for q in state.queries_tried) > narrowed
    covered = (collection,) if collection else tuple(state.collections or ())
    return any(step.collections == covered and "filters" not in (step.arguments or {}) for step in same)


def send_searches(state: LoopState, searches: list[PendingSearch]) -> dict[str, Any]:
    """The search route: the first search goes to the retriever, the others wait in `queued`."""
    first, *rest = searches
    tried = (*state.queries_tried, *(search.query for search in searches))
    state = state.evolve(pending=first, queued=tuple(rest), queries_tried=tried)
    return {"query": first.query, "filters": first.filters, "top_k": first.top_k, "loop": state}


def send_queued(state: LoopState) -> dict[str, Any]:
    """The search route of the turn's next queued search (no LLM call: the turn's reply asked for it)."""
    search, *rest = state.queued
    state = state.evolve(pending=search, queued=tuple(rest))
    filters = dict(search.filters) if search.filters else None
    return {"query": search.query, "filters": filters, "top_k": search.top_k, "loop": state}


def without_searches(state: LoopState, searches: list[tuple[PendingSearch, ToolStep, ChatMessage]]) -> LoopState:
    """The state without the steps and placeholders of `searches` that will not run (the turn ended first)."""
    if not searches:
        return state
    steps = {id(step) for _, step, _ in searches}
    held = {id(message) for _, _, message in searches}
    return state.evolve(
        tool_history=tuple(s for s in state.tool_history if id(s) not in steps),
        messages=tuple(m for m in state.messages if id(m) not in held),
    )


def route_tool_calls(
    state: LoopState,
    call: LLMCall,
    turn: int,
    *,
    offered: list[Tool],
    user_tools: Mapping[str, Tool],
    default_top_k: int | None,
    max_top_k: int,
) -> dict[str, Any]:
    """
    The route of a tools-mode reply (`call`, of 1-based `turn`).

    Calls written as text run as calls when they name an `offered` tool with valid arguments; every call runs, in
    call order: searches (`default_top_k` chunks unless the model asks for up to `max_top_k`) are queued for the
    retriever, `read_chunk` and `user_tools` answer at once, `answer` or `give_up` end the turn; bad calls go back to
    the model as tool errors. A reply with text and no call is an answer; an empty one is nudged once (`empty_reply`).
    """
    reply = call.replies[0] if call.replies else None
    tool_calls = list(reply.tool_calls) if reply is not None else []
    text = call.text
    if reply is not None and not tool_calls and text:
        # Calls the model wrote as text run as calls, in the conversation as the reply's tool calls.
        finish_reason = (reply.meta or {}).get("finish_reason")
        tool_calls = recover_tool_calls(
            text, offered, truncated=finish_reason == "length", id_prefix=f"text-call-{turn}"
        )
        if tool_calls:
            recovered = (state.metadata or {}).get(RECOVERED_TOOL_CALLS, 0) + len(tool_calls)
            state = state.evolve(metadata={**(state.metadata or {}), RECOVERED_TOOL_CALLS: recovered})
            reply = ChatMessage.from_assistant(text=text, meta=reply.meta, name=reply.name, tool_calls=tool_calls)
    if reply is not None:
        state = state.with_messages(with_call_text(reply) if tool_calls and not text else reply)
    if not tool_calls:
        if text:
            step = ToolStep(iteration=turn, action="answer", result="plain-text reply", reasoning=None)
            return {"answer": state.with_step(step).evolve(draft=text, pending_action="answer")}
        if reply is None:
            state = state.with_messages(ChatMessage.from_assistant(""))
        # Reasoning models may think without a final text: that is an empty reply too.
        thought = reply.reasoning.reasoning_text if reply is not None and reply.reasoning else None
        return empty_reply(state, turn, "empty reply" + (" (reasoning only)" if thought else ""), None)

    # Every call runs, in call order. Searches run after the reply, one after another through the pipeline's
    # retriever (`pending`, then `queued`); a placeholder holds each one's place among the tool results.
    searches: list[tuple[PendingSearch, ToolStep, ChatMessage]] = []
    for tool_call in tool_calls:
        name = tool_call.tool_name
        if name == GIVE_UP_TOOL_NAME and not isinstance(decode_arguments(tool_call.arguments)[0], dict):
            # Giving up needs no reason: arguments the model could not write do not keep it looping.
            return {"finished": give_up(without_searches(state, searches), turn, tool_call, safe_arguments(tool_call))}
        try:
            arguments = parse_arguments(tool_call)
            if name in (ANSWER_TOOL_NAME, GIVE_UP_TOOL_NAME):  # the turn ends: its searches do not run
                return end_turn(without_searches(state, searches), turn, tool_call, arguments)
            if name == SEARCH_TOOL_NAME:
                state = plan_search(state, turn, tool_call, arguments, searches, default_top_k, max_top_k)
            elif name == READ_TOOL_NAME:
                state = read_chunk(state, turn, tool_call, arguments)
            elif name in user_tools:
                state = run_user_tool(state, turn, user_tools[name], tool_call, arguments)
            else:
                known = ", ".join([*BUILTIN_TOOL_NAMES, *user_tools])
                msg = f"unknown tool '{name}'; the tools are: {known}"
                raise InvalidArgumentsError(msg)
        except InvalidArgumentsError as exc:
            message = f"Error in {name}: {exc}."
            step = ToolStep(turn, "invalid", tool_name=name, arguments=safe_arguments(tool_call), result=message)
            state = state.with_messages(ChatMessage.from_tool(message, origin=tool_call, error=True))
            state = state.with_step(step)
    return send_searches(state, [pending for pending, _, _ in searches]) if searches else {"loop": state}


def plan_search(
    state: LoopState,
    turn: int,
    tool_call: ToolCall,
    arguments: dict[str, Any],
    searches: list[tuple[PendingSearch, ToolStep, ChatMessage]],
    default_top_k: int | None,
    max_top_k: int,
) -> LoopState:
    """
    Add a `search` call's search to the turn's `searches` (run after the reply), with a placeholder for its result.

    A repeated search is answered at once. Its `top_k`: `top_k_argument`.

    :raises InvalidArgumentsError: For a missing query, a bad `top_k`, a collection outside the run's, or a search
        over the run's `max_searches_per_turn`.
    """
    query = required_text(arguments, "query")
    top_k = top_k_argument(arguments.get("top_k"), default_top_k, max_top_k)
    collection = chosen_collection(state.collections, arguments.get("collection"))
    limit = state.limits.max_searches_per_turn
    if len(searches) >= limit:
        msg = f"at most {limit} searches run per turn; search again next turn"
        raise InvalidArgumentsError(msg)
    pending, step = planned_search(state, turn, query, top_k, collection, arguments, tool_call=tool_call)
    if searched_in(state, query, collection) or any(
        earlier.query.casefold() == query.casefold() and earlier_step.collections == step.collections
        for earlier, earlier_step, _ in searches
    ):
        again = f'You already searched for "{query}"; its chunks are above. Search for something else, or answer.'
        step = ToolStep(turn, "invalid", query=query, tool_name=SEARCH_TOOL_NAME, arguments=arguments, result=again)
        return state.with_messages(ChatMessage.from_tool(again, origin=tool_call)).with_step(step)
    held = ChatMessage.from_tool(PLACEHOLDER_TEXT, origin=tool_call, meta={SEARCH_PLACEHOLDER: True})
    searches.append((pending, step, held))
    return state.with_step(step).with_messages(held)
