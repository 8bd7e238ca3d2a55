# SPDX-License-Identifier: Apache-2.0
"""
Token streaming of the loop's LLM calls, and step events, on one Haystack `streaming_callback`.

Every chunk a loop component passes on carries, in `chunk.meta`:
- `ROLE_META`: the role of the call that wrote it: `controller`, `answer`, `draft`, `reflect` or `fallback`;
- `ANSWER_META`: `True` when its text is part of the run's final answer (the answerer's `answer` call and the
  fallback), so `"".join(c.content for c in chunks if c.meta.get(ANSWER_META)).strip()` is the answer whenever
  that call succeeds;
- or, for a step event, `EVENT_META` (`search`: a search was issued; `documents`: its chunks came back; else the
  step's action: `answer`, `give_up`, `reflect`, `invalid`, ...) and `STEP_META` (the `ToolStep.to_dict()`). A
  step event has no text (`content == ""`): it never pollutes the answer.

How the callback reaches the components: each LLM role component (`AgenticRouter`, `Answerer`,
`FallbackSynthesizer`) takes a `streaming_callback` init parameter (serialised like Haystack's chat generators'),
and a `streaming_callback` run input that wins over it, as Haystack's chat generators do; `LoopController` takes
the run input (it reports the `documents` events). `loop_inputs` (pipelines/loop_pipeline.py) passes one callback
to every component of a loop pipeline that has the socket. The run input stays for every turn of the run: Haystack
keeps a pipeline input of a component in a cycle until the run ends.
"""

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import replace
from typing import Any

from haystack import logging
from haystack.dataclasses import StreamingCallbackT, StreamingChunk

