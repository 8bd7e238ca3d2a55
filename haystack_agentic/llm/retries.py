# SPDX-License-Identifier: Apache-2.0
"""
Which chat generator failures are worth retrying, and the default retry settings of every LLM role.
"""

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

