# SPDX-License-Identifier: Apache-2.0

from typing import Any

from haystack import component, logging
from haystack.components.generators.chat.types import ChatGenerator
from haystack.dataclasses import ChatMessage, StreamingCallbackT

from haystack_agentic.dataclasses.loop_state import LoopState
from haystack_agentic.grounding.citations import cite, draft_sources
from haystack_agentic.grounding.markers import MAX_MARKER, has_own_words, strip_markers
from haystack_agentic.llm.calls import call_generator, call_generator_async, describe_error, role_options
from haystack_agentic.llm.loop_tools import run_tool_names
from haystack_agentic.llm.prompts import format_chunks, render, role_messages
from haystack_agentic.llm.retries import DEFAULT_MAX_RETRIES
from haystack_agentic.llm.serialization import role_from_dict, role_to_dict, warm_up_generator
from haystack_agentic.llm.streaming import (
    AnswerTextHold,
    emit,
    emit_async,
    pick_callback,
    role_callback,
    role_callback_async,
)
from haystack_agentic.llm.tokens import token_counter_for

logger = logging.getLogger(__name__)

#: Answers from the accumulated chunks when the loop ran out of iterations. Variables: `question`, `chunks`,
#: `draft`.
DEFAULT_SYNTHESIS_PROMPT = """\
The search for an answer ran out of turns. Answer the question from the context below if it supports an
answer; otherwise reply exactly "NO ANSWER". Reply with the answer only, in words: a name, place, date or short
phrase.

Context:
{{ chunks }}

{% if draft %}
Draft answer so far: {{ draft }}
{% endif %}
Question: {{ question }}
Answer:"""

_NO_ANSWER = "NO ANSWER"


