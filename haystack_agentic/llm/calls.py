# SPDX-License-Identifier: Apache-2.0
"""One chat generator call with retries, usage accounting and a tracing span, sync and async."""

import contextlib
import inspect
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypedDict, Unpack, cast

from haystack import logging, tracing
from haystack.dataclasses import ChatMessage
from haystack.token_counters import ApproximateTokenCounter

from haystack_agentic.dataclasses.loop_state import LoopState
from haystack_agentic.llm.generator_checks import run_takes
from haystack_agentic.llm.retries import (
    DEFAULT_BACKOFF,
    DEFAULT_MAX_RETRIES,
    RetryPolicy,
    fix_for,
    generator_retries_itself,
    is_transient,
)
from haystack_agentic.llm.special_tokens import neutral_messages, pattern_for
from haystack_agentic.llm.streaming import for_thread
from haystack_agentic.llm.timeouts import run_async_with_timeout, run_with_timeout, still_running
from haystack_agentic.llm.valid_text import valid_replies, valid_text
from haystack_agentic.tracing import chat_generator_span, tag_chat_call

logger = logging.getLogger(__name__)

_NO_SPAN = contextlib.nullcontext(None)

#: Estimates the prompt tokens of a call for `usage` when the replies do not report them (an average, not a bound).
_USAGE_COUNTER = ApproximateTokenCounter()


@dataclass(frozen=True)
class LLMCall:
    """
    The outcome of one chat generator call: replies, error and the state with the call counted.

    The outcome of one chat generator call: its `replies` (empty when it raised), the `error` it raised or
    `None`, and the `state` with this call counted in `usage` for the role.
    """

    replies: list[ChatMessage]
    error: BaseException | None
    state: LoopState

    @property
    def text(self) -> str:
        """The first reply's text, stripped ('' when there is none)."""
        return ((self.replies[0].text or "") if self.replies else "").strip()


def sends_openai_requests(generator: Any) -> bool:
    """Whether the generator is Haystack's `OpenAIChatGenerator` or a subclass (Azure, OpenAI-compatible servers)."""
    openai = sys.modules.get("haystack.components.generators.chat.openai")  # not imported: no such generator exists
    return openai is not None and isinstance(generator, openai.OpenAIChatGenerator)


def _set_unless_given(generator: Any, kwargs: dict[str, Any], key: str, value: Any) -> None:
    """Send `generation_kwargs[key] = value` unless the call or the generator's own `generation_kwargs` set `key`."""
    own = {**(getattr(generator, "generation_kwargs", None) or {}), **kwargs.get("generation_kwargs", {})}
    if key not in own:
        kwargs["generation_kwargs"] = {**kwargs.get("generation_kwargs", {}), key: value}


class CallOptions(TypedDict, total=False):
    """The options of one chat generator call, all optional."""

    #: Sampling temperature, sent as `generation_kwargs["temperature"]` when set.
    temperature: float | None
    #: Extra generation kwargs for this call.
    generation_kwargs: dict[str, Any] | None
    #: Tools offered to the model; an `OpenAIChatGenerator` also gets `tool_choice: "auto"` unless the role's or
    #: the generator's `generation_kwargs` set it (some OpenAI-compatible servers, llama.cpp, drop tools without).
    tools: Any
    #: Retries of a transient failure (>= 0). Default `DEFAULT_MAX_RETRIES` (2).
    max_retries: int
    #: Seconds one attempt may take (`None`: no limit); a timeout is transient.
    timeout: float | None
    #: Seconds before the first retry, doubling each retry. Default `DEFAULT_BACKOFF` (0.5).
    backoff: float
    #: Passed to the generator (sync for `call_generator`, async for `call_generator_async`); an attempt that
    #: streamed something is not retried.
    streaming_callback: Any


#: Chat generators that talk to the OpenAI chat API and accept its `stream_options`.
_OPENAI_GENERATORS = {
    "haystack.components.generators.chat.openai": "OpenAIChatGenerator",
    "haystack.components.generators.chat.azure": "AzureOpenAIChatGenerator",
}


def _openai_generators() -> tuple[type, ...]:
    """Haystack's own OpenAI chat generator classes that are imported (an instance exists only once its module is)."""
    loaded = (getattr(sys.modules.get(module), name, None) for module, name in _OPENAI_GENERATORS.items())
    return tuple(cls for cls in loaded if isinstance(cls, type))


