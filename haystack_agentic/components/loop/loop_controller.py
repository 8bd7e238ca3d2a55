# SPDX-License-Identifier: Apache-2.0

import unicodedata
from dataclasses import replace
from typing import Annotated, Any

from haystack import Document, component, logging
from haystack.dataclasses import ChatMessage, ChatRole, StreamingCallbackT
from haystack.errors import FilterError
from haystack.utils.filters import LOGICAL_OPERATORS, document_matches_filter
from pydantic import StringConstraints

from haystack_agentic.dataclasses.loop_state import LoopLimits, LoopState
from haystack_agentic.dataclasses.pending_search import pending_search_step, result_in_place
from haystack_agentic.indexing.collections import CollectionLookup, and_filters, resolve_scope, scope_filter
from haystack_agentic.llm.result_digests import numbered_chunks, search_digest, shown_chunk_ids, with_digest
from haystack_agentic.llm.streaming import emit, emit_async, pick_callback, step_chunks
from haystack_agentic.llm.valid_text import LONE_SURROGATE, valid_document
from haystack_agentic.text import CONTROL_CHARACTERS_RE
from haystack_agentic.tracing import start_run, trace_search

logger = logging.getLogger(__name__)

#: Most searches one router turn runs by default (parallel tool calls).
DEFAULT_MAX_SEARCHES_PER_TURN = 4

#: Most characters of one chunk shown to the controller LLM in a search tool result.
DEFAULT_CHUNK_PREVIEW_CHARS = 1500

#: The init parameters that must be at least 1.
_AT_LEAST_ONE = (
    "max_iterations",
    "chunk_cap",
    "chunk_preview_chars",
    "max_question_chars",
    "max_search_failures",
    "max_searches_per_turn",
)

#: Longest question accepted by default, in characters.
DEFAULT_MAX_QUESTION_CHARS = 4000


class InvalidLoopInputError(ValueError):
    """A question or filters a run cannot start with; the message says what to send instead."""


#: The type of the `query` input: a string with a non-blank character (hayhooks refuses a blank one with a 422).
Question = Annotated[str, StringConstraints(pattern=r"\S")]


def validate_question(query: Any, max_chars: int | None = None) -> str:
    """
    Check a question before a run starts, and clean it (NFC, control characters but tab and newline to spaces).

    :param query: The question.
    :param max_chars: Longest question accepted, in characters, or `None` for no limit.
    :returns: The cleaned question, stripped.
    :raises InvalidLoopInputError: (a `ValueError`) If it is missing, not a string, blank, holds a lone UTF-16
        surrogate, or is longer than `max_chars`.
    """
    if query is None:
        msg = (
            "LoopController needs a `query` to start a run: pass the question as a string (or a conversation as "
            "`messages`)."
        )
        raise InvalidLoopInputError(msg)
    if not isinstance(query, str):
        msg = f"The query must be a string, got {type(query).__name__}."
        raise InvalidLoopInputError(msg)
    surrogate = LONE_SURROGATE.search(query)
    if surrogate:
        msg = (
            f"The query holds a lone UTF-16 surrogate (U+{ord(surrogate.group()):04X} at character "
            f"{surrogate.start()}), which is not Unicode text: send the question as valid UTF-8, without unpaired "
            "\\ud800-\\udfff escapes."
        )
        raise InvalidLoopInputError(msg)
    cleaned = CONTROL_CHARACTERS_RE.sub(" ", unicodedata.normalize("NFC", query)).strip()
    if not cleaned:
        msg = "The query is empty: pass a question with some text in it."
        raise InvalidLoopInputError(msg)
    if max_chars is not None and len(cleaned) > max_chars:
        msg = (
            f"The query is {len(cleaned)} characters long; the limit is {max_chars} "
            "(LoopController max_question_chars): shorten the question."
        )
        raise InvalidLoopInputError(msg)
    return cleaned


#: The roles a conversation given to the loop may hold: the loop runs its own tools, so no tool messages.
_CONVERSATION_ROLES = (ChatRole.SYSTEM, ChatRole.USER, ChatRole.ASSISTANT)


