# SPDX-License-Identifier: Apache-2.0
"""
What the three comparison check modules share: the HotpotQA paragraphs behind every retriever, the question, a
recording Haystack tracer (spans with their parents), and the few helpers a check needs without pytest (`raises`,
`environment`).

The corpus is the shipped HotpotQA sample (`examples/data/hotpotqa_dev_sample.jsonl`, the same file as
`/work/shared/data/`): real Wikipedia paragraphs, retrieved with Haystack's in-memory BM25 in every system, so the
three differ only in their loop.
"""

import contextlib
import functools
import json
import os
import re
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from haystack import tracing
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.document_stores.in_memory import InMemoryDocumentStore
from haystack.tracing import Span, Tracer

from haystack_agentic.indexing.hotpotqa import hotpotqa_documents
from haystack_agentic.resources import sample_corpus_path

#: A bridge question of the sample (row 3): its two hops are the film's page, then the director's.
QUESTION = 'The director of the romantic comedy "Big Stone Gap" is based in what New York city?'
FOLLOW_UP = "And which university did she attend?"
GOLD = "Greenwich Village, New York City"
#: Words of the two gold paragraphs (`agent_checks.py::the_corpus_holds_both_hops`).
HOP1_WORDS = "Adriana Trigiani"
HOP2_WORDS = "Greenwich Village"
#: A claim no paragraph of the corpus supports.
UNSUPPORTED = "She was born on the Moon."


#: The aspects compared, in the README table's order (each check module's `CHECKS` pairs one with each check).
ASPECTS = (
    "Corpus",
    "Streaming",
    "History",
    "Tools",
    "Exit reasons",
    "Fallback at the cap",
    "Budget",
    "Grounding",
    "Tracing",
    "Breakpoints",
)


def hotpot_rows(limit: int = 40) -> list[dict[str, Any]]:
    """The first `limit` rows of the shipped HotpotQA sample."""
    with sample_corpus_path().open(encoding="utf-8") as lines:
        return [json.loads(line) for _, line in zip(range(limit), lines, strict=False)]


@functools.cache
def shared_store(limit: int = 40) -> InMemoryDocumentStore:
    """One store per process for the checks that only read it (`hotpot_store`)."""
    return hotpot_store(limit)


def hotpot_store(limit: int = 40) -> InMemoryDocumentStore:
    """A fresh in-memory store with the paragraphs (title in the content, so BM25 matches titles) of `limit` rows."""
    store = InMemoryDocumentStore(index=f"comparison-{uuid.uuid4().hex}")
    store.write_documents(hotpotqa_documents(hotpot_rows(limit), source="hotpotqa", title_in_content=True))
    return store


def bm25(store: InMemoryDocumentStore, top_k: int = 3) -> InMemoryBM25Retriever:
    """Haystack's BM25 retriever over `store`."""
    return InMemoryBM25Retriever(store, top_k=top_k)


class RecordingSpan(Span):
    """A span that keeps its name, tags, content tags and parent."""

    def __init__(self, name: str, tags: dict[str, Any] | None, parent: "RecordingSpan | None") -> None:
        self.name = name
        self.tags = dict(tags or {})
        self.parent = parent

    def set_tag(self, key: str, value: Any) -> None:
        self.tags[key] = value

    def set_content_tag(self, key: str, value: Any) -> None:
        self.tags[key] = value  # recorded whatever the content-tracing switch says

    def path(self) -> list[str]:
        """Span names from the root down to this span."""
        names, span = [], self
        while span is not None:
            names.append(span.name)
            span = span.parent
        return names[::-1]


class RecordingTracer(Tracer):
    """A Haystack tracer recording every span; a span's parent is the `parent_span` given, else the current one."""

    def __init__(self) -> None:
        self.spans: list[RecordingSpan] = []
        self.stack: list[RecordingSpan] = []

    @contextlib.contextmanager
    def trace(
        self, operation_name: str, tags: dict[str, Any] | None = None, parent_span: Span | None = None
    ) -> Iterator[Span]:
        parent = parent_span if isinstance(parent_span, RecordingSpan) else self.current_span()
        span = RecordingSpan(operation_name, tags, parent)
        self.spans.append(span)
        self.stack.append(span)
        try:
            yield span
        finally:
            self.stack.remove(span)

    def current_span(self) -> RecordingSpan | None:
        return self.stack[-1] if self.stack else None

    def names(self) -> list[str]:
        return [span.name for span in self.spans]


@contextlib.contextmanager
def recording_tracer() -> Iterator[RecordingTracer]:
    """Haystack tracing on, into a `RecordingTracer`, for the block; off after it."""
    recording = RecordingTracer()
    tracing.enable_tracing(recording)
    try:
        yield recording
    finally:
        tracing.disable_tracing()


class Raised:
    """What `raises` caught: `value` is the exception."""

    value: BaseException


@contextlib.contextmanager
def raises(kind: type[BaseException], match: str | None = None) -> Iterator[Raised]:
    """
    The block must raise `kind` (whose message matches `match`, a regex), else `AssertionError`.

    :returns: A `Raised` whose `value` is the exception, once the block has run.
    """
    caught = Raised()
    try:
        yield caught
    except kind as exc:
        if match is not None and not re.search(match, str(exc)):
            msg = f"{type(exc).__name__} raised, but {str(exc)!r} does not match {match!r}"
            raise AssertionError(msg) from exc
        caught.value = exc
        return
    msg = f"{kind.__name__} was not raised"
    raise AssertionError(msg)


@contextlib.contextmanager
def environment(name: str, value: str | None) -> Iterator[None]:
    """The environment variable `name` set to `value` (`None`: unset) for the block, restored after it."""
    before = os.environ.get(name)
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before


Check = tuple[str, Callable[[], None]]
