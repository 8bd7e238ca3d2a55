# SPDX-License-Identifier: Apache-2.0
"""
Token streaming of the LLM calls and step events on one `streaming_callback`.

Token streaming of the LLM calls and step events on one `streaming_callback`: a chunk's `meta` holds its call's
`ROLE_META` and `ANSWER_META`, or, for a step event (no text), `EVENT_META` and `STEP_META`.
"""

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Iterator
from dataclasses import replace
from typing import Any

from haystack import logging
from haystack.dataclasses import StreamingCallbackT, StreamingChunk

from haystack_agentic.dataclasses.loop_state import LoopState, ToolStep
from haystack_agentic.grounding.markers import markers_within
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
                msg = (
                    "The streaming_callback is an async function, but the loop runs with `Pipeline.run`: pass a sync "
                    "callback, or run the pipeline with `Pipeline.run_async`."
                )
                raise ValueError(msg)
    return runtime_callback or init_callback


def _is_async(callback: Callable[..., Any]) -> bool:
    return inspect.iscoroutinefunction(callback) or inspect.iscoroutinefunction(type(callback).__call__)


def tagged(chunk: StreamingChunk, role: str, answer: bool) -> StreamingChunk:
    """A new chunk with the role's tags in its `meta` and its text made valid Unicode (`valid_text`)."""
    content = valid_text(chunk.content) if isinstance(chunk.content, str) else chunk.content
    return replace(chunk, content=content, meta={**(chunk.meta or {}), ROLE_META: role, ANSWER_META: answer})


class AnswerTextHold:
    """
    Streams an answer call's text as the final answer reads it.

    Streams an answer call's text as the final answer reads it: the loop writes the answer without the model's own
    `[n]` markers of the `count` chunks it showed and without surrounding whitespace
    (`grounding.markers.strip_markers`), then appends the citations it found in the chunks. So the model's markers
    are dropped as they stream, and what could still become one (an unclosed `[12`, the spaces before it) or be
    trailing whitespace is held; `rest` then sends what the final answer has beyond the streamed text: the held part
    it kept and the loop's markers.

    A reply that could still be tool calls written as text (`llm.text_tool_calls.could_be_calls`: its start is a
    call's opener, or a short line still being written) is held whole, as the controller's is (`CallTextHold`): once
    it cannot be calls it streams; if it ends while still held, `rest` sends it only when the final answer is that
    text (a reply of tool-call text has no words of its own, and is never streamed as the answer).
    """

    def __init__(self, count: int | None = None) -> None:
        """:param count: How many chunks the answer's prompt numbered (`None`: not known), for its markers."""
        #: The text passed on so far, or held while the reply could be calls: a prefix of the final answer.
        self.sent = ""
        self.count = count
        self._open = ""  # raw text at the end that could still be (the start of) a marker
        self._bracket = False  # `_open` has the marker's `[`
        self._space = ""  # whitespace passed on only once text follows it
        self._calls = CallTextHold()  # the reply's start, held while it could be tool calls written as text
        self._pending: list[StreamingChunk] = []  # chunks made visible but held by `_calls`

    def accept(self, chunks: list[StreamingChunk]) -> list[StreamingChunk]:
        """
        The chunks with their text as the answer will read it.

        The chunks with their text as the answer will read it; a chunk whose text was all held is left out (unless
        it ends the reply). None while the reply could still be tool calls.
        """
        passed = []
        for chunk in chunks:
            if not isinstance(chunk.content, str) or not chunk.content:
                passed.append(chunk)
                continue
            text = self._visible(chunk.content)
            if text or chunk.finish_reason is not None:
                passed.append(replace(chunk, content=text))
        if self._calls.released:
            return passed
        self._pending.extend(passed)
        self._calls.accept([c for c in chunks if isinstance(c.content, str)])
        if not self._calls.released:
            return []  # the reply could still be tool calls written as text
        passed, self._pending = self._pending, []
        return passed

    def _visible(self, piece: str) -> str:
        if self._open and all(_in_marker(c) for c in piece) and (self._bracket or piece.isspace()):
            self._open += piece  # still an unclosed marker (or the spaces that may start one)
            return ""
        raw = self._open + piece
        cut = _open_marker_start(raw)
        self._open = raw[cut:]
        self._bracket = "[" in self._open
        text = self._space + markers_within(raw[:cut], self.count)
        if not self.sent:
            text = text.lstrip()
        kept = text.rstrip()
        self._space = text[len(kept) :]
        self.sent += kept
        return kept

    def rest(self, answer: str, role: str) -> list[StreamingChunk]:
        """
        The chunks of what the final answer has beyond the streamed text, if any.

        The answer-tagged chunks of what `answer` (the final answer) has beyond the streamed text: first the text
        held while the reply could be tool calls, when the answer is that text, then the rest; none when it has
        nothing more, or when it does not start with the streamed text (a reply replaced after it streamed).
        """
        held: list[StreamingChunk] = []
        if not self._calls.released:
            self._calls.drop()
            if answer.startswith(self.sent):
                held = [tagged(chunk, role, answer=True) for chunk in self._pending]
            else:  # the held reply (tool-call text, or text the answer replaced) is not the answer: never sent
                self.sent = ""
            self._pending = []
        if not answer.startswith(self.sent):
            logger.debug(
                "The final answer does not continue the streamed {role} text; nothing more is sent.", role=role
            )
            return held
        rest = answer[len(self.sent) :]
        self.sent = answer
        return [*held, *([tagged(StreamingChunk(content=rest), role, answer=True)] if rest else [])]