def validate_conversation(messages: Any, max_chars: int | None = None) -> tuple[str, tuple[ChatMessage, ...]]:
    """
    Check a conversation (system, user and assistant `ChatMessage`s) before a run starts from it.

    :param messages: The conversation, ending with the user's question.
    :param max_chars: Longest question accepted, in characters, or `None` for no limit.
    :returns: The question (cleaned as `validate_question` does) and the conversation as a tuple.
    :raises InvalidLoopInputError: (a `ValueError`) If it is not a non-empty list of `ChatMessage`, holds a tool message
        or tool calls, does not end with the user's question, or the question is not valid.
    """
    if not isinstance(messages, (list, tuple)):
        msg = f"`messages` must be a list of ChatMessage, got {type(messages).__name__}."
        raise InvalidLoopInputError(msg)
    if not messages:
        msg = "`messages` is empty: pass the conversation, ending with the user's question."
        raise InvalidLoopInputError(msg)
    for index, message in enumerate(messages):
        if not isinstance(message, ChatMessage):
            msg = (
                f"messages[{index}] is a {type(message).__name__}, not a ChatMessage: build it with "
                "ChatMessage.from_user / from_assistant / from_system."
            )
            raise InvalidLoopInputError(msg)
        if message.role not in _CONVERSATION_ROLES:
            msg = (
                f"messages[{index}] has role '{message.role.value}': a conversation for the loop holds system, "
                "user and assistant messages only (the loop runs its own tools)."
            )
            raise InvalidLoopInputError(msg)
        if message.tool_calls:
            msg = f"messages[{index}] is an assistant message with tool calls: send earlier answers as text only."
            raise InvalidLoopInputError(msg)
    users = [i for i, m in enumerate(messages) if m.role == ChatRole.USER]
    if not users:
        msg = "`messages` has no user message: end the conversation with the user's question."
        raise InvalidLoopInputError(msg)
    if users[-1] != len(messages) - 1:
        after = messages[users[-1] + 1].role.value
        msg = (
            f"The conversation must end with the user's question; a {after} message comes after the last user "
            "message: drop it, or ask the question last."
        )
        raise InvalidLoopInputError(msg)
    last = messages[-1]
    question = validate_question(last.text, max_chars)
    if last.text != question:  # control characters removed, whitespace trimmed: the LLMs see the clean question
        last = ChatMessage.from_user(question, meta=last.meta, name=last.name)
    return question, (*messages[:-1], last)


def _filters_type_error(filters: Any) -> str:
    return f"filters must be a dict of Haystack metadata filters, got {type(filters).__name__}."


def validate_filters(filters: Any) -> dict[str, Any] | None:
    """
    Check Haystack metadata filters before a run, so a malformed one fails here rather than in a retriever mid-loop.

    :param filters: The filters, or `None`.
    :returns: The filters (`None` for none or empty).
    :raises InvalidLoopInputError: (a `ValueError`) If they are not a dict or not valid Haystack filters; the message
        names the offending node (e.g. `filters.conditions[1]`) and what is wrong with it.
    """
    if filters is not None and not isinstance(filters, dict):
        raise InvalidLoopInputError(_filters_type_error(filters))
    if not filters:
        return None
    problem = _filter_problem(filters)
    if problem is not None:
        msg = f"Not a valid Haystack filter: {problem}. See {_FILTERS_DOCS}"
        raise InvalidLoopInputError(msg)
    return filters


_FILTERS_DOCS = "https://docs.haystack.deepset.ai/docs/metadata-filtering"