from haystack_agentic.dataclasses.loop_state import LoopState, ToolStep
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
    The callback of a run: the run input wins over the init parameter (Haystack's rule).

    :param init_callback: The component's `streaming_callback` init parameter.
    :param runtime_callback: The `streaming_callback` run input.
    :param is_async: Whether the component runs on `run_async` (a sync or async callback is fine there).
    :returns: The callback, or `None`.
    :raises ValueError: On the sync path, if the callback is a coroutine function (it could not be awaited).
    """
    # Unlike Haystack's `select_streaming_callback`, no warning for a sync callback on the async path: the loop's
    # wrappers call it inline, once per chunk, as a collector or a queue's `put_nowait` expects.
    if not is_async:
        for callback in (runtime_callback, init_callback):
            if callback is not None and _is_async(callback):
                raise ValueError(
                    "The streaming_callback is an async function, but the loop runs with `Pipeline.run`: pass a sync "
                    "callback, or run the pipeline with `Pipeline.run_async`."
                )
    return runtime_callback or init_callback


def _is_async(callback: Callable[..., Any]) -> bool:
    return inspect.iscoroutinefunction(callback) or inspect.iscoroutinefunction(getattr(callback, "__call__", None))


def tagged(chunk: StreamingChunk, role: str, answer: bool) -> StreamingChunk:
    """
    The chunk with the role's tags added to its `meta` (a new chunk: the generator's is not changed), and its text
    made valid Unicode (`valid_text`: a lone surrogate becomes U+FFFD, as in the reply), so that a terminal or an
    encoder the run's callback writes to never gets one.
    """
    content = valid_text(chunk.content) if isinstance(chunk.content, str) else chunk.content
    return replace(chunk, content=content, meta={**(chunk.meta or {}), ROLE_META: role, ANSWER_META: answer})


def marker_chunks(streamed: str, answer: str, role: str = "answer") -> list[StreamingChunk]:
    """
    What completes a streamed answer with the citation markers the loop appended to it ("Greenwich Village" ->
    "Greenwich Village [1]"): one answer-tagged chunk with the rest (" [1]"), so the answer-tagged text is the
    answer. The loop never changes a streamed text inside (`haystack_agentic.grounding.citations`).

    :param streamed: The text the call streamed as the answer.
    :param answer: The run's final answer.
    :param role: The role to tag the chunk with (`answer`, `fallback`).
    :returns: The chunks to emit: none when nothing streamed or nothing was appended.
    """
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
        return self._hold(chunk)

    def _hold(self, chunk: StreamingChunk) -> list[StreamingChunk]:
        self.held.append(chunk)
        text = "".join(c.content for c in self.held).strip().rstrip(".").upper()
        if NO_ANSWER.startswith(text):
            return []
        self.released = True
        held, self.held = self.held, []
        return held


def role_callback(
    callback: StreamingCallbackT | None, role: str, *, answer: bool, hold_no_answer: bool = False
) -> Callable[[StreamingChunk], None] | None:
    """
    A sync callback for a chat generator that tags each chunk with `role` and passes it on.

    :param callback: The run's (sync) callback, or `None`.
    :param role: The role of the call.
    :param answer: Whether the call's text is the final answer.
    :param hold_no_answer: Hold text back while it could be the fallback's `NO ANSWER` (dropped if it is).
    :returns: The callback for the generator, or `None` when there is none.
    """
    if callback is None:
        return None
    hold = _NoAnswerHold() if hold_no_answer else None

    def on_chunk(chunk: StreamingChunk) -> None:
        for piece in hold.accept(chunk) if hold is not None else [chunk]:
            callback(tagged(piece, role, answer))

    return on_chunk


def role_callback_async(
    callback: StreamingCallbackT | None, role: str, *, answer: bool, hold_no_answer: bool = False
) -> Callable[[StreamingChunk], Awaitable[None]] | None:
    """
    Async twin of `role_callback`: an async callback for a chat generator's `run_async`; the run's callback may be
    sync or async.

    :returns: The async callback, or `None`.
    """
    if callback is None:
        return None
    hold = _NoAnswerHold() if hold_no_answer else None

    async def on_chunk(chunk: StreamingChunk) -> None:
        for piece in hold.accept(chunk) if hold is not None else [chunk]:
            outcome = callback(tagged(piece, role, answer))
            if inspect.isawaitable(outcome):
                await outcome

    return on_chunk


def for_thread(callback: Callable[[StreamingChunk], Awaitable[None]]) -> Callable[[StreamingChunk], None]:
    """
    A sync callback that runs an async one on the current event loop, for a generator whose sync `run` is called
    in a worker thread (one without `run_async`). Call it from the event loop's thread, before handing over.

    :param callback: The async callback.
    :returns: A sync callback that waits for each chunk's callback to finish.
    """
    loop = asyncio.get_running_loop()

    def on_chunk(chunk: StreamingChunk) -> None:
        asyncio.run_coroutine_threadsafe(callback(chunk), loop).result()

    return on_chunk


def plain_function(callback: StreamingCallbackT) -> StreamingCallbackT:
    """
    A streaming callback as a plain function (Haystack deep-copies pipeline inputs; a function is copied as
    itself, a bound method would copy its object), keeping it sync or async.

    :param callback: The callback.
    :returns: A function forwarding every chunk to it.
    """
    if inspect.iscoroutinefunction(callback) or inspect.iscoroutinefunction(getattr(callback, "__call__", None)):

        async def forward_async(chunk: StreamingChunk) -> None:
            await callback(chunk)  # type: ignore[misc]

        return forward_async

    def forward(chunk: StreamingChunk) -> None:
        callback(chunk)

    return forward


def step_chunks(before: LoopState, after: LoopState | None) -> Iterator[StreamingChunk]:
    """
    Step events for the steps `after` recorded beyond `before`'s, and for a search whose chunks came back.

    Lazy: nothing is built unless a callback consumes them (`emit`, `emit_async`).

    :param before: The state the component received.
    :param after: The state it sends on (or `None`).
    :returns: The events (chunks without text), in order.
    """
    if after is None:
        return
    known = len(before.tool_history)
    history = after.tool_history
    if before.pending is not None and after.pending is None:
        searched = next((s for s in reversed(history[:known]) if s.action == "search"), None)
        if searched is not None:
            yield step_chunk(searched, "documents")
    for step in history[known:]:
        yield step_chunk(step, step.action)


def step_chunk(step: ToolStep, event: str) -> StreamingChunk:
    """
    A step event: a chunk without text whose `meta` names the event and holds the step.

    :param step: The step.
    :param event: `search`, `documents`, or the step's action.
    :returns: The chunk.
    """
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