_ROLE_OPTIONS = ("temperature", "generation_kwargs", "max_retries", "timeout")


def role_options(role_component: Any) -> CallOptions:
    """The `CallOptions` an LLM role component holds as attributes, for `call_generator(..., **role_options(self))`."""
    return cast(CallOptions, {n: getattr(role_component, n) for n in _ROLE_OPTIONS if hasattr(role_component, n)})


class _Attempts:
    """The attempts of one call: the kwargs sent, the state they are counted in, their number, the retry policy."""

    def __init__(
        self, generator: Any, state: LoopState, role: str, messages: Sequence[ChatMessage], options: CallOptions
    ) -> None:
        unknown = sorted(set(options) - set(CallOptions.__annotations__))
        if unknown:
            known = list(CallOptions.__annotations__)
            msg = f"Unknown LLM call option(s) {unknown}; the options are {known}"
            raise TypeError(msg)
        self.generator, self.state, self.role, self.messages, self.number = generator, state, role, messages, 0
        self.tools, self.timeout, self.streamed = options.get("tools"), options.get("timeout"), False
        self.kwargs: dict[str, Any] = {"messages": neutral_messages(messages, pattern_for(generator))}
        generation_kwargs = dict(options.get("generation_kwargs") or {})
        if options.get("temperature") is not None:
            generation_kwargs["temperature"] = options["temperature"]
        if generation_kwargs:
            self.kwargs["generation_kwargs"] = generation_kwargs
        if self.tools:
            self.kwargs["tools"] = self.tools
        callback = options.get("streaming_callback")
        if callback is not None and not run_takes(generator, "streaming_callback"):
            logger.debug("The {role} chat generator takes no streaming_callback; its call is not streamed.", role=role)
        elif callback is not None:
            self.kwargs["streaming_callback"] = self._counting(callback)
            if type(generator) in _openai_generators():  # OpenAI reports a streamed usage only when asked
                _set_unless_given(generator, self.kwargs, "stream_options", {"include_usage": True})
        if self.tools and sends_openai_requests(generator):
            _set_unless_given(generator, self.kwargs, "tool_choice", "auto")
        max_retries = options.get("max_retries", DEFAULT_MAX_RETRIES)
        if max_retries and generator_retries_itself(generator):
            # Its retries times ours would multiply the attempts (and hide them from `usage`).
            logger.debug("The {role} chat generator retries by itself; the loop does not retry it.", role=role)
            max_retries = 0
        self.policy = RetryPolicy(
            max_retries=max_retries,
            backoff=options.get("backoff", DEFAULT_BACKOFF),
            is_failure=self._worth_retrying,
            describe=lambda call: f"{role}: {call.error!r}",
        )

    def _worth_retrying(self, call: LLMCall) -> bool:
        """
        Whether a failed attempt is retried: a transient failure, if nothing streamed and no attempt still runs.

        Whether a failed attempt is retried: a transient failure (`is_transient`), unless the attempt streamed
        something, or it overran the time limit and still runs in its thread (`timeouts.still_running`): a retry
        would run beside it, and a local server with one slot would queue both.
        """
        if call.error is None or not is_transient(call.error) or self.streamed:
            return False
        if still_running(call.error):
            logger.warning(
                "The {role} chat generator overran its timeout and still runs; not retried beside it.", role=self.role
            )
            return False
        return True

    def _counting(self, callback: Any) -> Any:
        """The callback, noting that the attempt streamed something."""
        if inspect.iscoroutinefunction(callback):

            async def on_chunk_async(chunk: Any) -> None:
                self.streamed = True
                await callback(chunk)

            return on_chunk_async

        def on_chunk(chunk: Any) -> None:
            self.streamed = True
            callback(chunk)

        return on_chunk

    def span(self) -> Any:
        """A span for the next attempt (`chat_generator_span`); a no-op unless a tracer is enabled."""
        if not tracing.is_tracing_enabled():
            return _NO_SPAN
        return chat_generator_span(self.generator, self.state, self.role, self.number + 1)

    def record(self, span: Any, result: Any, error: BaseException | None) -> LLMCall:
        """
        Count one attempt in `usage`, tag its span and return the call's outcome.

        Count one attempt in `usage` (a failed one has no estimated prompt tokens), tag its span; the replies are
        the `valid_replies` of the generator's `result` (a result that breaks the contract is the attempt's error).
        """
        self.number += 1
        replies: list[ChatMessage] = []
        if error is None:
            try:
                replies = valid_replies(result)
            except TypeError as exc:
                error = exc
        before = self.state.usage.get(self.role, {})
        reported = any(((r.meta or {}).get("usage") or {}).get("prompt_tokens") is not None for r in replies)
        estimate = 0 if error or reported else _USAGE_COUNTER.count(list(self.messages), tools=self.tools or None)
        self.state = self.state.with_usage(self.role, replies, prompt_tokens_estimate=estimate)
        if span is not None:
            usage = self.state.usage.get(self.role, {})
            call_usage = {k: usage.get(k, 0) - before.get(k, 0) for k in ("prompt_tokens", "completion_tokens")}
            tag_chat_call(span, self.generator, self.kwargs, replies, call_usage)
            span.set_tag("haystack_agentic.prompt_tokens_total", usage.get("prompt_tokens", 0))
            span.set_tag("haystack_agentic.completion_tokens_total", usage.get("completion_tokens", 0))
            span.set_tag("haystack_agentic.tool_calls", sum(len(r.tool_calls) for r in replies))
            if error is not None:
                span.set_tag("haystack_agentic.error", describe_error(error))
        return LLMCall(replies=replies, error=error, state=self.state)

    def finish(self, call: LLMCall) -> LLMCall:
        if call.error is not None:
            logger.warning("The {role} chat generator raised: {error}", role=self.role, error=repr(call.error))
        return call


