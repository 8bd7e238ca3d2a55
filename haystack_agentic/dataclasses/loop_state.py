# SPDX-License-Identifier: Apache-2.0
"""
The immutable state that travels around the agentic loop, and the chunk merge rule.

The state is `LoopState`, with `ToolStep`, `LoopLimits` and `LoopOutcome`; components build the next state with
`evolve()`, so one pipeline serves concurrent runs.
"""

from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from haystack import Document
from haystack.dataclasses import ChatMessage

from haystack_agentic.dataclasses.pending_search import PendingSearch

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
    :param action: `search`, `reflect`, `answer`, `give_up`, `tool` (a user tool, or `read_chunk`), `invalid` (an
        unknown tool, bad arguments or an empty reply, sent back to the model as an error) or `error`.
    :param query: The search query, for `search` steps.
    :param tool_name: The tool the model called, when it called one.
    :param arguments: The tool call's arguments (or the parsed JSON decision in json mode).
    :param returned_chunk_ids: Ids of the chunks the search returned, best first (filled in by the controller).
    :param result: Text that went back to the model (tool result or error), or a short outcome note.
    :param reasoning: The model's stated reasoning (json mode) or accompanying text.
    :param collections: The collections a `search` of a collection-scoped run covered; empty otherwise.
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
        """Every field of the step, JSON-compatible (tuples as lists)."""
        return {f.name: jsonable(getattr(self, f.name)) for f in fields(self)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "ToolStep":
        """Build a step from `to_dict()` output."""
        values = {**data, "arguments": dict(data.get("arguments") or {})}
        for name in ("returned_chunk_ids", "collections"):
            values[name] = tuple(data.get(name) or ())
        return cls(**values)


@dataclass(frozen=True)
class LoopLimits:
    """
    The budget of one run, set by `LoopController` when the run starts (the router and the evidence check read it).

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
    :param citations: The answer's citations, one dict per `[n]` marker (`haystack_agentic.grounding.citations`).
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
            msg = f"terminated_by must be one of {TERMINATIONS}, got {self.terminated_by!r}"
            raise ValueError(msg)


@dataclass(frozen=True)
class LoopState:
    """
    The immutable state of one agentic-loop run, passed from socket to socket.

    :param question: The user's question.
    :param limits: The run's budget (`LoopLimits`), set by the controller when the run starts.
    :param filters: Metadata filters that scope every search of the run (the collection filter ANDed in), or `None`.
    :param collections: The collections the run may search, name -> description (`None`: no collection scope).
    :param conversation: The conversation the run started from (`LoopController`'s `messages`, the last one the
        user's question); empty when it started from a `query`.
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
    :param evidence: The evidence check's last verdict (`sufficient`, `score`, `reason`, `action`...), or `None`.
    :param tool_state: Values user tools wrote with `outputs_to_state` (the `documents` key joins `chunks` instead).
    :param outcome: How the run ended, its answer, citations and grounding (`LoopOutcome`).
    :param trace: The run's tracing links (`haystack_agentic.tracing.TraceLinks`) or `None`; not compared or serialised.
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

    # Haystack deep-copies every component input at every step: an immutable state is shared instead, for free.
    def __deepcopy__(self, memo: dict[int, Any]) -> "LoopState":
        return self

    def __copy__(self) -> "LoopState":
        return self

    def evolve(self, **changes: Any) -> "LoopState":
        """A new state with the given fields replaced (no `__init__` re-run); `TypeError` for an unknown field."""
        unknown = changes.keys() - _STATE_FIELDS
        if unknown:
            msg = f"LoopState has no field(s) {sorted(unknown)}"
            raise TypeError(msg)
        new = object.__new__(LoopState)
        new.__dict__.update(self.__dict__, **changes)
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
        Count one LLM call of `role` and the tokens its replies used; returns the new state.

        Count one LLM call of `role` (one of `ROLES`) and the tokens its replies report in `meta["usage"]`; when none
        does, `prompt_tokens_estimate` and 4 characters a completion token (Haystack's `ApproximateTokenCounter`).
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
        added = {"calls": 1, "prompt_tokens": prompt, "completion_tokens": completion}
        return self.evolve(usage={**self.usage, role: {key: current[key] + added[key] for key in added}})

    def merge_chunks(self, documents: Iterable[Document]) -> "LoopState":
        """Merge `documents` into `chunks` by `merge_chunks`, capped at `limits.chunk_cap`; returns the new state."""
        return self.evolve(chunks=merge_chunks(self.chunks, documents, self.limits.chunk_cap))

    def finish(
        self, terminated_by: str, answer: str | None = None, error: str | None = None, **changes: Any
    ) -> "LoopState":
        """End the run: a new `outcome` (`ValueError` unless `terminated_by` is in `TERMINATIONS`), nothing pending."""
        if terminated_by is None:
            msg = f"terminated_by must be one of {TERMINATIONS}, got None"
            raise ValueError(msg)
        outcome = LoopOutcome(terminated_by=terminated_by, answer=answer, error=error)
        return self.evolve(outcome=outcome, pending=None, queued=(), pending_action=None, **changes)

    def with_outcome(self, **changes: Any) -> "LoopState":
        """Replace fields of `outcome` (`TypeError` for a name that is not a field of `LoopOutcome`)."""
        return self.evolve(outcome=replace(self.outcome, **changes))

    def to_dict(self) -> dict[str, Any]:
        """The whole state as a JSON-compatible dict (checkpoints, debugging); `from_dict` restores an equal state."""
        data: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "chunks":
                value = [doc.to_dict(flatten=False) for doc in value]
            elif f.name in ("limits", "outcome"):
                value = asdict(value)
            if f.name != "trace":  # tracing spans: live objects of this process, never serialised
                data[f.name] = jsonable(value)  # messages, steps and searches by their own `to_dict`
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "LoopState":
        """Restore a state from `to_dict()` output."""
        values = dict(data)
        for name, parse in _PARSERS.items():
            values[name] = tuple(parse(item) for item in values.get(name) or ())
        values["limits"] = LoopLimits(**values.get("limits") or {})
        outcome = dict(values.get("outcome") or {})
        outcome["citations"] = tuple(dict(c) for c in outcome.get("citations") or ())
        values["outcome"] = LoopOutcome(**outcome)
        if values.get("pending") is not None:
            values["pending"] = PendingSearch.from_dict(values["pending"])
        return cls(**values)


#: The names of `LoopState`'s fields (what `evolve` accepts).
_STATE_FIELDS = frozenset(f.name for f in fields(LoopState))
#: How `from_dict` restores each tuple field's items.
_PARSERS: dict[str, Callable[[Any], Any]] = {
    "chunks": Document.from_dict,
    "messages": ChatMessage.from_dict,
    "conversation": ChatMessage.from_dict,
    "tool_history": ToolStep.from_dict,
    "queries_tried": str,
    "queued": PendingSearch.from_dict,
}


def _score_key(doc: Document) -> float:
    # A missing score ranks lowest; 0.0 is a real score and ranks above it.
    return float("-inf") if doc.score is None else float(doc.score)


def merge_chunks(existing: Iterable[Document], new: Iterable[Document], chunk_cap: int) -> tuple[Document, ...]:
    """
    Merge chunks: deduplicate, sort by score and keep the best `chunk_cap`.

    Duplicates by id keep the highest score; the chunks are sorted by score (a missing one lowest; ties: the first seen
    first) and the best `chunk_cap` kept (`ValueError` below 1). Documents are never mutated.
    """
    if chunk_cap < 1:
        msg = f"chunk_cap must be at least 1, got {chunk_cap}"
        raise ValueError(msg)
    best: dict[str, Document] = {}  # in order of first sight
    for doc in (*existing, *new):
        if doc.id not in best or _score_key(doc) > _score_key(best[doc.id]):
            best[doc.id] = doc
    return tuple(sorted(best.values(), key=lambda d: -_score_key(d))[:chunk_cap])  # sorted is stable


def jsonable(value: Any) -> Any:
    """
    `value` as plain JSON-compatible data.

    Tuples become lists, mappings get string keys, numpy scalars become numbers, objects with `to_dict` go by it,
    anything else becomes its `str`.
    """
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if hasattr(value, "item"):  # numpy scalar
        return value.item()
    if hasattr(value, "to_dict"):
        return jsonable(value.to_dict())
    return str(value)


def count_final_turn(routed: dict[str, Any], turn: int) -> dict[str, Any]:
    """
    Count the router's 1-based `turn` in the leaving state's `iteration` when it leaves the loop for good.

    Leaving for good is an answer, a give-up or an error: the controller counts only the turns that come back around
    the loop.
    """
    for socket in ("answer", "finished"):
        state = routed.get(socket)
        if state is not None and (socket == "finished" or state.pending_action == "answer"):
            routed[socket] = state.evolve(iteration=max(state.iteration, turn))
    return routed
