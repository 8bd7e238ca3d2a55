# SPDX-License-Identifier: Apache-2.0
"""
Shared plumbing for the components that call a chat generator: one call with usage accounting, the same on
the sync and async paths, prompt rendering, and (de)serialisation of an optional chat generator.
"""

import asyncio
import concurrent.futures
import functools
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from haystack import logging, tracing
from haystack.core.serialization import component_to_dict
from haystack.dataclasses import ChatMessage
from haystack.token_counters import ApproximateTokenCounter
from haystack.utils import deserialize_chatgenerator_inplace
from haystack.utils.async_utils import _execute_component_async
from haystack.utils.jinja2_sandbox import HaystackSandboxedEnvironment

from haystack_agentic.dataclasses.loop_state import LoopState

logger = logging.getLogger(__name__)

_ENV = HaystackSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
_COUNTER = ApproximateTokenCounter()


def render(template: str, **variables: Any) -> str:
    """
    Render a Jinja prompt template in Haystack's sandboxed environment.

    :param template: The template text.
    :param variables: The template's variables.
    :returns: The rendered text, stripped.
    """
    return _compiled(template).render(**variables).strip()


@functools.lru_cache(maxsize=256)
def _compiled(template: str) -> Any:
    # Compiling a template costs ~1 ms; prompts are a handful of fixed strings, so each is compiled once.
    return _ENV.from_string(template)


def with_system_prompt(template: str | None, question: str, messages: list[ChatMessage]) -> list[ChatMessage]:
    """
    Put a rendered system message before `messages` when a template is given.

    :param template: A Jinja template (variable `question`) or `None`.
    :param question: The run's question.
    :param messages: The prompt messages.
    :returns: The messages, with the system message first when there is one.
    """
    if not template:
        return messages
    return [ChatMessage.from_system(render(template, question=question)), *messages]


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
    # A failed attempt counts as a call, but no tokens are estimated for it: none may have reached a server. Replies
    # that report their usage need no estimate (rendering the whole conversation to count it costs ~0.1 ms).
    reported = any(((r.meta or {}).get("usage") or {}).get("prompt_tokens") is not None for r in replies)
    estimate = 0 if failed or reported else _COUNTER.count(list(messages), tools=tools or None)
    return state.with_usage(role, replies, prompt_tokens_estimate=estimate)


#: Exception class names (any library) that mark a transient failure worth retrying: timeouts, dropped
#: connections, rate limits and server errors (OpenAI's and httpx's names among them).
_TRANSIENT_NAMES = {
    "APITimeoutError",
    "APIConnectionError",
    "RateLimitError",
    "InternalServerError",
    "ServiceUnavailableError",
    "ConnectTimeout",
    "ReadTimeout",
    "RemoteProtocolError",
}
#: HTTP statuses that mark a transient failure (RFC 9110: timeout, conflict, too many requests, server errors).
_TRANSIENT_STATUSES = {408, 409, 429, 500, 502, 503, 504}

#: Retries after the first attempt of a transient failure (default of every LLM role).
DEFAULT_MAX_RETRIES = 2
#: First backoff in seconds; it doubles after each retry.
DEFAULT_BACKOFF = 0.5


