# SPDX-License-Identifier: Apache-2.0
"""Token streaming of the LLM calls and step events on one `streaming_callback`: a chunk's `meta` holds its call's
`ROLE_META` and `ANSWER_META`, or, for a step event (no text), `EVENT_META` and `STEP_META`."""

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import replace
from typing import Any

from haystack import logging
from haystack.dataclasses import StreamingCallbackT, StreamingChunk

from haystack_agentic.dataclasses.loop_state import LoopState, ToolStep
from haystack_agentic.llm.text_tool_calls import LEAD_IN_MAX_CHARS, RECOVERED_TOOL_CALLS, could_be_calls
from haystack_agentic.llm.valid_text import valid_text

logger = logging.getLogger(__name__)

#: `chunk.meta` key: the role of the LLM call that wrote the chunk.
ROLE_META = "haystack_agentic.role"
#: `chunk.meta` key: `True` when the chunk's text belongs to the final answer.
ANSWER_META = "haystack_agentic.answer"
#: `chunk.meta` key of a step event: what happened (`search`, `documents`, or the step's action).
EVENT_META = "haystack_agentic.event"
#: `chunk.meta` key of a step event: the step, as `ToolStep.to_dict()`.
STEP_META = "haystack_agentic.step"

#: The fallback's "no answer" reply: held back while a streamed reply could still be it.
NO_ANSWER = "NO ANSWER"


def pick_callback(
    init_callback: StreamingCallbackT | None, runtime_callback: StreamingCallbackT | None, is_async: bool
) -> StreamingCallbackT | None:
    """
    The callback of a run: the run input wins over the init parameter; a sync callback on the async path is allowed.

    :raises ValueError: On the sync path (`is_async=False`), if the callback is a coroutine function.
    """
    if not is_async:
        for callback in (runtime_callback, init_callback):
            if callback is not None and _is_async(callback):
                raise ValueError(
                    "The streaming_callback is an async function, but the loop runs with `Pipeline.run`: pass a sync "
                    "callback, or run the pipeline with `Pipeline.run_async`."
                )
    return runtime_callback or init_callback


def _is_async(callback: Callable[..., Any]) -> bool:
    return inspect.iscoroutinefunction(callback) or inspect.iscoroutinefunction(type(callback).__call__)


def tagged(chunk: StreamingChunk, role: str, answer: bool) -> StreamingChunk:
    """A new chunk with the role's tags in its `meta` and its text made valid Unicode (`valid_text`)."""
    content = valid_text(chunk.content) if isinstance(chunk.content, str) else chunk.content
    return replace(chunk, content=content, meta={**(chunk.meta or {}), ROLE_META: role, ANSWER_META: answer})


def marker_chunks(streamed: str, answer: str, role: str = "answer") -> list[StreamingChunk]:
    """The answer-tagged chunk with the citation markers appended to a streamed answer (none when nothing was)."""
    head = (streamed or "").lstrip()
    if not head.strip() or not answer.startswith(head) or answer == head:
        return []
    return [tagged(StreamingChunk(content=answer[len(head) :]), role, answer=True)]


class _NoAnswerHold:
    """Holds the fallback's text back while it could still be its `NO ANSWER` sentinel."""

    def __init__(self) -> None:
        self.held: list[StreamingChunk] = []
        self.released = False

    def accept(self, chunk: StreamingChunk) -> list[StreamingChunk]:
        """The chunks to pass on now (held ones first, once the text can no longer be the sentinel)."""
        if self.released or (not chunk.content and not self.held):
            return [chunk]
        self.held.append(chunk)
        if NO_ANSWER.startswith("".join(c.content for c in self.held).strip().rstrip(".").upper()):
            return []
        self.released = True
        held, self.held = self.held, []
        return held


class CallTextHold:
    """Holds a streamed reply's chunks while its text could still be tool calls written as text
    (`llm.text_tool_calls.could_be_calls`): the owner drops them (`drop`) when the reply was calls, else passes them
    on (`release`) once the reply is over."""

    #: Characters of the reply's start that decide: the lead-in window and the longest opener.
    _DECIDING_CHARS = 2 * LEAD_IN_MAX_CHARS

    def __init__(self) -> None:
        self.held: list[StreamingChunk] = []
        self.text = ""
        self.released = False

    def accept(self, chunks: list[StreamingChunk]) -> list[StreamingChunk]:
        """The chunks to pass on now: none while the reply could be calls, then the held ones and the rest."""
        if self.released:
            return chunks
        self.held.extend(chunks)
        if len(self.text) < self._DECIDING_CHARS:
            self.text += "".join(c.content for c in chunks if isinstance(c.content, str))
        return [] if could_be_calls(self.text) else self.release()

    def release(self) -> list[StreamingChunk]:
        """The held chunks (the reply was not calls); later chunks pass straight on."""
        self.released = True
        held, self.held = self.held, []
        return held

    def drop(self) -> None:
        """Forget the held chunks: the reply was tool calls, not text."""
        self.held = []
        self.released = True


