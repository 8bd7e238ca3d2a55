# SPDX-License-Identifier: Apache-2.0
import asyncio

from conftest import QUESTION, answer, search

from haystack_agentic.pipelines.progress import ProgressEvent, iter_progress, run_with_progress


def test_callback_gets_each_step_in_order_then_the_result(build_loop):
    loop = build_loop([search("Adriana Trigiani"), search("Greenwich Village"), answer("Greenwich Village")])
    events: list[ProgressEvent] = []
    result = run_with_progress(loop.pipeline, {"controller": {"query": QUESTION}}, events.append)
    assert [e.kind for e in events] == ["step", "step", "step", "result"]
    assert [(e.step.iteration, e.step.action, e.step.query) for e in events[:3]] == [
        (1, "search", "Adriana Trigiani"),
        (2, "search", "Greenwich Village"),
        (3, "answer", None),
    ]
    assert events[-1].result == result
    assert result == loop.run()  # the same result as a plain run


def test_steps_arrive_before_the_run_ends(build_loop):
    loop = build_loop([search("Adriana Trigiani"), answer("x")], latency=0.2)

    async def collect():
        seen = []
        async for event in iter_progress(loop.pipeline, {"controller": {"query": QUESTION}}):
            seen.append((event.kind, asyncio.get_running_loop().time()))
        return seen

    seen = asyncio.run(collect())
    first_step, result = seen[0][1], seen[-1][1]
    assert result - first_step >= 0.15  # the search step was reported a whole LLM call before the end