def _filter_problem(filters: dict[str, Any]) -> str | None:
    """The first problem found in a filter tree (walked without recursion), or `None`."""
    empty = Document(content="")
    pending: list[tuple[str, Any]] = [("filters", filters)]
    while pending:
        where, node = pending.pop()
        if not isinstance(node, dict):
            return f"{where} must be a dict (a condition or a group), got {type(node).__name__}"
        if "field" in node:
            if not isinstance(node["field"], str) or not node["field"]:
                return f"{where}: 'field' must be a non-empty string such as 'meta.title', got {node['field']!r}"
            try:
                document_matches_filter(node, empty)
            except (FilterError, TypeError, ValueError) as exc:
                return f"{where}: {exc}"
            continue
        if "operator" not in node:
            return (
                f"{where} has neither 'field' nor 'operator': a condition is "
                "{'field', 'operator', 'value'}, a group is {'operator': 'AND'|'OR'|'NOT', 'conditions': [...]}"
            )
        if node["operator"] not in LOGICAL_OPERATORS:
            valid = ", ".join(sorted(LOGICAL_OPERATORS))
            return f"{where}: unknown logical operator {node['operator']!r} (a group's operator is one of {valid})"
        conditions = node.get("conditions")
        if not isinstance(conditions, list):
            return f"{where}: a group needs 'conditions', a list of conditions or groups"
        pending.extend((f"{where}.conditions[{i}]", condition) for i, condition in enumerate(conditions))
    return None