@component
class FallbackSynthesizer:
    """
    Answers from the accumulated chunks when the loop reaches `max_iterations` without an answer.

    Answers from the accumulated chunks, in one tool-less LLM call, when the agentic loop reaches `max_iterations`
    without an answer; the answer is written in words and cited from the chunks that support it.

    ### Usage example
    ```python
    from haystack.components.generators.chat import OpenAIChatGenerator
    from haystack_agentic import FallbackSynthesizer

    fallback = FallbackSynthesizer(chat_generator=OpenAIChatGenerator(model="gpt-4o-mini"), temperature=0.0)
    ```
    """

    def __init__(
        self,
        chat_generator: ChatGenerator | None = None,
        temperature: float | None = None,
        generation_kwargs: dict[str, Any] | None = None,
        system_prompt: str | None = None,
        synthesis_prompt: str | None = None,
        enabled: bool = True,
        max_chunks: int = 10,
        chunk_chars: int = 1200,
        context_budget_tokens: int | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
        timeout: float | None = None,
        streaming_callback: StreamingCallbackT | None = None,
    ) -> None:
        """
        Create a FallbackSynthesizer.

        :param chat_generator: The fallback LLM (any Haystack chat generator). `None` behaves like `enabled=False`.
        :param temperature: Sampling temperature of the fallback role (`None`: the generator's default).
        :param generation_kwargs: Extra generation kwargs for the call.
        :param system_prompt: Optional system message (Jinja, variable `question`) sent before the prompt.
        :param synthesis_prompt: Jinja template replacing `DEFAULT_SYNTHESIS_PROMPT`.
        :param enabled: `False` turns the fallback call off.
        :param max_chunks: Most chunks (best first) put into the prompt. Default 10.
        :param chunk_chars: Most characters of each chunk in the prompt. Default 1200.
        :param context_budget_tokens: Most tokens of the chunks in a prompt (`llm.tokens.token_counter_for`); the
            lowest-ranked chunks are left out first. `None` (default): `max_chunks` x `chunk_chars` bounds it.
        :param max_retries: Retries of a transient LLM failure (timeout, connection, HTTP 429/5xx). Default 2.
        :param timeout: Seconds one LLM call may take (`None`: no limit); a timeout counts as transient.
        :param streaming_callback: Called with each `StreamingChunk` of the fallback call (role `fallback`, part of
            the final answer; a reply that is "NO ANSWER" is never passed on). The run input wins over it.
        :raises ValueError: If `max_chunks` or `chunk_chars` is below 1, or `max_chunks` above
            `grounding.markers.MAX_MARKER` (99).
        """
        if max_chunks < 1 or chunk_chars < 1:
            msg = "max_chunks and chunk_chars must be at least 1"
            raise ValueError(msg)
        if max_chunks > MAX_MARKER:
            msg = f"max_chunks must be at most {MAX_MARKER} (a [n] citation marker numbers at most that many chunks)"
            raise ValueError(msg)
        self.chat_generator = chat_generator
        self.temperature = temperature
        self.generation_kwargs = generation_kwargs
        self.context_budget_tokens = context_budget_tokens
        self.max_retries = max_retries
        self.timeout = timeout
        self.system_prompt = system_prompt
        self.synthesis_prompt = synthesis_prompt
        self.enabled = enabled
        self.max_chunks = max_chunks
        self.chunk_chars = chunk_chars
        self.streaming_callback = streaming_callback

    def warm_up(self) -> None:
        """Warm up the fallback LLM."""
        if self.enabled:
            warm_up_generator(self.chat_generator)

    @component.output_types(finished=LoopState)
    def run(self, state: LoopState, streaming_callback: StreamingCallbackT | None = None) -> dict[str, LoopState]:
        """
        End an exhausted run, answering from its chunks when possible.

        :param state: The exhausted run's state.
        :param streaming_callback: A sync callback for this run's chunks (wins over the init parameter).
        :returns: `{"finished": LoopState}` with `terminated_by="max_iterations"` and `answer`: `None` without
            chunks, when the call fails (kept in `error`), or on a blank or "NO ANSWER" reply; the draft, if any,
            when disabled.
        :raises ValueError: If the callback is an async function (use `run_async`).
        """
        callback = pick_callback(self.streaming_callback, streaming_callback, is_async=False)
        messages = self._prepare(state)
        if messages is None:
            return {"finished": self._without_call(state)}
        hold = AnswerTextHold(len(state.chunks[: self.max_chunks]))
        options = role_options(self)
        options["streaming_callback"] = role_callback(callback, "fallback", answer=True, hold_no_answer=True, hold=hold)
        call = call_generator(self.chat_generator, state, "fallback", messages, **options)
        finished = self._complete(state, call.state, call.text, call.error)
        answer = finished.outcome.answer
        emit(callback, hold.rest(answer, "fallback") if answer else [])
        return {"finished": finished}

    @component.output_types(finished=LoopState)
    async def run_async(
        self, state: LoopState, streaming_callback: StreamingCallbackT | None = None
    ) -> dict[str, LoopState]:
        """Async twin of `run` (a sync or async callback)."""
        callback = pick_callback(self.streaming_callback, streaming_callback, is_async=True)
        messages = self._prepare(state)
        if messages is None:
            return {"finished": self._without_call(state)}
        hold = AnswerTextHold(len(state.chunks[: self.max_chunks]))
        options = role_options(self)
        options["streaming_callback"] = role_callback_async(
            callback, "fallback", answer=True, hold_no_answer=True, hold=hold
        )
        call = await call_generator_async(self.chat_generator, state, "fallback", messages, **options)
        finished = self._complete(state, call.state, call.text, call.error)
        answer = finished.outcome.answer
        await emit_async(callback, hold.rest(answer, "fallback") if answer else [])
        return {"finished": finished}

    def _without_call(self, state: LoopState) -> LoopState:
        # Disabled: keep a draft if the loop had one (cited by its `answer` call's sources); enabled: no chunks.
        if (self.enabled and self.chat_generator is not None) or not state.draft:
            return state.finish("max_iterations", answer=None)
        return cite(state.finish("max_iterations", answer=state.draft), state.draft, cited_ids=draft_sources(state))

    def _prepare(self, state: LoopState) -> list[ChatMessage] | None:
        if not self.enabled or self.chat_generator is None or not state.chunks:
            return None
        counter = token_counter_for(self.chat_generator)
        chunks = format_chunks(state.chunks[: self.max_chunks], self.chunk_chars, self.context_budget_tokens, counter)
        template = self.synthesis_prompt or DEFAULT_SYNTHESIS_PROMPT
        prompt = render(template, question=state.question, chunks=chunks, draft=state.draft)
        return role_messages(self.system_prompt, state.question, state.conversation, prompt, counter)

    def _complete(self, before: LoopState, state: LoopState, text: str, error: BaseException | None) -> LoopState:
        if error is not None:
            return state.finish("max_iterations", answer=None, error=f"Fallback failed: {describe_error(error)}")
        shown = before.chunks[: self.max_chunks]
        text = strip_markers(text, len(shown)) or ""  # the answer in words: its citations are found in the chunks
        if not has_own_words(text, run_tool_names(before)) or text.rstrip(".").upper() == _NO_ANSWER:
            return state.finish("max_iterations", answer=None)
        return cite(state.finish("max_iterations", answer=text), text, shown=shown)

    def to_dict(self) -> dict[str, Any]:
        """:returns: The component as a dictionary, its chat generator serialised (`role_to_dict`)."""
        return role_to_dict(self, "synthesis_prompt", "enabled", "max_chunks", "chunk_chars")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "FallbackSynthesizer":
        """:returns: The component from `to_dict()` output (`role_from_dict`)."""
        return role_from_dict(cls, data)
