# SPDX-License-Identifier: Apache-2.0
"""The retry policy of every LLM call, sync and async, on `tenacity`, and which failures are transient."""

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from haystack import logging
from tenacity import AsyncRetrying, RetryCallState, Retrying, retry_if_result, stop_after_attempt, wait_exponential

from haystack_agentic.extras import is_instance

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: Exception classes (module, class names) of transient failures: timeouts, dropped connections, rate limits.
_TRANSIENT_CLASSES = {
    "openai": ("APITimeoutError", "APIConnectionError", "RateLimitError", "InternalServerError"),
    "httpx": ("ConnectTimeout", "ReadTimeout", "RemoteProtocolError"),
}
#: HTTP statuses that mark a transient failure (RFC 9110: timeout, conflict, too many requests, server errors).
_TRANSIENT_STATUSES = {408, 409, 429, 500, 502, 503, 504}

#: Retries after the first attempt of a transient failure.
DEFAULT_MAX_RETRIES = 2
#: First backoff in seconds; it doubles after each retry.
DEFAULT_BACKOFF = 0.5

#: A server option named in an error's text (`--jinja`, `-c`): the server must be restarted, retrying cannot help.
_SERVER_OPTION = re.compile(r"(?<![\w-])(--[a-z][a-z-]+|-c\b)|\bflag\b")

#: What to do about a permanent failure, by a pattern of its text (first match wins).
_FIXES = {
    r"--jinja|jinja": "start the server with --jinja (llama.cpp), or route without tools: --mode json",
    r"context (size|length|window)|n_ctx|too many tokens|maximum context": (
        "start the server with a bigger context (llama.cpp: -c 8192), or lower the router's context_budget_tokens"
    ),
    r"\btools?\b.*not supported|does not support tools": "route without tools: --mode json",
}
#: What to do about a permanent HTTP status, when the text names no fix.
_STATUS_FIXES = {
    401: "check the API key (OPENAI_API_KEY)",
    403: "check the API key's permissions",
    404: "check --base-url (an OpenAI-compatible server's URL usually ends in /v1) and --model",
}


def exception_chain(exc: BaseException) -> list[BaseException]:
    """The exception and its causes, outermost first, without cycles."""
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and all(current is not e for e in seen):
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def status_code(exc: BaseException) -> int | None:
    """The HTTP status of a failed request (an OpenAI client or httpx error, or one they caused), or `None`."""
    for current in exception_chain(exc):
        code = getattr(current, "status_code", None)
        if isinstance(code, int):
            return code
    return None


def is_transient(exc: BaseException) -> bool:
    """
    Whether a chat generator's exception is worth retrying.

    Whether a chat generator's exception is worth retrying: timeouts, dropped connections, HTTP 408, 409, 429 and
    5xx, unless its text names a server option (`500 tools param requires --jinja flag`).
    """
    if _SERVER_OPTION.search(str(exc)):
        return False
    code = status_code(exc)
    if code is not None:
        return code in _TRANSIENT_STATUSES
    return any(
        isinstance(current, (TimeoutError, ConnectionError))
        or any(is_instance(current, module, *names) for module, names in _TRANSIENT_CLASSES.items())
        for current in exception_chain(exc)
    )


def fix_for(exc: BaseException) -> str | None:
    """What the user can do about a permanent failure, as an imperative clause, or `None`."""
    fixes = [fix for pattern, fix in _FIXES.items() if re.search(pattern, str(exc), re.IGNORECASE)]
    return fixes[0] if fixes else _STATUS_FIXES.get(status_code(exc) or 0)


def refuses_response_format(exc: BaseException) -> bool:
    """Whether a server refused a request for its `response_format` (HTTP 400/422/500 naming it): resend without."""
    code = status_code(exc)
    return code in (400, 422, 500) and re.search(r"response_format|json_schema", str(exc)) is not None


def generator_retries_itself(generator: Any) -> bool:
    """Whether a chat generator retries on its own: a `max_retries` attribute other than 0 (`OpenAIChatGenerator`)."""
    return hasattr(generator, "max_retries") and generator.max_retries != 0


@dataclass(frozen=True)
class RetryPolicy:
    """
    Retry transient failures with exponential backoff.

    Retry transient failures (`is_failure(outcome)`) up to `max_retries` times, `backoff` seconds before the first
    retry, doubling each retry; `describe(outcome)` names the failure in the log line before a retry.
    """

    max_retries: int
    backoff: float
    is_failure: Callable[[Any], bool]
    describe: Callable[[Any], str] = repr

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            msg = f"max_retries must be 0 or more, got {self.max_retries}"
            raise ValueError(msg)
        if self.backoff < 0:
            msg = f"backoff must be 0 or more seconds, got {self.backoff}"
            raise ValueError(msg)

    def _settings(self) -> dict[str, Any]:
        return {
            "stop": stop_after_attempt(self.max_retries + 1),
            "wait": wait_exponential(multiplier=self.backoff, exp_base=2),
            "retry": retry_if_result(self.is_failure),
            "before_sleep": self._log_retry,
            # Out of retries: return the last outcome instead of raising tenacity's RetryError.
            "retry_error_callback": lambda retry_state: retry_state.outcome.result(),
        }

    def _log_retry(self, retry_state: RetryCallState) -> None:
        logger.info(
            "Transient LLM failure ({error}); retry {n} in {seconds} s",
            error=self.describe(retry_state.outcome.result()),
            n=retry_state.attempt_number,
            seconds=retry_state.upcoming_sleep,
        )

    def run(self, attempt: Callable[[], T]) -> T:
        """Run `attempt` (never raises) until its outcome is no transient failure or retries run out; the last one."""
        first = attempt()
        if self.max_retries == 0 or not self.is_failure(first):
            return first
        replay = [first]
        return Retrying(**self._settings())(lambda: replay.pop() if replay else attempt())

    async def run_async(self, attempt: Callable[[], Awaitable[T]]) -> T:
        """Async twin of `run`: awaits each attempt and sleeps with `asyncio.sleep`."""
        first = await attempt()
        if self.max_retries == 0 or not self.is_failure(first):
            return first
        replay = [first]

        async def again() -> T:
            return replay.pop() if replay else await attempt()

        return await AsyncRetrying(**self._settings())(again)