def _in_marker(char: str) -> bool:
    """Whether a character may stand inside an unclosed marker (`markers.MARKER_RE`: digits, commas, whitespace)."""
    return char == "," or char.isdecimal() or char.isspace()


def _open_marker_start(text: str) -> int:
    """
    Where the end of `text` that could still grow into a marker starts.

    Where `text`'s end that could still grow into a marker starts: an unclosed `[` of digits and commas with the
    spaces and tabs before it, else the trailing spaces and tabs (`len(text)` when there is none).
    """
    start = len(text)
    while start > 0 and _in_marker(text[start - 1]):
        start -= 1
    if start > 0 and text[start - 1] == "[":
        start -= 1
    else:  # no open bracket: only the trailing spaces and tabs may start a marker
        start = len(text)
    while start > 0 and text[start - 1] in " \t":
        start -= 1
    return start


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
    """
    Holds a streamed reply's chunks while its text could still be tool calls written as text.

    Holds a streamed reply's chunks while its text could still be tool calls written as text
    (`llm.text_tool_calls.could_be_calls`): the owner drops them (`drop`) when the reply was calls, else passes them
    on (`release`) once the reply is over.
    """

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
    hold: CallTextHold | AnswerTextHold | None = None,
) -> Callable[[StreamingChunk], None] | None:
    """
    A sync callback for a chat generator that tags each chunk and passes it on.

    A sync callback for a chat generator that tags each chunk (`tagged`) and passes it on (`None` without a
    callback); `hold_no_answer` holds text back while it could be the fallback's `NO ANSWER` (dropped if it is);
    `hold` holds tagged chunks back while the reply could be tool calls written as text (`CallTextHold`), or
    streams them as the final answer will read them (`AnswerTextHold`).
    """
    if callback is None:
        return None
    pieces = _tagger(role, answer, hold_no_answer)
    if hold is not None:
        return lambda chunk: emit(callback, hold.accept(pieces(chunk)))
    return lambda chunk: emit(callback, pieces(chunk))


def role_callback_async(
    callback: StreamingCallbackT | None,
    role: str,
    *,
    answer: bool,
    hold_no_answer: bool = False,
    hold: CallTextHold | AnswerTextHold | None = None,
) -> Callable[[StreamingChunk], Awaitable[None]] | None:
    """Async twin of `role_callback`, for a chat generator's `run_async`; the run's callback may be sync or async."""
    if callback is None:
        return None
    pieces = _tagger(role, answer, hold_no_answer)

    async def on_chunk(chunk: StreamingChunk) -> None:
        tagged_chunks = pieces(chunk)
        await emit_async(callback, hold.accept(tagged_chunks) if hold is not None else tagged_chunks)

    return on_chunk


def for_thread(callback: Callable[[StreamingChunk], Coroutine[Any, Any, None]]) -> Callable[[StreamingChunk], None]:
    """
    Wrap an async streaming callback (an `async def` function) for a generator's sync `run` in a worker thread.

    A sync callback that runs the async one on the current event loop and waits. Call it from the event loop's thread.
    """
    loop = asyncio.get_running_loop()
    return lambda chunk: asyncio.run_coroutine_threadsafe(callback(chunk), loop).result()


def plain_function(callback: StreamingCallbackT) -> StreamingCallbackT:
    """
    The callback as a plain function, sync or async like it.

    The callback as a plain function, sync or async like it (Haystack deep-copies pipeline inputs: a function is
    copied as itself, a bound method would copy its object).
    """
    if _is_async(callback):

        async def forward_async(chunk: StreamingChunk) -> None:
            await callback(chunk)  # type: ignore[misc]

        return forward_async

    def forward(chunk: StreamingChunk) -> None:
        callback(chunk)

    return forward


def step_chunks(before: LoopState, after: LoopState | None) -> Iterator[StreamingChunk]:
    """
    Step events for the steps `after` recorded beyond `before`'s.

    Step events (chunks without text) for the steps `after` recorded beyond `before`'s, after a `documents`
    event for a search whose chunks came back.
    """
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
    """
    The reply's held chunks to stream after a router turn.

    The reply's held chunks to stream after a router turn from `before` to `routed` (a router's outputs): none
    when the turn recovered the reply's text as tool calls (`RECOVERED_TOOL_CALLS` grew), else all of them.
    """
    if hold is None:
        return []
    after = routed_state(routed)
    recovered = (after.metadata or {}).get(RECOVERED_TOOL_CALLS, 0) if after is not None else 0
    if recovered > (before.metadata or {}).get(RECOVERED_TOOL_CALLS, 0):
        hold.drop()
        return []
    return hold.release()
