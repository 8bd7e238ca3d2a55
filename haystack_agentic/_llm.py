# SPDX-License-Identifier: Apache-2.0
"""
Shared plumbing for the components that call a chat generator: one call with usage accounting, the same on
the sync and async paths, prompt rendering, and (de)serialisation of an optional chat generator.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from haystack import logging
from haystack.core.serialization import component_to_dict
from haystack.dataclasses import ChatMessage
from haystack.token_counters import ApproximateTokenCounter
from haystack.utils import deserialize_chatgenerator_inplace
from haystack.utils.async_utils import _execute_component_async
from haystack.utils.jinja2_sandbox import HaystackSandboxedEnvironment

from haystack_agentic.loop_state import LoopState

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
    return _ENV.from_string(template).render(**variables).strip()


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
    state: LoopState, role: str, messages: Sequence[ChatMessage], replies: list[ChatMessage], tools: Any
) -> LoopState:
    estimate = _COUNTER.count(list(messages), tools=tools or None)
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
) -> LLMCall:
    """
    Call a chat generator once and count the call for `role`. Exceptions are caught and returned, not raised.

    :param generator: Any Haystack chat generator.
    :param state: The run's state (for usage accounting).
    :param role: `controller`, `answer` or `fallback`.
    :param messages: The prompt messages.
    :param temperature: Sampling temperature, passed as `generation_kwargs["temperature"]` when set.
    :param generation_kwargs: Extra generation kwargs for this call.
    :param tools: Tools offered to the model, if any.
    :returns: The `LLMCall`.
    """
    try:
        result = generator.run(**_call_kwargs(messages, temperature, generation_kwargs, tools))
        replies = list(result.get("replies") or [])
        error = None
    except Exception as exc:  # noqa: BLE001 - any generator failure is a defined outcome of the loop
        logger.warning("The {role} chat generator raised: {error}", role=role, error=repr(exc))
        replies, error = [], exc
    return LLMCall(replies=replies, error=error, state=_account(state, role, messages, replies, tools))


async def call_generator_async(
    generator: Any,
    state: LoopState,
    role: str,
    messages: Sequence[ChatMessage],
    *,
    temperature: float | None = None,
    generation_kwargs: dict[str, Any] | None = None,
    tools: Any = None,
) -> LLMCall:
    """
    Async twin of `call_generator`: awaits the generator's `run_async` when it has one, else runs `run` in a thread.

    :returns: The `LLMCall`.
    """
    try:
        result = await _execute_component_async(
            generator, **_call_kwargs(messages, temperature, generation_kwargs, tools)
        )
        replies = list(result.get("replies") or [])
        error = None
    except Exception as exc:  # noqa: BLE001
        logger.warning("The {role} chat generator raised: {error}", role=role, error=repr(exc))
        replies, error = [], exc
    return LLMCall(replies=replies, error=error, state=_account(state, role, messages, replies, tools))


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


def format_chunks(chunks: Sequence[Any], max_chars: int) -> str:
    """
    Render chunks as a numbered list for a prompt: `[n] (title) content`, each cut to `max_chars` characters.

    :param chunks: Documents, best first.
    :param max_chars: Most characters of each chunk's content.
    :returns: The text ('' when there are no chunks).
    """
    lines = []
    for number, doc in enumerate(chunks, start=1):
        content = (doc.content or "").strip()
        if len(content) > max_chars:
            content = content[:max_chars].rstrip() + " [...]"
        title = (doc.meta or {}).get("title")
        lines.append(f"[{number}] " + (f"({title}) " if title else "") + content)
    return "\n".join(lines)
