# SPDX-License-Identifier: Apache-2.0
"""A time limit on a component's synchronous `run`."""

import concurrent.futures
from typing import Any


def run_with_timeout(instance: Any, kwargs: dict[str, Any], timeout: float | None, what: str) -> dict[str, Any]:
    """`instance.run(**kwargs)`, abandoned after `timeout` s (`None`: no limit) with a `TimeoutError` naming `what`."""
    if timeout is None:
        return instance.run(**kwargs)
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    try:
        return pool.submit(instance.run, **kwargs).result(timeout=timeout)
    except concurrent.futures.TimeoutError as exc:
        msg = f"{what} did not answer within {timeout} s"
        raise TimeoutError(msg) from exc
    finally:
        pool.shutdown(wait=False)
