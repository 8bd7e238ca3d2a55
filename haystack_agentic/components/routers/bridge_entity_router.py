# SPDX-License-Identifier: Apache-2.0

import contextvars
import copy
import json
import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from haystack import component, default_to_dict, logging
from haystack.dataclasses import StreamingCallbackT

from haystack_agentic.components.retrievers.safe_retriever import store_from_dict
from haystack_agentic.dataclasses.loop_state import LoopState, PendingSearch, ToolStep, count_final_turn
from haystack_agentic.document_stores import milvus_support
from haystack_agentic.evidence.feedback import missing_evidence_query
from haystack_agentic.indexing.collections import and_filters
from haystack_agentic.llm.streaming import emit, emit_async, pick_callback, routed_state, step_chunks
from haystack_agentic.policies.bridge_entities import BridgeEntityPolicy
from haystack_agentic.tracing import iteration_span, trace_turn

logger = logging.getLogger(__name__)


#: How many filtered title indexes (distinct run filters) a router keeps.
_MAX_SCOPES = 32


@component
class BridgeEntityRouter:
    """
    A deterministic router for the agentic loop, with the same sockets as `AgenticRouter`, for LLMs too weak to route.

    Turn 1 searches the question; each later turn the best *bridge entity* (`BridgeEntityPolicy`: the title of
    another document that the best chunks mention but the question does not), filtered to that document, until
    `max_follow_ups` are done or none is left; then it routes to the answerer (or gives up when nothing was found).
    After the `EvidenceChecker` refuses an answer, a follow-up searches what it found missing. The title index is
    built from the store's `meta["title"]` values on first use, and rebuilt when its document count changes.

    ### Usage example
    ```python
    from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
    from haystack.document_stores.in_memory import InMemoryDocumentStore
    from haystack_agentic import Answerer, BridgeEntityRouter, LoopController, build_loop_pipeline

    store = InMemoryDocumentStore(index="docs")
    pipeline = build_loop_pipeline(
        BridgeEntityRouter(document_store=store),
        InMemoryBM25Retriever(store),
        controller=LoopController(max_iterations=4, chunk_cap=6),
        answerer=Answerer(chat_generator=...),
    )
    ```
    """

    def __init__(
        self,
        document_store: Any,
        first_top_k: int = 4,
        follow_up_top_k: int = 1,
        max_follow_ups: int = 2,
        title_filters: dict[str, Any] | None = None,
    ) -> None:
        """
        Create a BridgeEntityRouter.

        :param document_store: The document store the retriever searches (its `meta["title"]` values are the
            entities to follow), or its serialised dict: that store is made on first use, with the modules the load
            that made this router allowed.
        :param first_top_k: Chunks retrieved for the question itself. Default 4.
        :param follow_up_top_k: Chunks retrieved per bridge-entity search. Default 1.
        :param max_follow_ups: Bridge-entity searches after the first (at most `1 + max_follow_ups` per question).
            Default 2.
        :param title_filters: Haystack filters selecting which documents' titles are indexed (default: all).
        :raises ValueError: If a number is out of range (see `BridgeEntityPolicy`).
        """
        self._lock = threading.Lock()
        self._store_spec = copy.deepcopy(document_store) if isinstance(document_store, dict) else None
        self._document_store = None if self._store_spec is not None else document_store
        self._load_context = contextvars.copy_context()  # Haystack keeps a load's `allowed_modules` in a context
        self.first_top_k = first_top_k
        self.follow_up_top_k = follow_up_top_k
        self.max_follow_ups = max_follow_ups
        self.title_filters = title_filters
        self._policy = BridgeEntityPolicy([], **self._policy_kwargs())  # validates the parameters
        self._indexed_count: int | None = None
        # Title indexes of runs with filters (tenants, collections), by filters; rebuilt when the store changes.
        self._scoped: OrderedDict[str, tuple[int | None, BridgeEntityPolicy]] = OrderedDict()

    @property
    def document_store(self) -> Any:
        """The document store (a serialised one is made here, once)."""
        if self._document_store is None:
            with self._lock:
                if self._document_store is None and self._store_spec is not None:
                    self._document_store = self._load_context.run(store_from_dict, self._store_spec)
        return self._document_store

    @document_store.setter
    def document_store(self, store: Any) -> None:
        self._document_store, self._store_spec = store, None

    def _policy_kwargs(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in ("first_top_k", "follow_up_top_k", "max_follow_ups")}

    @property
    def max_chunks(self) -> int:
        """The most chunks the policy retrieves in one run: `first_top_k + max_follow_ups * follow_up_top_k`."""
        return self._policy.max_chunks

    def warm_up(self) -> None:
        """Build the title index from the document store, once (a run rebuilds it if the store changed)."""
        if self._indexed_count is None:
            self._current_policy()

    def _current_policy(self) -> BridgeEntityPolicy:
        count = self.document_store.count_documents()
        if count == 0:  # a Milvus store made before another instance created its collection sees none
            store = milvus_support.reopened_if_stale(self.document_store)
            if store is not self.document_store:
                self.document_store = store
                count = store.count_documents()
        with self._lock:
            if count != self._indexed_count:
                documents = self.document_store.filter_documents(filters=self.title_filters)
                if self.title_filters is None and len(documents) < count:
                    # Some stores cap what one query returns (milvus-haystack: MAX_LIMIT_SIZE documents).
                    logger.warning(
                        "The store returned the titles of {returned} of its {count} documents; bridge entities "
                        "outside them cannot be followed. Scope the index with `title_filters`.",
                        returned=len(documents),
                        count=count,
                    )
                self._policy = BridgeEntityPolicy.from_documents(documents, **self._policy_kwargs())
                self._indexed_count = count
                logger.debug("BridgeEntityRouter indexed the titles of {count} documents", count=count)
            return self._policy

    def policy_for(self, filters: Mapping[str, Any] | None) -> BridgeEntityPolicy:
        """
        The policy whose title index holds only the titles a run with these `filters` may see.

        `None`: the whole store within `title_filters`. So a run's trace never names a document outside its scope.
        """
        policy = self._current_policy()
        if not filters:
            return policy
        key = json.dumps(dict(filters), sort_keys=True, default=str)
        with self._lock:
            cached = self._scoped.get(key)
            if cached is not None and cached[0] == self._indexed_count:
                self._scoped.move_to_end(key)
                return cached[1]
            count = self._indexed_count
        documents = self.document_store.filter_documents(filters=and_filters(self.title_filters, filters))
        scoped = BridgeEntityPolicy.from_documents(documents, **self._policy_kwargs())
        with self._lock:
            self._scoped[key] = (count, scoped)
            while len(self._scoped) > _MAX_SCOPES:
                self._scoped.popitem(last=False)
        return scoped

    @component.output_types(
        query=str, filters=dict[str, Any] | None, top_k=int, loop=LoopState, answer=LoopState, finished=LoopState
    )
    def run(self, state: LoopState, streaming_callback: StreamingCallbackT | None = None) -> dict[str, Any]:
        """
        Take one turn: search the question, follow a bridge entity, or send the state to the answerer.

        :param state: The run's state from the controller.
        :param streaming_callback: A sync callback, called with a step event for the step this turn records.
        :returns: A search (`query`, `filters`, `top_k`, `loop`), `answer` (LoopState, `pending_action="answer"`),
            or `finished` (LoopState, gave up) when no search found any chunk.
        :raises ValueError: If the callback is an async function (use `run_async`).
        """
        callback = pick_callback(None, streaming_callback, is_async=False)
        with iteration_span(state) as turn_state:
            routed = trace_turn("BridgeEntityRouter", self.decide(turn_state))
        emit(callback, step_chunks(state, routed_state(routed)))
        return routed

    def decide(self, state: LoopState) -> dict[str, Any]:
        """
        The policy's route for this turn, without the turn's trace span and step event (`run` adds them).

        :returns: What `run` returns; `AgenticRouter(search_policy=...)` takes its searches from here inside its own
            turn span.
        """
        turn = state.iteration + 1
        searched = list(state.queries_tried)
        if not searched:
            return self._search(state, turn, state.question, self.first_top_k, "the question")
        follow_ups_done = len(searched) - 1
        if follow_ups_done < self.max_follow_ups and not state.is_last_iteration:
            # The store's document count (a round trip on a server) is checked once per run, at its first follow-up.
            if state.filters:  # the run's scope: only titles it may see
                policy = self.policy_for(state.filters)
            elif follow_ups_done == 0 or self._indexed_count is None:
                policy = self._current_policy()
            else:
                policy = self._policy
            # The evidence check's refusal names what is missing: that search comes before the policy's own.
            missing = missing_evidence_query(state)
            if missing and not state.already_searched(missing):
                return self._search(state, turn, missing, self.follow_up_top_k, "missing evidence")
            searches = [step for step in state.tool_history if step.action == "search"]
            latest = searches[-1].returned_chunk_ids if len(searches) > 1 else ()
            proposals = policy.next_searches(state.question, list(state.chunks), searched, latest)
            if proposals:
                best = proposals[0]
                why = best.get("why") or "bridge entity"
                return self._search(state, turn, best["query"], best["top_k"], why, extra_filters=best["filters"])
        if not state.chunks:
            # Nothing found at all: say so instead of letting the answer LLM answer from no evidence.
            step = ToolStep(iteration=turn, action="give_up", result="no chunks found")
            answer = "I could not find an answer: no document matched the question."
            return count_final_turn({"finished": state.with_step(step).finish("gave_up", answer=answer)}, turn)
        reason = "no new bridge entity" if follow_ups_done < self.max_follow_ups else "follow-up budget used"
        step = ToolStep(iteration=turn, action="answer", result=f"answer from chunks ({reason})")
        return count_final_turn({"answer": state.with_step(step).evolve(pending_action="answer")}, turn)

    @component.output_types(
        query=str, filters=dict[str, Any] | None, top_k=int, loop=LoopState, answer=LoopState, finished=LoopState
    )
    async def run_async(self, state: LoopState, streaming_callback: StreamingCallbackT | None = None) -> dict[str, Any]:
        """Async twin of `run` (no I/O but the store's document count); the callback may be sync or async."""
        callback = pick_callback(None, streaming_callback, is_async=True)
        with iteration_span(state) as turn_state:
            routed = trace_turn("BridgeEntityRouter", self.decide(turn_state))
        await emit_async(callback, step_chunks(state, routed_state(routed)))
        return routed

    @staticmethod
    def _search(
        state: LoopState, turn: int, query: str, top_k: int, why: str, extra_filters: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        filters = and_filters(state.filters, extra_filters)
        arguments = {"top_k": top_k, **({"filters": extra_filters} if extra_filters else {})}
        step = ToolStep(
            iteration=turn,
            action="search",
            query=query,
            arguments=arguments,
            reasoning=why,
            collections=tuple(state.collections or ()),  # the run's whole scope: the policy never picks one
        )
        state = state.with_step(step).evolve(
            pending=PendingSearch(query=query, top_k=top_k, filters=filters),
            queries_tried=(*state.queries_tried, query),
        )
        return {"query": query, "filters": filters, "top_k": top_k, "loop": state}

    def to_dict(self) -> dict[str, Any]:
        """Serialize the component to a dictionary."""
        store = copy.deepcopy(self._store_spec) if self._document_store is None else self._document_store.to_dict()
        return default_to_dict(self, document_store=store, title_filters=self.title_filters, **self._policy_kwargs())

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "BridgeEntityRouter":
        """Deserialize the component from a dictionary; its document store is made on first use."""
        return cls(**dict(data.get("init_parameters") or {}))
