# SPDX-License-Identifier: Apache-2.0
"""
The one retry policy of every LLM role, on the sync and async paths alike: which failures are transient, how
often and how long to wait, built on `tenacity` (a Haystack dependency).

A call's attempts never raise into the policy: each returns an outcome (replies or the exception) that the caller
has already counted in `usage`, and the policy decides from that outcome whether to try again. So every attempt is
accounted for, and the last outcome is returned when the retries run out.
"""

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from haystack import logging
from tenacity import AsyncRetrying, RetryCallState, Retrying, retry_if_result, stop_after_attempt, wait_exponential

logger = logging.getLogger(__name__)

T = TypeVar("T")

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



def generator_retries_itself(generator: Any) -> bool:
    """
    Whether a chat generator retries failed requests on its own, so the loop's retries would multiply its attempts.

    A generator that has a `max_retries` attribute other than 0 does (Haystack's `OpenAIChatGenerator`: `None`
    means the client's default of 5 retries).

    :param generator: The chat generator.
    :returns: `True` when it retries itself.
    """
    return hasattr(generator, "max_retries") and getattr(generator, "max_retries") != 0


@dataclass(frozen=True)
class RetryPolicy:
    """
    Retry transient failures with exponential backoff: `backoff`, `2 * backoff`, ... seconds between attempts.

    :param max_retries: Retries after the first attempt (>= 0).
    :param backoff: Seconds before the first retry (>= 0); doubles each retry.
    :param is_failure: Tells from an attempt's outcome whether it failed transiently (and so is worth another go).
    :param describe: Names the outcome's failure in the log line before a retry.
    """

    max_retries: int
    backoff: float
    is_failure: Callable[[Any], bool]
    describe: Callable[[Any], str] = repr

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError(f"max_retries must be 0 or more, got {self.max_retries}")
        if self.backoff < 0:
            raise ValueError(f"backoff must be 0 or more seconds, got {self.backoff}")

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
        """
        Run `attempt` until its outcome is not a transient failure or the retries are used up.

        The first attempt runs directly (most calls succeed at once: tenacity's machinery, ~0.1 ms a call, is only
        set up for a failure worth retrying), and the retries then run under tenacity as if it had made that first
        attempt itself (same waits, log lines and attempt count).

        :param attempt: One attempt; it must return its outcome, not raise (an exception it raises propagates).
        :returns: The last attempt's outcome.
        """
        first = attempt()
        if self.max_retries == 0 or not self.is_failure(first):
            return first
        replayed = False

        def again() -> T:
            nonlocal replayed
            if not replayed:  # tenacity's first attempt: the one already made
                replayed = True
                return first
            return attempt()

        return Retrying(**self._settings())(again)

    async def run_async(self, attempt: Callable[[], Awaitable[T]]) -> T:
        """
        Async twin of `run`: awaits each attempt and sleeps with `asyncio.sleep`.

        :param attempt: One attempt (a coroutine function returning its outcome).
        :returns: The last attempt's outcome.
        """
        first = await attempt()
        if self.max_retries == 0 or not self.is_failure(first):
            return first
        replayed = False

        async def again() -> T:
            nonlocal replayed
            if not replayed:  # tenacity's first attempt: the one already made
                replayed = True
                return first
            return await attempt()

        return await AsyncRetrying(**self._settings())(again)