@component
class LoopController:
    """
    Keeps the books of the agentic loop, from the start of a run to the iteration limit.

    It starts a run, merges retrieved chunks (dedup by id, capped at `chunk_cap`), gives each search result back to
    the controller LLM, counts iterations, stops at the limit.

    ### Usage example
    ```python
    from haystack import Document
    from haystack_agentic import LoopController

    controller = LoopController(max_iterations=3, chunk_cap=5)
    state = controller.run(query="Who directed Big Stone Gap?")["state"]
    print(state.iteration)  # 0
    ```
    """

    def __init__(
        self,
        max_iterations: int = 10,
        chunk_cap: int = 30,
        chunk_preview_chars: int = DEFAULT_CHUNK_PREVIEW_CHARS,
        max_question_chars: int = DEFAULT_MAX_QUESTION_CHARS,
        max_search_failures: int = 3,
        document_store: Any = None,
        max_searches_per_turn: int = DEFAULT_MAX_SEARCHES_PER_TURN,
    ) -> None:
        """
        Create a LoopController.

        :param max_iterations: Most router turns per run. Default 10.
        :param chunk_cap: Most chunks a run keeps; the lowest-scored are evicted first. Default 30.
        :param chunk_preview_chars: Most characters of each chunk in a search tool result. Default 1500.
        :param max_question_chars: Longest question accepted, in characters (after cleaning). Default 4000.
        :param max_search_failures: Failed searches in a row (reported by a `SafeRetriever`) after which the run
            ends with `terminated_by="error"`. Default 3.
        :param document_store: The store whose collections (`meta.collection`) a run's `collections` input names.
            `None` (default): the retriever's store, handed over by the loop builders (`use_collection_store`).
        :param max_searches_per_turn: Most searches one router turn runs (parallel tool calls); further ones go
            back to the model as tool errors. Default 4.
        :raises ValueError: If a limit is below 1.
        """
        self.max_iterations = max_iterations
        self.chunk_cap = chunk_cap
        self.chunk_preview_chars = chunk_preview_chars
        self.max_question_chars = max_question_chars
        self.max_search_failures = max_search_failures
        self.document_store = document_store
        self.max_searches_per_turn = max_searches_per_turn
        for name in _AT_LEAST_ONE:
            if getattr(self, name) < 1:
                msg = f"{name} must be at least 1, got {getattr(self, name)}"
                raise ValueError(msg)
        self._collections = CollectionLookup(document_store)

    @component.output_types(state=LoopState, exhausted=LoopState, failed=LoopState)
    def run(
        self,
        query: Question | None = None,
        filters: dict[str, Any] | None = None,
        state: LoopState | None = None,
        collections: str | list[str] | None = None,
        documents: list[Document] | None = None,
        search_error: str | None = None,
        revised: LoopState | None = None,
        refused: LoopState | None = None,
        messages: list[ChatMessage] | None = None,
        streaming_callback: StreamingCallbackT | None = None,
    ) -> dict[str, LoopState]:
        """
        Start a run, or record the turn that just happened and decide whether the loop goes on.

        :param query: The user's question; starts a run when no state is given.
        :param filters: Haystack metadata filters for every search of the run (first visit only).
        :param state: The state coming back from the router (`router.loop`).
        :param collections: The run's collection scope (first visit only): `"all"`, a collection name or a list of
            names (the store's `meta.collection` values), ANDed with `filters`. `None`: no scope.
        :param documents: The retriever's documents for the pending search, if this turn searched.
        :param search_error: Why the pending search failed (`SafeRetriever.error`): a tool error for the LLM.
        :param revised: The state back from the answerer after a reflect or draft turn (`answerer.state`).
        :param refused: The state back from the evidence check (`evidence.retry`).
        :param messages: Instead of `query`: the conversation, ending with the user's question.
        :param streaming_callback: Receives a `documents` step event when a search's chunks are recorded.
        :returns: `{"state": LoopState}` for another router turn, `{"exhausted": LoopState}` after `max_iterations`
            turns or a `state.stop_reason`, or `{"failed": LoopState}` (ended `error`) after `max_search_failures`
            failed searches in a row.
        :raises ValueError: On the first visit, for the inputs `validate_inputs` refuses.
        """
        callback, arrived = pick_callback(None, streaming_callback, is_async=False), state or revised or refused
        outputs = self._visit(query, filters, state, documents, search_error, revised, refused, messages, collections)
        emit(callback, step_chunks(arrived, next(iter(outputs.values()))) if arrived is not None else [])
        return outputs

    def _visit(
        self,
        query: Any,
        filters: Any,
        state: Any,
        documents: Any,
        search_error: Any,
        revised: Any,
        refused: Any,
        messages: Any,
        collections: Any,
    ) -> dict[str, LoopState]:
        arrived = [s for s in (state, revised, refused) if s is not None]
        if not arrived:
            return {"state": self._start(query, filters, collections, messages)}
        if len(arrived) > 1:
            msg = "LoopController got more than one state (router, answerer, evidence) in one visit."
            raise ValueError(msg)
        state = self._record_turn(arrived[0], documents, search_error)
        if state.search_failures >= self.max_search_failures:
            error = f"{state.search_failures} searches failed in a row; the last: {search_error}"
            logger.warning("Ending the run: {error}", error=error)
            return {"failed": state.finish("error", error=error)}
        if state.queued:  # the turn's next search: the router sends it on without an LLM call
            return {"state": state}
        if state.iteration >= state.limits.max_iterations or state.stop_reason:
            logger.debug("Loop exhausted after {iterations} iterations", iterations=state.iteration)
            return {"exhausted": state}
        return {"state": state}

    @component.output_types(state=LoopState, exhausted=LoopState, failed=LoopState)
    async def run_async(
        self,
        query: Question | None = None,
        filters: dict[str, Any] | None = None,
        state: LoopState | None = None,
        collections: str | list[str] | None = None,
        documents: list[Document] | None = None,
        search_error: str | None = None,
        revised: LoopState | None = None,
        refused: LoopState | None = None,
        messages: list[ChatMessage] | None = None,
        streaming_callback: StreamingCallbackT | None = None,
    ) -> dict[str, LoopState]:
        """Async twin of `run` (no I/O, so `Pipeline.run_async` runs it on the event loop)."""
        callback, arrived = pick_callback(None, streaming_callback, is_async=True), state or revised or refused
        outputs = self._visit(query, filters, state, documents, search_error, revised, refused, messages, collections)
        await emit_async(callback, step_chunks(arrived, next(iter(outputs.values()))) if arrived is not None else [])
        return outputs

    def use_collection_store(self, document_store: Any) -> None:
        """Read collection names from `document_store` (the retriever's; not serialised) when none was given."""
        if self.document_store is None:
            self._collections = CollectionLookup(document_store)

    def validate_inputs(
        self, query: Any = None, filters: Any = None, collections: Any = None, messages: Any = None
    ) -> tuple[str, tuple[ChatMessage, ...], dict[str, Any] | None, dict[str, str] | None]:
        """
        Check a run's inputs as `run` does on its first visit, without starting a run.

        :param query: The question, or `None` with `messages`.
        :param filters: Haystack metadata filters, or `None`.
        :param collections: The collection scope, or `None`.
        :param messages: The conversation, or `None` with `query`.
        :returns: `(question, conversation, filters with the scope's filter added, scope)`.
        :raises InvalidLoopInputError: On the inputs `run` refuses.
        """
        conversation: tuple[ChatMessage, ...] = ()
        if messages is not None:
            if query is not None:
                msg = "Pass either `query` or `messages` to LoopController, not both."
                raise InvalidLoopInputError(msg)
            question, conversation = validate_conversation(messages, self.max_question_chars)
        else:
            question = validate_question(query, self.max_question_chars)
        if filters is not None and not isinstance(filters, dict):
            raise InvalidLoopInputError(_filters_type_error(filters))
        scope = None
        if collections is not None:
            try:
                scope = resolve_scope(collections, self._collections.known())
            except ValueError as exc:
                raise InvalidLoopInputError(str(exc)) from exc
            filters = and_filters(filters, scope_filter(collections, scope))
        return question, conversation, filters, scope

    def _start(
        self, query: Any, filters: dict[str, Any] | None, collections: Any = None, messages: Any = None
    ) -> LoopState:
        question, conversation, filters, scope = self.validate_inputs(query, filters, collections, messages)
        return start_run(
            LoopState(
                question=question,
                limits=LoopLimits(self.max_iterations, self.chunk_cap, self.max_searches_per_turn),
                filters=filters or None,
                conversation=conversation,
                collections=scope,
                metadata={"collections": list(scope)} if scope is not None else {},
            )
        )

    def _record_turn(
        self, state: LoopState, documents: list[Document] | None, search_error: str | None = None
    ) -> LoopState:
        """Merge the pending search's documents, give its result back in its tool call's place, count the turn."""
        pending = state.pending
        if pending is not None:
            found = [valid_document(doc) for doc in documents or []]  # lone surrogates, NaN scores from a store
            shown = shown_chunk_ids(state.tool_history)  # before this search's step is filled in
            trace_search(state, pending.query, found, search_error)
            state = state.merge_chunks(found)
            changes: dict[str, Any] = {"returned_chunk_ids": tuple(doc.id for doc in found)}
            if search_error:
                changes["result"] = f"search failed: {search_error}"
            history = list(state.tool_history)
            index = pending_search_step(history, state.iteration + 1, len(state.queued), pending.query)
            if index is not None:
                history[index] = replace(history[index], **changes)
            state = state.evolve(tool_history=tuple(history))
            if pending.tool_call is not None:
                if search_error:
                    text = f'The search for "{pending.query}" failed: {search_error}. '
                    text += "Try again, or answer from what you have."
                    message = ChatMessage.from_tool(tool_result=text, origin=pending.tool_call, error=True)
                else:
                    text = self.format_search_result(pending.query, found, shown)
                    message = ChatMessage.from_tool(tool_result=text, origin=pending.tool_call)
                    message = with_digest(message, search_digest(pending.query, found, shown))
                state = state.evolve(messages=result_in_place(state.messages, message))
            failures = state.search_failures + 1 if search_error else 0
            state = state.evolve(pending=None, search_failures=failures)
        elif documents:
            logger.warning("LoopController received documents without a pending search; they are ignored.")
        # More searches of the same turn to run: the turn is not over.
        return state if state.queued else state.evolve(iteration=state.iteration + 1)

    def format_search_result(self, query: str, documents: list[Document], shown: Any = ()) -> str:
        """
        The tool result text of a search for the LLM.

        Numbered chunks (best first) with short ids and titles; one whose id is in `shown` (earlier results) is
        marked `[already shown]` instead of sent again.
        """
        if not documents:
            return f'No results for "{query}". Try other words, or answer from what you have.'
        heading = f'{len(documents)} result(s) for "{query}":'
        return numbered_chunks(heading, documents, self.chunk_preview_chars, shown)