def _tagger(role: str, answer: bool, hold_no_answer: bool) -> Callable[[StreamingChunk], list[StreamingChunk]]:
    hold = _NoAnswerHold() if hold_no_answer else None
    return lambda chunk: [tagged(piece, role, answer) for piece in (hold.accept(chunk) if hold else [chunk])]


def role_callback(
    callback: StreamingCallbackT | None,
    role: str,
    *,
    answer: bool,
    hold_no_answer: bool = False,
    hold_calls: CallTextHold | None = None,
) -> Callable[[StreamingChunk], None] | None:
    """A sync callback for a chat generator that tags each chunk (`tagged`) and passes it on (`None` without a
    callback); `hold_no_answer` holds text back while it could be the fallback's `NO ANSWER` (dropped if it is);
    `hold_calls` holds tagged chunks back while the reply could be tool calls written as text."""
    if callback is None:
        return None
    pieces = _tagger(role, answer, hold_no_answer)
    if hold_calls is not None:
        return lambda chunk: emit(callback, hold_calls.accept(pieces(chunk)))
    return lambda chunk: emit(callback, pieces(chunk))


def role_callback_async(
    callback: StreamingCallbackT | None,
    role: str,
    *,
    answer: bool,
    hold_no_answer: bool = False,
    hold_calls: CallTextHold | None = None,
) -> Callable[[StreamingChunk], Awaitable[None]] | None:
    """Async twin of `role_callback`, for a chat generator's `run_async`; the run's callback may be sync or async."""
    if callback is None:
        return None
    pieces = _tagger(role, answer, hold_no_answer)

    async def on_chunk(chunk: StreamingChunk) -> None:
        tagged_chunks = pieces(chunk)
        await emit_async(callback, hold_calls.accept(tagged_chunks) if hold_calls is not None else tagged_chunks)

    return on_chunk


def for_thread(callback: Callable[[StreamingChunk], Awaitable[None]]) -> Callable[[StreamingChunk], None]:
    """A sync callback that runs the async one on the current event loop and waits, for a generator's sync `run` in
    a worker thread. Call it from the event loop's thread."""
    loop = asyncio.get_running_loop()
    return lambda chunk: asyncio.run_coroutine_threadsafe(callback(chunk), loop).result()


def plain_function(callback: StreamingCallbackT) -> StreamingCallbackT:
    """The callback as a plain function, sync or async like it (Haystack deep-copies pipeline inputs: a function is
    copied as itself, a bound method would copy its object)."""
    if _is_async(callback):

        async def forward_async(chunk: StreamingChunk) -> None:
            await callback(chunk)  # type: ignore[misc]

        return forward_async

    def forward(chunk: StreamingChunk) -> None:
        callback(chunk)

    return forward


def step_chunks(before: LoopState, after: LoopState | None) -> Iterator[StreamingChunk]:
    """Step events (chunks without text) for the steps `after` recorded beyond `before`'s, after a `documents`
    event for a search whose chunks came back."""
    if after is None:
        return
    known = len(before.tool_history)
    if before.pending is not None and after.pending is None:
        searched = next((s for s in reversed(after.tool_history[:known]) if s.action == "search"), None)
        if searched is not None:
            yield _event(searched, "documents")
    for step in after.tool_history[known:]:
        yield _event(step, step.action)


def _event(step: ToolStep, event: str) -> StreamingChunk:
    return StreamingChunk(content="", meta={EVENT_META: event, STEP_META: step.to_dict()})


def emit(callback: StreamingCallbackT | None, chunks: Iterable[StreamingChunk]) -> None:
    """Pass chunks to a sync callback (nothing without one)."""
    if callback is not None:
        for chunk in chunks:
            callback(chunk)


async def emit_async(callback: StreamingCallbackT | None, chunks: Iterable[StreamingChunk]) -> None:
    """Pass chunks to a sync or async callback (nothing without one)."""
    if callback is not None:
        for chunk in chunks:
            outcome = callback(chunk)
            if inspect.isawaitable(outcome):
                await outcome


def routed_state(outputs: dict[str, Any]) -> LoopState | None:
    """The `LoopState` a component's output dict sends on (the first one found)."""
    return next((value for value in outputs.values() if isinstance(value, LoopState)), None)


def held_text(hold: CallTextHold | None, before: LoopState, routed: dict[str, Any]) -> list[StreamingChunk]:
    """The reply's held chunks to stream after a router turn from `before` to `routed` (a router's outputs): none
    when the turn recovered the reply's text as tool calls (`RECOVERED_TOOL_CALLS` grew), else all of them."""
    if hold is None:
        return []
    after = routed_state(routed)
    recovered = (after.metadata or {}).get(RECOVERED_TOOL_CALLS, 0) if after is not None else 0
    if recovered > (before.metadata or {}).get(RECOVERED_TOOL_CALLS, 0):
        hold.drop()
        return []
    return hold.release()