def is_transient(exc: BaseException) -> bool:
    """
    Whether an exception from a chat generator is worth retrying (timeouts, connection errors, 429 and 5xx).

    The exception and its causes are inspected, since Haystack may wrap the client's error.

    :param exc: The exception.
    :returns: `True` for a transient failure.
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, (TimeoutError, ConnectionError)) or type(current).__name__ in _TRANSIENT_NAMES:
            return True
        if getattr(current, "status_code", None) in _TRANSIENT_STATUSES:
            return True
        current = current.__cause__ or current.__context__
    return False


def run_with_timeout(instance: Any, kwargs: dict[str, Any], timeout: float | None, what: str) -> dict[str, Any]:
    """
    Call a component's `run(**kwargs)`, giving up after `timeout` seconds.

    A thread cannot be killed: on timeout the call is abandoned (its result ignored) and the caller goes on.

    :param instance: The component.
    :param kwargs: Its inputs.
    :param timeout: Seconds, or `None` for no limit (then it is a plain call).
    :param what: Names the component in the error ("the chat generator", "the retriever").
    :returns: The component's output.
    :raises TimeoutError: When the call takes longer than `timeout`.
    """
    if timeout is None:
        return instance.run(**kwargs)
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    try:
        return pool.submit(instance.run, **kwargs).result(timeout=timeout)
    except concurrent.futures.TimeoutError as exc:
        raise TimeoutError(f"{what} did not answer within {timeout} s") from exc
    finally:
        pool.shutdown(wait=False)


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


def generator_to_dict(generator: Any) -> dict[str, Any] | None:
    """
    Serialize an optional chat generator the way Haystack's Agent does.

    :param generator: The generator or `None`.
    :returns: Its dict, or `None`.
    """
    return None if generator is None else component_to_dict(obj=generator, name="chat_generator")


def generator_from_dict_inplace(init_params: dict[str, Any], key: str = "chat_generator") -> None:
    """
    Deserialize an optional chat generator in `init_params[key]` in place (left alone when absent or `None`).

    :param init_params: The component's init parameters.
    :param key: The key holding the generator.
    """
    if init_params.get(key) is not None:
        deserialize_chatgenerator_inplace(init_params, key=key)


def warm_up_generator(generator: Any) -> None:
    """
    Warm up a chat generator if it has a `warm_up` method.

    :param generator: The generator or `None`.
    """
    if generator is not None and hasattr(generator, "warm_up"):
        generator.warm_up()


def format_chunks(chunks: Sequence[Any], max_chars: int, budget_tokens: int | None = None) -> str:
    """
    Render chunks as a numbered list for a prompt: `[n] (title) content`, each cut to `max_chars` characters.

    With `budget_tokens`, chunks are added best first while the text stays within the budget (tokens estimated at
    4 characters each, Haystack's `ApproximateTokenCounter` ratio); the lowest-ranked chunks are left out first,
    and a first chunk larger than the whole budget is cut to fit.

    :param chunks: Documents, best first.
    :param max_chars: Most characters of each chunk's content.
    :param budget_tokens: Most tokens of the whole text, or `None` for no limit.
    :returns: The text ('' when there are no chunks).
    """
    budget_chars = None if budget_tokens is None else int(budget_tokens * _COUNTER.chars_per_token)
    lines: list[str] = []
    used = 0
    for number, doc in enumerate(chunks, start=1):
        content = (doc.content or "").strip()
        if len(content) > max_chars:
            content = content[:max_chars].rstrip() + " [...]"
        title = (doc.meta or {}).get("title")
        line = f"[{number}] " + (f"({title}) " if title else "") + content
        if budget_chars is not None and used + len(line) + 1 > budget_chars:
            if not lines:
                lines.append(line[: max(budget_chars - 6, 0)] + " [...]")
            break
        lines.append(line)
        used += len(line) + 1
    return "\n".join(lines)


def estimate_tokens(messages: Sequence[ChatMessage], tools: Any = None) -> int:
    """
    Estimated prompt tokens of messages (and tool schemas), with Haystack's `ApproximateTokenCounter`.

    :param messages: The messages.
    :param tools: Tools sent with them, if any.
    :returns: The estimate, in tokens.
    """
    return _COUNTER.count(list(messages), tools=tools or None)


def compact_messages(messages: Sequence[ChatMessage], budget_tokens: int, tools: Any = None) -> list[ChatMessage]:
    """
    Fit a tool-calling conversation into a token budget by compacting older tool results.

    Tool results are replaced, oldest first, by a one-line digest (their first line, which names the query and
    the number of results, plus the chunk ids they listed) until the conversation fits; the latest tool result
    is kept whole as long as possible, then cut from its end (its chunks are in rank order, so the lowest ranks
    go first). System, user and assistant messages are never changed. The input is not modified.

    :param messages: The conversation.
    :param budget_tokens: Most prompt tokens (estimated as in `estimate_tokens`).
    :param tools: The tools sent with the conversation (their schemas count too).
    :returns: The messages to send.
    """
    result = list(messages)
    if estimate_tokens(result, tools) <= budget_tokens:
        return result
    tool_indexes = [i for i, m in enumerate(result) if m.tool_call_result is not None]
    for i in tool_indexes[:-1]:
        result[i] = _with_tool_text(result[i], _digest(result[i].tool_call_result.result))
        if estimate_tokens(result, tools) <= budget_tokens:
            return result
    if tool_indexes:
        last = tool_indexes[-1]
        text = result[last].tool_call_result.result
        excess_chars = int((estimate_tokens(result, tools) - budget_tokens) * _COUNTER.chars_per_token) + 40
        keep = max(len(text) - excess_chars, 0)
        result[last] = _with_tool_text(result[last], text[:keep].rstrip() + " [... cut to fit the context budget]")
    return result


def _digest(text: str) -> str:
    first_line = (text or "").split("\n", 1)[0][:200]
    ids = re.findall(r"id=(\S+)", text or "")
    shown = ", ".join(ids[:10]) + (f" and {len(ids) - 10} more" if len(ids) > 10 else "")
    return f"[compacted to save context] {first_line}" + (f" Chunk ids: {shown}." if ids else "")


def _with_tool_text(message: ChatMessage, text: str) -> ChatMessage:
    result = message.tool_call_result
    return ChatMessage.from_tool(tool_result=text, origin=result.origin, error=result.error)
