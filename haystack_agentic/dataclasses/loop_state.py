# SPDX-License-Identifier: Apache-2.0
"""
The value that travels around the agentic loop: `LoopState`, with its `ToolStep` records, its budget (`LoopLimits`)
and how it ended (`LoopOutcome`), and the chunk merge rules.

A `LoopState` is immutable. Components never change one in place; they build the next state with `evolve()`.
That is what lets one pipeline instance serve concurrent runs: no component keeps run state in its attributes,
and Haystack's per-step deep copy of inputs costs nothing (`__deepcopy__` returns the same object).
"""

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from haystack import Document
from haystack.dataclasses import ChatMessage

from haystack_agentic.dataclasses.pending_search import PendingSearch
from haystack_agentic.grounding.markers import strip_markers

#: Values of `LoopOutcome.terminated_by`.
TERMINATIONS = ("answered", "gave_up", "max_iterations", "error")

#: The LLM roles whose calls and tokens are counted in `LoopState.usage` (`grounding`: the judge grounder;
#: `evidence`: the evidence checker's LLM judge).
ROLES = ("controller", "answer", "fallback", "grounding", "evidence")


@dataclass(frozen=True)
class ToolStep:
    """
    One recorded step of the loop: what the router decided at an iteration and what came of it.

    :param iteration: 1-based iteration (router turn) at which the step was taken.
    :param action: `search`, `reflect`, `answer`, `give_up`, `tool` (a user tool, or `read_chunk`), `invalid` (an unknown tool,
        bad arguments or an empty reply that went back to the model as an error) or `error`.
    :param query: The search query, for `search` steps.
    :param tool_name: The tool the model called, when it called one.
    :param arguments: The tool call's arguments (or the parsed JSON decision in json mode).
    :param returned_chunk_ids: Ids of the chunks the search returned, best first (filled in by the controller).
    :param result: Text that went back to the model (tool result or error), or a short outcome note.
    :param reasoning: The model's stated reasoning (json mode) or accompanying text.
    :param collections: For `search` steps in a run scoped to collections: the collections the search covered (the
        one the model chose, else every collection in the run's scope); empty otherwise.
    """

    iteration: int
    action: str
    query: str | None = None
    tool_name: str | None = None
    arguments: Mapping[str, Any] = field(default_factory=dict)
    returned_chunk_ids: tuple[str, ...] = ()
    result: str | None = None
    reasoning: str | None = None
    collections: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """Serialize to a JSON-compatible dict: every field of the step, tuples as lists."""
        return {f.name: _jsonable(getattr(self, f.name)) for f in fields(self)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "ToolStep":
        """Build a step from `to_dict()` output (a dict); returns the step."""
        values = dict(data)
        values["returned_chunk_ids"] = tuple(values.get("returned_chunk_ids") or ())
        values["arguments"] = dict(values.get("arguments") or {})
        values["collections"] = tuple(values.get("collections") or ())
        return cls(**values)


@dataclass(frozen=True)
class LoopLimits:
    """
    The budget of one run, set by `LoopController` from its init parameters when the run starts.

    It travels with the run because components other than the controller act on it: the router tells the model
    how many turns it has (and answers on the last one), caps the searches of a turn and merges user tools'
    documents; the evidence check searches again only while a turn for the answer is left.

    :param max_iterations: Most router turns of the run.
    :param chunk_cap: Most chunks kept in `LoopState.chunks`.
    :param max_searches_per_turn: Most searches one router turn may run (more go back to the model as errors).
    """

    max_iterations: int = 10
    chunk_cap: int = 30
    max_searches_per_turn: int = 4


@dataclass(frozen=True)
class LoopOutcome:
    """
    How a run ended and what its answer stages made of it; `terminated_by` is `None` while the run goes on.

    :param terminated_by: `answered`, `gave_up`, `max_iterations` or `error` once the run has ended.
    :param answer: The final answer (`None` if there is none), with its `[n]` citation markers.
    :param error: The error that ended the run (or a failure that was survived, e.g. of the fallback).
    :param citations: The answer's citations, one dict per `[n]` marker, in order (see
        `haystack_agentic.grounding.citations`: `n`, `document_id`, `title`, `quote`, `start`, `end`, `claim`,
        `search`, `supported`, `check`); empty until an answer path sets them, and for runs without an answer.
    :param grounding: Grounding of the answer (filled in by a grounder stage), or `None`.
    :raises ValueError: If `terminated_by` is neither `None` nor one of `TERMINATIONS`.
    """

    terminated_by: str | None = None
    answer: str | None = None
    error: str | None = None
    citations: tuple[Mapping[str, Any], ...] = ()
    grounding: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.terminated_by is not None and self.terminated_by not in TERMINATIONS:
            raise ValueError(f"terminated_by must be one of {TERMINATIONS}, got {self.terminated_by!r}")


@dataclass(frozen=True)
class LoopState:
    """
    The immutable state of one agentic-loop run, passed from socket to socket.

    :param question: The user's question.
    :param limits: The run's budget (`LoopLimits`), set by the controller when the run starts.
    :param filters: Metadata filters that scope every search of the run, or `None` (a run scoped to collections has
        the collection filter ANDed in here, so every search, the bridge policy's included, keeps to the scope).
    :param collections: The collections the run may search, name -> description (`None`: the run has no collection
        scope). The router offers them to the model (the `search` tool's `collection` argument).
    :param conversation: The conversation the run started from (`LoopController`'s `messages` input: system, user
        and assistant messages, the last one the user's question); empty when it started from a `query`. The
        controller and the answer roles see it.
    :param iteration: Router turns completed so far (0 before the first turn).
    :param chunks: Accumulated chunks, deduplicated by id, sorted by score (highest first), at most
        `limits.chunk_cap`.
    :param messages: The controller conversation (tools mode).
    :param tool_history: One `ToolStep` per recorded action, in order.
    :param draft: The current draft answer, if any.
    :param pending: The search waiting for documents, if any.
    :param queued: Searches of the same turn waiting to run after `pending`, in call order.
    :param pending_action: What the answerer should do with the state: `answer` or `reflect` (json mode).
    :param queries_tried: Every search query sent so far, in order.
    :param usage: Per role (see `ROLES`): `{"calls", "prompt_tokens", "completion_tokens"}`.
    :param metadata: Free-form, JSON-compatible extras (e.g. which policy ran).
    :param empty_replies: How many controller replies were empty (no text, no tool call, or a blank answer).
    :param search_failures: Consecutive searches that failed (store errors); a successful search resets it.
    :param stop_reason: Set when a component ends the loop early; the controller then sends the state to the
        fallback as if `max_iterations` were reached.
    :param evidence: The last verdict of the evidence check (`EvidenceChecker`): whether the chunks support an
        answer, its score and reason, and what the check did (answer, search again, give up, warn); `None` before
        any check.
    :param tool_state: Values user tools wrote with `outputs_to_state` (read back with `inputs_from_state`), JSON-
        compatible values recommended; the `documents` key is never kept (Documents join `chunks`).
    :param outcome: How the run ended, its answer, citations and grounding (`LoopOutcome`).
    :param trace: The run's tracing links (`haystack_agentic.tracing.TraceLinks`: the spans later spans hang
        under), or `None` when no tracer is enabled; not compared, not serialised.
    """

    question: str
    limits: LoopLimits = LoopLimits()
    filters: Mapping[str, Any] | None = None
    collections: Mapping[str, str] | None = None
    conversation: tuple[ChatMessage, ...] = ()
    iteration: int = 0
    chunks: tuple[Document, ...] = ()
    messages: tuple[ChatMessage, ...] = ()
    tool_history: tuple[ToolStep, ...] = ()
    draft: str | None = None
    pending: PendingSearch | None = None
    queued: tuple[PendingSearch, ...] = ()
    pending_action: str | None = None
    queries_tried: tuple[str, ...] = ()
    usage: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    metadata: Mapping[str, Any] = field(default_factory=dict)
    empty_replies: int = 0
    search_failures: int = 0
    stop_reason: str | None = None
    evidence: Mapping[str, Any] | None = None
    tool_state: Mapping[str, Any] = field(default_factory=dict)
    outcome: LoopOutcome = LoopOutcome()
    trace: Any = field(default=None, compare=False, repr=False)

    # Haystack deep-copies every component input at every pipeline step. The state is immutable (and chunks
    # are never mutated in place), so sharing is safe and makes the copy free.
    def __deepcopy__(self, memo: dict[int, Any]) -> "LoopState":
        return self

    def __copy__(self) -> "LoopState":
        return self

    def evolve(self, **changes: Any) -> "LoopState":
        """
        Return a new state with the given fields replaced (a copy of the instance dict: no `__init__` re-run).

        :param changes: Field names and their new values.
        :returns: The new state; this one is unchanged.
        :raises TypeError: If a name is not a field of `LoopState`.
        """
        unknown = changes.keys() - _STATE_FIELDS
        if unknown:
            raise TypeError(f"LoopState has no field(s) {sorted(unknown)}")
        new = object.__new__(LoopState)
        values = new.__dict__
        values.update(self.__dict__)
        values.update(changes)
        return new

    @property
    def is_last_iteration(self) -> bool:
        """`True` when the router turn about to be taken is the last one allowed."""
        return self.iteration + 1 >= self.limits.max_iterations

    def already_searched(self, query: str) -> bool:
        """`True` if `query` (ignoring case) is in `queries_tried`."""
        folded = query.casefold()
        return any(q.casefold() == folded for q in self.queries_tried)

    def with_step(self, step: ToolStep) -> "LoopState":
        """Append `step` to the tool history; returns the new state."""
        return self.evolve(tool_history=(*self.tool_history, step))

    def with_messages(self, *messages: ChatMessage) -> "LoopState":
        """Append `messages` (in order) to the controller conversation; returns the new state."""
        return self.evolve(messages=(*self.messages, *messages))

    def with_usage(self, role: str, replies: Iterable[ChatMessage], prompt_tokens_estimate: int = 0) -> "LoopState":
        """
        Count one LLM call of `role` and the tokens its replies report.

        Tokens come from the replies' `meta["usage"]` (`prompt_tokens`, `completion_tokens`), as Haystack's chat
        generators report them. When a generator reports none, `prompt_tokens_estimate` is counted instead (and
        completion tokens are estimated at 4 characters per token, Haystack's `ApproximateTokenCounter` ratio).

        :param role: One of `ROLES`.
        :param replies: The replies of the call (may be empty, e.g. when the call raised).
        :param prompt_tokens_estimate: Estimated prompt tokens, used when no reply reports usage.
        :returns: The new state.
        """
        prompt, completion, reported = 0, 0, False
        for reply in replies:
            usage = (reply.meta or {}).get("usage") or {}
            if usage.get("prompt_tokens") is not None or usage.get("completion_tokens") is not None:
                reported = True
                prompt += int(usage.get("prompt_tokens") or 0)
                completion += int(usage.get("completion_tokens") or 0)
            else:
                completion += len(reply.text or "") // 4
        if not reported:
            prompt = prompt_tokens_estimate
        current = self.usage.get(role, {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0})
        updated = {
            "calls": current["calls"] + 1,
            "prompt_tokens": current["prompt_tokens"] + prompt,
            "completion_tokens": current["completion_tokens"] + completion,
        }
        return self.evolve(usage={**self.usage, role: updated})

    def merge_chunks(self, documents: Iterable[Document]) -> "LoopState":
        """Merge `documents` into `chunks` by `merge_chunks`, capped at `limits.chunk_cap`; returns the new state."""
        return self.evolve(chunks=merge_chunks(self.chunks, documents, self.limits.chunk_cap))

    def finish(
        self, terminated_by: str, answer: str | None = None, error: str | None = None, **changes: Any
    ) -> "LoopState":
        """
        End the run: a new `outcome`, and no search or action left pending.

        :param terminated_by: One of `TERMINATIONS`.
        :param answer: The final answer (`None` when there is none).
        :param error: The error, for `terminated_by="error"` (or a survived failure).
        :param changes: Other fields to replace.
        :returns: The ended state.
        :raises ValueError: If `terminated_by` is not one of `TERMINATIONS`.
        """
        if terminated_by is None:
            raise ValueError(f"terminated_by must be one of {TERMINATIONS}, got None")
        outcome = LoopOutcome(terminated_by=terminated_by, answer=answer, error=error)
        return self.evolve(outcome=outcome, pending=None, queued=(), pending_action=None, **changes)

    def with_outcome(self, **changes: Any) -> "LoopState":
        """
        Replace `LoopOutcome` fields of `outcome` (e.g. the cited `answer` and its `citations`, or the `grounding`);
        returns the new state. Raises `TypeError` for a name that is not a field of `LoopOutcome`.
        """
        return self.evolve(outcome=replace(self.outcome, **changes))

    def to_result(self) -> dict[str, Any]:
        """
        The run's result, JSON-serialisable (for hayhooks and `--json`).

        :returns: A dict with `answer` (str or None), `terminated_by` (str), `iterations` (int),
            `tool_history` (list of `ToolStep.to_dict()`), `documents` (list of `Document.to_dict()`, best first,
            embeddings dropped), `grounding` (dict or None), `usage` (per role: calls, prompt_tokens,
            completion_tokens; plus `total`), `error` (str or None), `metadata` (dict) and `evidence` (the evidence
            check's last verdict: `sufficient`, `score`, `threshold`, `reason`, `action`...; or None) and
            `tool_state` (what user tools wrote with `outputs_to_state`), `messages` (`final_conversation()` as
            `ChatMessage.to_dict()` dicts) and `citations` (list of citation dicts, ordered by `n`; `[]` without an
            answer).
        """
        total = {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0}
        for counts in self.usage.values():
            for key in total:
                total[key] += int(counts.get(key, 0))
        outcome = self.outcome
        return {
            "answer": outcome.answer,
            "terminated_by": outcome.terminated_by,
            "iterations": self.iteration,
            "tool_history": [step.to_dict() for step in self.tool_history],
            "documents": [_document_result(doc) for doc in self.chunks],
            "grounding": _jsonable(outcome.grounding) if outcome.grounding is not None else None,
            "usage": {**{role: dict(counts) for role, counts in self.usage.items()}, "total": total},
            "error": outcome.error,
            "metadata": _jsonable(self.metadata),
            "evidence": _jsonable(self.evidence) if self.evidence is not None else None,
            "tool_state": _jsonable(self.tool_state),
            "messages": [message.to_dict() for message in self.final_conversation()],
            "citations": [_jsonable(c) for c in outcome.citations] if outcome.answer is not None else [],
        }

    def final_conversation(self) -> tuple[ChatMessage, ...]:
        """
        The conversation to feed back next turn: the one the run started from (or the question as a user message),
        with the final answer appended as an assistant message when there is one (a give-up reason included;
        without its `[n]` markers).

        :returns: The messages, oldest first.
        """
        conversation, answer = self.conversation or (ChatMessage.from_user(self.question),), self.outcome.answer
        if answer is None:
            return conversation
        # Without the citation markers: they number this run's citations, which the next run does not have.
        return (*conversation, ChatMessage.from_assistant(strip_markers(answer) or answer))

    def to_dict(self) -> dict[str, Any]:
        """
        Serialize the whole state (for checkpoints and debugging).

        :returns: A JSON-compatible dict; `from_dict` restores an equal state.
        """
        data: dict[str, Any] = {}
        for f in fields(self):
            if f.name == "trace":  # tracing spans: live objects of this process, never serialised
                continue
            value = getattr(self, f.name)
            if f.name == "chunks":
                value = [doc.to_dict(flatten=False) for doc in value]
            elif f.name in ("messages", "conversation"):
                value = [message.to_dict() for message in value]
            elif f.name == "tool_history":
                value = [step.to_dict() for step in value]
            elif f.name == "pending" and value is not None:
                value = value.to_dict()
            elif f.name == "queued":
                value = [search.to_dict() for search in value]
            elif f.name in ("limits", "outcome"):
                value = asdict(value)
            data[f.name] = _jsonable(value)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "LoopState":
        """
        Restore a state from `to_dict()` output.

        :param data: The dict.
        :returns: The state.
        """
        values = dict(data)
        values["chunks"] = tuple(Document.from_dict(d) for d in values.get("chunks") or ())
        values["messages"] = tuple(ChatMessage.from_dict(m) for m in values.get("messages") or ())
        values["conversation"] = tuple(ChatMessage.from_dict(m) for m in values.get("conversation") or ())
        values["tool_history"] = tuple(ToolStep.from_dict(s) for s in values.get("tool_history") or ())
        values["queries_tried"] = tuple(values.get("queries_tried") or ())
        values["limits"] = LoopLimits(**values.get("limits") or {})
        outcome = dict(values.get("outcome") or {})
        outcome["citations"] = tuple(dict(c) for c in outcome.get("citations") or ())
        values["outcome"] = LoopOutcome(**outcome)
        if values.get("pending") is not None:
            values["pending"] = PendingSearch.from_dict(values["pending"])
        values["queued"] = tuple(PendingSearch.from_dict(s) for s in values.get("queued") or ())
        return cls(**values)


#: The names of `LoopState`'s fields (what `evolve` accepts).
_STATE_FIELDS = frozenset(f.name for f in fields(LoopState))


def _document_result(doc: Document) -> dict[str, Any]:
    """`doc.to_dict(flatten=False)` without the embeddings, JSON-compatible (field by field: no deep copy)."""
    return {
        "id": doc.id,
        "content": doc.content,
        "blob": _jsonable(doc.blob.to_dict()) if doc.blob is not None else None,
        "meta": _jsonable(doc.meta),
        "score": _jsonable(doc.score),
    }


def _score_key(doc: Document) -> float:
    # A missing score ranks lowest; 0.0 is a real score and ranks above it.
    return float("-inf") if doc.score is None else float(doc.score)


def merge_chunks(existing: Iterable[Document], new: Iterable[Document], chunk_cap: int) -> tuple[Document, ...]:
    """
    Merge chunks: deduplicate by id keeping the highest score, sort by score, keep at most `chunk_cap`.

    A missing score (`None`) ranks below every real score; `0.0` is a real score. Among equal scores the
    chunk seen first stays first (stable), so earlier hops keep their place. The lowest-scored chunks are
    evicted first when the cap is exceeded. Documents are never mutated.

    :param existing: Chunks already held, in order.
    :param new: Newly retrieved chunks.
    :param chunk_cap: The most chunks to keep (>= 1).
    :returns: The merged chunks, best first.
    :raises ValueError: If `chunk_cap` is below 1.
    """
    if chunk_cap < 1:
        raise ValueError(f"chunk_cap must be at least 1, got {chunk_cap}")
    best: dict[str, Document] = {}
    order: dict[str, int] = {}
    for doc in (*existing, *new):
        held = best.get(doc.id)
        if held is None:
            order[doc.id] = len(order)
            best[doc.id] = doc
        elif _score_key(doc) > _score_key(held):
            best[doc.id] = doc
    ranked = sorted(best.values(), key=lambda d: (-_score_key(d), order[d.id]))
    return tuple(ranked[:chunk_cap])


def _jsonable(value: Any) -> Any:
    """Turn tuples, mappings and numpy scalars into plain JSON-compatible values."""
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if hasattr(value, "item"):  # numpy scalar
        return value.item()
    if hasattr(value, "to_dict"):
        return _jsonable(value.to_dict())
    return str(value)
