# SPDX-License-Identifier: Apache-2.0
"""
A time limit on a component's synchronous `run`.
"""

import concurrent.futures
from typing import Any


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