def call_generator(
    generator: Any, state: LoopState, role: str, messages: Sequence[ChatMessage], **options: Unpack[CallOptions]
) -> LLMCall:
    """
    Call a chat generator and count each attempt in `usage` for `role`; exceptions are returned, not raised.

    Transient failures (`is_transient`) are retried with exponential backoff (`RetryPolicy`), unless the generator
    retries by itself (`generator_retries_itself`); other exceptions are returned at once.

    :param role: `controller`, `answer`, `fallback` or `grounding`.
    :param options: `CallOptions`.
    :returns: The `LLMCall` (with the last exception when every attempt failed).
    :raises TypeError: On an option that `CallOptions` does not name.
    """
    attempts = _Attempts(generator, state, role, messages, options)

    def attempt() -> LLMCall:
        with attempts.span() as span:
            try:
                result = run_with_timeout(generator, attempts.kwargs, attempts.timeout, "the chat generator")
                error = None
            except Exception as exc:
                result, error = None, exc
            return attempts.record(span, result, error)

    return attempts.finish(attempts.policy.run(attempt))


async def call_generator_async(
    generator: Any, state: LoopState, role: str, messages: Sequence[ChatMessage], **options: Unpack[CallOptions]
) -> LLMCall:
    """Async twin of `call_generator`: awaits `run_async` when the generator has one, else runs `run` in a thread."""
    attempts = _Attempts(generator, state, role, messages, options)
    kwargs = attempts.kwargs
    if "streaming_callback" in kwargs and not callable(getattr(generator, "run_async", None)):
        # Its sync `run` goes to a worker thread: a sync callback that runs the async one on this loop.
        kwargs = {**kwargs, "streaming_callback": for_thread(kwargs["streaming_callback"])}

    async def attempt() -> LLMCall:
        with attempts.span() as span:
            try:
                result = await run_async_with_timeout(generator, kwargs, attempts.timeout, "the chat generator")
                error: Exception | None = None
            except Exception as exc:
                result, error = None, exc
            return attempts.record(span, result, error)

    return attempts.finish(await attempts.policy.run_async(attempt))


def describe_error(exc: BaseException) -> str:
    """An exception on one line for `LoopOutcome.error`: `"<Type>: <message>"`, then `" (fix: ...)"` from `fix_for`."""
    fix = fix_for(exc)
    return valid_text(f"{type(exc).__name__}: {exc}" + (f" (fix: {fix})" if fix else ""))
