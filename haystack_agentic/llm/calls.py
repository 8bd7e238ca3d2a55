# SPDX-License-Identifier: Apache-2.0
"""
One chat generator call with usage accounting and a tracing span, the same on the sync and async paths.
"""

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from haystack import logging, tracing
from haystack.dataclasses import ChatMessage
from haystack.utils.async_utils import _execute_component_async

from haystack_agentic.dataclasses.loop_state import LoopState
from haystack_agentic.llm.retries import DEFAULT_BACKOFF, DEFAULT_MAX_RETRIES, is_transient
from haystack_agentic.llm.timeouts import run_with_timeout
from haystack_agentic.llm.tokens import _COUNTER

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class LLMCall:
    """
    The outcome of one chat generator call: replies, or the exception it raised.

    :param replies: The generator's replies (empty when it raised).
    :param error: The exception, or `None`.
    :param state: The state with this call counted in `usage` for the role.
    """

    replies: list[ChatMessage]
    error: BaseException | None
    state: LoopState

    @property
    def text(self) -> str:
        """The first reply's text, stripped ('' when there is none)."""
        return ((self.replies[0].text or "") if self.replies else "").strip()


def _call_kwargs(
    messages: Sequence[ChatMessage], temperature: float | None, generation_kwargs: dict[str, Any] | None, tools: Any
) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"messages": list(messages)}
    gen_kwargs = dict(generation_kwargs or {})
    if temperature is not None:
        gen_kwargs["temperature"] = temperature
    if gen_kwargs:
        kwargs["generation_kwargs"] = gen_kwargs
    if tools:
        kwargs["tools"] = tools
    return kwargs


def _account(
    state: LoopState, role: str, messages: Sequence[ChatMessage], replies: list[ChatMessage], tools: Any,
    failed: bool = False,
) -> LoopState:
    # A failed attempt counts as a call, but no tokens are estimated for it: none may have reached a server.
    estimate = 0 if failed else _COUNTER.count(list(messages), tools=tools or None)
    return state.with_usage(role, replies, prompt_tokens_estimate=estimate)


def call_generator(
    generator: Any,
    state: LoopState,
    role: str,
    messages: Sequence[ChatMessage],
    *,
    temperature: float | None = None,
    generation_kwargs: dict[str, Any] | None = None,
    tools: Any = None,
    max_retries: int = DEFAULT_MAX_RETRIES,
    timeout: float | None = None,
    backoff: float = DEFAULT_BACKOFF,
) -> LLMCall:
    """
    Call a chat generator and count the call for `role`. Exceptions are caught and returned, not raised.

    Transient failures (`is_transient`: timeouts, connection errors, HTTP 429/5xx) are retried up to
    `max_retries` times with exponential backoff (`backoff`, `2 * backoff`, ... seconds); other exceptions are
    returned at once. Every attempt counts as a call in `usage`; tokens are counted only for attempts that
    returned (reported by the replies, else estimated).

    :param generator: Any Haystack chat generator.
    :param state: The run's state (for usage accounting).
    :param role: `controller`, `answer` or `fallback`.
    :param messages: The prompt messages.
    :param temperature: Sampling temperature, passed as `generation_kwargs["temperature"]` when set.
    :param generation_kwargs: Extra generation kwargs for this call.
    :param tools: Tools offered to the model, if any.
    :param max_retries: Retries of a transient failure (>= 0).
    :param timeout: Seconds one attempt may take (`None`: no limit); a timeout is transient.
    :param backoff: Seconds before the first retry; doubles each retry.
    :returns: The `LLMCall` (with the last exception when every attempt failed).
    """
    kwargs = _call_kwargs(messages, temperature, generation_kwargs, tools)
    attempt = 0
    while True:
        with _llm_span(role, state, attempt) as span:
            try:
                result = run_with_timeout(generator, kwargs, timeout, "the chat generator")
                replies, error = list(result.get("replies") or []), None
            except Exception as exc:  # noqa: BLE001 - any generator failure is a defined outcome of the loop
                replies, error = [], exc
            state = _account(state, role, messages, replies, tools, failed=error is not None)
            _tag_call(span, state, role, replies, error)
        if error is None or attempt >= max_retries or not is_transient(error):
            if error is not None:
                logger.warning("The {role} chat generator raised: {error}", role=role, error=repr(error))
            return LLMCall(replies=replies, error=error, state=state)
        logger.info("Transient {role} LLM failure ({error}); retry {n}", role=role, error=repr(error), n=attempt + 1)
        time.sleep(backoff * 2**attempt)
        attempt += 1


async def call_generator_async(
    generator: Any,
    state: LoopState,
    role: str,
    messages: Sequence[ChatMessage],
    *,
    temperature: float | None = None,
    generation_kwargs: dict[str, Any] | None = None,
    tools: Any = None,
    max_retries: int = DEFAULT_MAX_RETRIES,
    timeout: float | None = None,
    backoff: float = DEFAULT_BACKOFF,
) -> LLMCall:
    """
    Async twin of `call_generator`: awaits the generator's `run_async` when it has one, else runs `run` in a thread;
    the same retries, backoff (`asyncio.sleep`) and timeout (`asyncio.wait_for`).

    :returns: The `LLMCall`.
    """
    kwargs = _call_kwargs(messages, temperature, generation_kwargs, tools)
    attempt = 0
    while True:
        with _llm_span(role, state, attempt) as span:
            try:
                result = await asyncio.wait_for(_execute_component_async(generator, **kwargs), timeout=timeout)
                replies, error = list(result.get("replies") or []), None
            except asyncio.TimeoutError:
                replies, error = [], TimeoutError(f"the chat generator did not answer within {timeout} s")
            except Exception as exc:  # noqa: BLE001
                replies, error = [], exc
            state = _account(state, role, messages, replies, tools, failed=error is not None)
            _tag_call(span, state, role, replies, error)
        if error is None or attempt >= max_retries or not is_transient(error):
            if error is not None:
                logger.warning("The {role} chat generator raised: {error}", role=role, error=repr(error))
            return LLMCall(replies=replies, error=error, state=state)
        logger.info("Transient {role} LLM failure ({error}); retry {n}", role=role, error=repr(error), n=attempt + 1)
        await asyncio.sleep(backoff * 2**attempt)
        attempt += 1


def _llm_span(role: str, state: LoopState, attempt: int) -> Any:
    """A Haystack tracing span for one LLM call (a no-op unless a tracer is enabled)."""
    return tracing.tracer.trace(
        "haystack_agentic.llm_call",
        tags={
            "haystack_agentic.role": role,
            "haystack_agentic.iteration": state.iteration + 1,
            "haystack_agentic.attempt": attempt + 1,
        },
    )


def _tag_call(span: Any, state: LoopState, role: str, replies: list[ChatMessage], error: BaseException | None) -> None:
    usage = state.usage.get(role, {})
    span.set_tag("haystack_agentic.prompt_tokens_total", usage.get("prompt_tokens", 0))
    span.set_tag("haystack_agentic.completion_tokens_total", usage.get("completion_tokens", 0))
    span.set_tag("haystack_agentic.tool_calls", sum(len(r.tool_calls) for r in replies))
    if error is not None:
        span.set_tag("haystack_agentic.error", describe_error(error))


def describe_error(exc: BaseException) -> str:
    """
    A one-line description of an exception for `LoopState.error`.

    :param exc: The exception.
    :returns: `"<ExceptionType>: <message>"`.
    """
    return f"{type(exc).__name__}: {exc}"

