# SPDX-License-Identifier: Apache-2.0
"""
A time limit on a component's `run`, and what stays of a call the limit gave up on.

A thread cannot be stopped: a synchronous `run` that overruns its limit goes on in its worker thread after the
caller has been told `TimeoutError` (`abandoned`). Retrying it would start a second call beside the first (against
a local llama.cpp server with one slot, the calls pile up), so the retry layer does not retry a call while its
abandoned attempt still runs (`still_running`). An async `run_async` that overruns is cancelled (its client closes
the connection): nothing is left running, and its `TimeoutError` is retried like any transient failure.
"""

import asyncio
import concurrent.futures
import contextvars
from typing import Any

#: The attribute of a `TimeoutError` of an abandoned call that holds the call's future (done once the call ends).
#: The error stays a plain `TimeoutError`, so what the user reads ("TimeoutError: ...") does not change.
ABANDONED_CALL = "abandoned_call"


def abandoned(message: str, call: concurrent.futures.Future[Any]) -> TimeoutError:
    """A `TimeoutError` for a call that overran its time limit and goes on in its worker thread (`call`)."""
    error = TimeoutError(message)
    setattr(error, ABANDONED_CALL, call)
    return error


def still_running(exc: BaseException) -> bool:
    """Whether `exc` is the `TimeoutError` of an abandoned call that has not ended yet (a retry would run beside it)."""
    call = getattr(exc, ABANDONED_CALL, None)
    return isinstance(call, concurrent.futures.Future) and not call.done()


def _in_thread(instance: Any, kwargs: dict[str, Any]) -> concurrent.futures.Future[Any]:
    """`instance.run(**kwargs)` started in a worker thread of its own, in a copy of the caller's context."""
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    try:
        context = contextvars.copy_context()
        return pool.submit(lambda: context.run(instance.run, **kwargs))
    finally:
        pool.shutdown(wait=False)


def run_with_timeout(instance: Any, kwargs: dict[str, Any], timeout: float | None, what: str) -> dict[str, Any]:
    """
    `instance.run(**kwargs)`, given up after `timeout` s (`None`: no limit).

    :raises TimeoutError: naming `what`, when the limit runs out; the call goes on in its thread (`abandoned`).
    """
    if timeout is None:
        return instance.run(**kwargs)
    call = _in_thread(instance, kwargs)
    try:
        return call.result(timeout=timeout)
    except concurrent.futures.TimeoutError as exc:
        msg = f"{what} did not answer within {timeout} s"
        raise abandoned(msg, call) from exc


async def run_async_with_timeout(
    instance: Any, kwargs: dict[str, Any], timeout: float | None, what: str
) -> dict[str, Any]:
    """
    `await instance.run_async(**kwargs)` (cancelled after `timeout` s), or `instance.run` in a worker thread.

    :raises TimeoutError: naming `what`, when `run_async` overran its limit and was cancelled.
    :raises TimeoutError: naming `what`, when `run` (no `run_async`) overran its limit: it goes on in its thread
        (`abandoned`).
    """
    run_async = getattr(instance, "run_async", None)
    if callable(run_async):
        try:
            return await asyncio.wait_for(run_async(**kwargs), timeout)
        except TimeoutError as exc:
            if timeout is None:
                raise
            msg = f"{what} did not answer within {timeout} s"
            raise TimeoutError(msg) from exc
    call = _in_thread(instance, kwargs)
    try:
        return await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(call)), timeout)
    except TimeoutError as exc:
        if timeout is None or call.done():
            raise
        msg = f"{what} did not answer within {timeout} s"
        raise abandoned(msg, call) from exc
