# SPDX-License-Identifier: Apache-2.0
"""A time limit on a component's synchronous `run`."""

import concurrent.futures
from typing import Any


def run_with_timeout(instance: Any, kwargs: dict[str, Any], timeout: float | None, what: str) -> dict[str, Any]:
    """
    Call `instance.run(**kwargs)`, giving up after `timeout` seconds (`None`: a plain call). A thread cannot be
    killed: on timeout the call is abandoned and its result ignored.

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
