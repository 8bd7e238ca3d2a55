# SPDX-License-Identifier: Apache-2.0
"""50 concurrent runs with different scripted LLMs: each result matches its own script."""

import asyncio

from conftest import answer, give_up, search


def _script(i: int) -> list[dict]:
    searches = [search(f"run {i} query {k}") for k in range(i % 4)]
    ending = give_up(f"reason {i}") if i % 7 == 0 else answer(f"answer {i}")
    return [*searches, ending]


def test_fifty_concurrent_runs_keep_their_own_results(build_loop):
    loops = [build_loop(_script(i), latency=0.02) for i in range(50)]

    async def run_all():
        return await asyncio.gather(*(loop.run_async(query=f"question {i}") for i, loop in enumerate(loops)))

    results = asyncio.run(run_all())
    for i, result in enumerate(results):
        searches = [s for s in result["tool_history"] if s["action"] == "search"]
        assert [s["query"] for s in searches] == [f"run {i} query {k}" for k in range(i % 4)]
        if i % 7 == 0:
            assert result["terminated_by"] == "gave_up" and f"reason {i}" in result["answer"]
        else:
            assert (result["terminated_by"], result["answer"]) == ("answered", f"answer {i}")
        assert result["iterations"] == i % 4 + 1
        assert result["usage"]["controller"]["calls"] == i % 4 + 1
