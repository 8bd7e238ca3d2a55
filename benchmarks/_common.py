# SPDX-License-Identifier: Apache-2.0
"""Shared set-up of the benchmarks: a realistic in-memory corpus and timers around LLM and retriever calls."""

import functools
import inspect
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]  # this checkout's package and `benchmarks.harness`; the test doubles

from haystack.document_stores.in_memory import InMemoryDocumentStore  # noqa: E402

from haystack_agentic.indexing.hotpotqa import hotpotqa_documents, load_hotpotqa_questions  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "examples" / "data" / "hotpotqa_dev_sample.jsonl"


def corpus_store(questions: int = 50) -> tuple[InMemoryDocumentStore, list[str], list[dict]]:
    """
    An in-memory store with the paragraphs of the first `questions` HotpotQA sample questions.

    :returns: `(store, titles, rows)`; titles are usable as distinct search queries.
    """
    rows = load_hotpotqa_questions(DATA)[:questions]
    documents = hotpotqa_documents(rows, title_in_content=True)
    store = InMemoryDocumentStore(index=f"bench-{questions}")
    store.write_documents(documents)
    return store, [d.meta["title"] for d in documents], rows


class Timer:
    """Accumulates the wall time spent inside wrapped callables (sync and async)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.cpu_seconds = 0.0
        self.calls = 0

    def reset(self) -> None:
        self.seconds, self.cpu_seconds, self.calls = 0.0, 0.0, 0

    def wrap(self, obj, name: str) -> None:
        """Replace `obj.<name>` (an instance attribute shadows the class method) by a timed version."""
        original = getattr(obj, name)
        if inspect.iscoroutinefunction(original):

            @functools.wraps(original)
            async def timed_async(*args, **kwargs):
                start, cpu = time.perf_counter(), time.process_time()
                try:
                    return await original(*args, **kwargs)
                finally:
                    self.seconds += time.perf_counter() - start
                    self.cpu_seconds += time.process_time() - cpu
                    self.calls += 1

            setattr(obj, name, timed_async)
        else:

            @functools.wraps(original)
            def timed(*args, **kwargs):
                start, cpu = time.perf_counter(), time.process_time()
                try:
                    return original(*args, **kwargs)
                finally:
                    self.seconds += time.perf_counter() - start
                    self.cpu_seconds += time.process_time() - cpu
                    self.calls += 1

            setattr(obj, name, timed)
