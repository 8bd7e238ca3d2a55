# SPDX-License-Identifier: Apache-2.0
"""
`SparseBM25DocumentStore`: Haystack's in-memory BM25 with its scores in a sparse matrix.

`SparseBM25DocumentStore`: Haystack's in-memory BM25 with its per-term scores in a sparse matrix (documents x
vocabulary, compressed by column in numpy arrays, `SparseBM25Index`), built once, so a query sums a few columns; term
for term Haystack's float64 arithmetic, so scores and ties are equal.
"""

import contextlib
import copy
import functools
import inspect
import json
import math
import re
import threading
import unicodedata
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from itertools import chain
from pathlib import Path
from typing import Any

import numpy as np
from haystack import Document, logging
from haystack.core.serialization import generate_qualified_class_name
from haystack.document_stores.errors import DocumentStoreError
from haystack.document_stores.in_memory import InMemoryDocumentStore
from haystack.document_stores.in_memory.document_store import BM25_SCALING_FACTOR
from haystack.document_stores.types import DuplicatePolicy
from haystack.utils import expit
from haystack.utils.filters import document_matches_filter

logger = logging.getLogger(__name__)

#: A string Haystack may compare as a date (its `_looks_like_iso_date`): a YYYY-MM-DD prefix.
_DATE = re.compile(r"\d{4}-\d\d-\d\d(?:\Z|[Tt ])", re.ASCII)

#: Haystack's default BM25 parameters per algorithm (`InMemoryDocumentStore._score_*`).
_DEFAULTS = {
    "BM25L": {"k1": 1.5, "b": 0.75, "delta": 0.5},
    "BM25Plus": {"k1": 1.5, "b": 0.75, "delta": 1.0},
    "BM25Okapi": {"k1": 1.5, "b": 0.75, "epsilon": 0.25},
}


#: Position of `async_executor` among `InMemoryDocumentStore.__init__`'s positional arguments.
_EXECUTOR_ARG = 6


class SparseBM25Index:
    """
    Per-term BM25 scores of fixed documents as a sparse matrix, and top-k selection.

    Per-term BM25 scores of fixed documents as a compressed sparse column matrix (`indptr`, `indices`, `data`: the
    rows and scores of column `c` are `indices[indptr[c]:indptr[c + 1]]`, rows in Haystack's tie order, ascending),
    and top-k selection.
    """

    def __init__(self, tokens: Mapping[str, list[str]], algorithm: str, parameters: Mapping[str, float]) -> None:
        """Document id -> its BM25 tokens (some non-empty), Haystack's algorithm and its `bm25_parameters`."""
        self.doc_ids = list(tokens)
        term_frequencies = [Counter(doc_tokens) for doc_tokens in tokens.values()]
        doc_lengths = [len(doc_tokens) for doc_tokens in tokens.values()]
        self.value_index: dict[str, dict[Any, list[int]]] = {}  # field -> value -> rows (`SparseBM25DocumentStore`)
        params = {**_DEFAULTS[algorithm], **parameters}
        document_frequencies: Counter = Counter()
        for tf in term_frequencies:
            document_frequencies.update(tf.keys())
        self.vocabulary = {token: column for column, token in enumerate(document_frequencies)}
        self.idf = self._idf(document_frequencies, len(self.doc_ids), algorithm, params)
        counts = np.fromiter((len(tf) for tf in term_frequencies), dtype=np.int64, count=len(self.doc_ids))
        total = int(counts.sum())
        lookup = self.vocabulary.__getitem__
        cols = np.fromiter(chain.from_iterable(map(lookup, tf) for tf in term_frequencies), np.int32, total)
        freq = np.fromiter(chain.from_iterable(tf.values() for tf in term_frequencies), np.float64, total)
        length = np.repeat(np.asarray(doc_lengths, dtype=np.float64), counts)
        average = sum(doc_lengths) / len(doc_lengths)
        values = self._term_scores(freq, length, average, self.idf[cols], algorithm, params)
        # Built row by row, then ordered by column (a stable sort keeps each column's rows ascending): a query reads
        # whole columns.
        rows = np.repeat(np.arange(len(self.doc_ids), dtype=np.int32), counts)
        order = _column_order(cols)
        self.indices, self.data = rows[order], values[order]
        self.indptr = np.zeros(len(self.vocabulary) + 1, dtype=np.int64)
        np.cumsum(np.bincount(cols, minlength=len(self.vocabulary)), out=self.indptr[1:])

    @staticmethod
    def _idf(frequencies: Mapping[str, int], n_docs: int, algorithm: str, params: Mapping[str, float]) -> np.ndarray:
        # math.log, in Haystack's expression order, so the values are bit-identical to the store's.
        if algorithm == "BM25L":
            values = [math.log((n_docs + 1.0) / (n + 0.5)) for n in frequencies.values()]
        elif algorithm == "BM25Plus":
            values = [math.log(1 + (n_docs - n + 0.5) / (n + 0.5)) for n in frequencies.values()]
        else:  # BM25Okapi: negative idfs are replaced by epsilon times the average idf
            values = [math.log((n_docs - n + 0.5) / (n + 0.5)) for n in frequencies.values()]
            eps = params["epsilon"] * sum(values) / len(values) if values else 0.0
            values = [eps if v < 0 else v for v in values]
        return np.asarray(values, dtype=np.float64)

    @staticmethod
    def _term_scores(
        freq: np.ndarray, length: np.ndarray, avg: float, idf: np.ndarray, algorithm: str, params: Mapping[str, float]
    ) -> np.ndarray:
        k, b = params["k1"], params["b"]
        if algorithm == "BM25L":
            delta = params["delta"]
            ctd = freq / (1 - b + b * length / avg)
            return idf * ((1.0 + k) * (ctd + delta) / (k + ctd + delta))
        if algorithm == "BM25Plus":
            delta = params["delta"]
            damp = k * (1 - b + b * length / avg)
            return idf * (freq * (1.0 + k) / (freq + damp) + delta)
        norm = freq + k * (1 - b + b * length / avg)
        return idf * (freq * (1.0 + k) / norm)

    def scores(self, tokens: Sequence[str]) -> np.ndarray:
        """The BM25 score (float64) of every row for a tokenised query; each distinct token counts once."""
        total = np.zeros(len(self.doc_ids), dtype=np.float64)
        for token in dict.fromkeys(tokens):
            column = self.vocabulary.get(token)
            if column is None:
                continue
            start, end = self.indptr[column], self.indptr[column + 1]
            total[self.indices[start:end]] += self.data[start:end]
        return total

    @staticmethod
    def ranked(scores: np.ndarray, candidates: np.ndarray | None, limit: int, positive_only: bool) -> np.ndarray:
        """
        Row numbers of the best `limit` `candidates` (`None`: all rows), best first, ties in row order.

        :param positive_only: Leave out scores <= 0 (BM25L and BM25Plus score 0 exactly when no term matches).
        """
        rows = np.arange(len(scores)) if candidates is None else np.asarray(candidates, dtype=np.int64)
        values = scores[rows]
        if positive_only:
            keep = values > 0.0
            rows, values = rows[keep], values[keep]
        if limit <= 0 or len(rows) == 0:
            return rows[:0]
        if len(rows) > limit:
            # Everything scoring at least the limit-th best score, ties at the boundary included, then order.
            threshold = np.partition(values, len(values) - limit)[len(values) - limit]
            keep = values >= threshold
            rows, values = rows[keep], values[keep]
        order = np.lexsort((rows, -values))
        return rows[order][:limit]


def _column_order(cols: np.ndarray) -> np.ndarray:
    """
    The stable sort order of non-negative int32 column numbers, by radix.

    The stable order of non-negative int32 column numbers: two 16-bit radix passes (numpy sorts 16-bit keys by
    radix, in linear time; a stable sort of the int32 keys takes several times as long).
    """
    low = np.argsort((cols & 0xFFFF).astype(np.uint16), kind="stable")
    return low[np.argsort((cols[low] >> 16).astype(np.uint16), kind="stable")]


def equality_preselection(filters: Mapping[str, Any] | None) -> tuple[str, Any] | None:
    """
    Find a `meta.<field> == <value>` condition that `filters` implies, as `(field, value)`, or `None`.

    A `meta.<field> == <value>` condition every document matching `filters` must satisfy, as `(field, value)`, or
    `None`. Only values Haystack compares with `==` qualify: numbers, booleans, strings that are not ISO dates.
    """
    if not filters:
        return None
    if filters.get("operator") == "AND" and isinstance(filters.get("conditions"), list):
        for condition in filters["conditions"]:
            found = equality_preselection(condition)
            if found is not None:
                return found
        return None
    field, value = filters.get("field"), filters.get("value")
    if filters.get("operator") != "==" or not isinstance(field, str) or not field.startswith("meta."):
        return None
    name = field[len("meta.") :]
    if not name or "." in name or not isinstance(value, (str, int, float, bool)):
        return None
    if isinstance(value, str) and _DATE.match(value):
        return None
    return name, value


# Built matrices (with the fingerprint they were built from) and change counters of shared stores, by `index`;
# stores with `shared=False` keep dicts of their own (`_caches`).
_BUILT: dict[str, tuple[tuple, SparseBM25Index | None]] = {}
_VERSIONS: dict[str, int] = {}
_LOCK = threading.Lock()


def _rebuilding(method: Callable[..., Any]) -> Callable[..., Any]:
    """`InMemoryDocumentStore.<method>`, after which the BM25 matrix is rebuilt on next use."""

    @functools.wraps(method)
    def changing(self: "SparseBM25DocumentStore", *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        finally:
            self._changed()

    return changing


class SparseBM25DocumentStore(InMemoryDocumentStore):
    """
    Haystack's `InMemoryDocumentStore` with faster BM25 retrieval over a sparse matrix.

    Haystack's `InMemoryDocumentStore` with BM25 retrieval over a sparse matrix (built on the first query after a
    change): the same scores, ranking, ties and filters, much faster. Writes through a plain store sharing the `index`
    are seen when they change the document count.

    ### Usage example
    ```python
    from haystack import Document
    from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
    from haystack_agentic.document_stores.sparse_bm25_document_store import SparseBM25DocumentStore

    store = SparseBM25DocumentStore()
    store.write_documents([Document(content="Adriana Trigiani lives in Greenwich Village.", meta={"title": "AT"})])
    print(InMemoryBM25Retriever(store).run(query="Trigiani")["documents"][0].meta["title"])  # "AT"
    ```
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        """`InMemoryDocumentStore`'s arguments; whether the store made its async executor is kept for `__del__`."""
        super().__init__(*args, **kwargs)
        given = kwargs.get("async_executor", args[_EXECUTOR_ARG] if len(args) > _EXECUTOR_ARG else None)
        self._made_executor = given is None

    # The parent's parameters and defaults, for whoever reads them (the packaged YAMLs list only what differs).
    __init__.__signature__ = inspect.signature(InMemoryDocumentStore.__init__)  # type: ignore[attr-defined]

    def __del__(self) -> None:
        """
        Stop the store's own async executor without waiting for its threads.

        The threads end once idle. Haystack's store waits for them, and when the garbage collector runs that while a new
        thread is starting (CPython holds its thread-shutdown lock there) the process deadlocks: a dropped store that
        served an async search hung a `run_async` for good (issue 39).
        """
        if getattr(self, "_made_executor", False) and hasattr(self, "executor"):
            self.executor.shutdown(wait=False)

    def save_to_disk(self, path: str) -> None:
        """Write the store as `InMemoryDocumentStore.save_to_disk` does (its `type` too: either class loads it)."""
        data: dict[str, Any] = {
            **self.to_dict(),
            "type": generate_qualified_class_name(InMemoryDocumentStore),
            "documents": [doc.to_dict(flatten=False) for doc in self.storage.values()],
        }
        with open(path, "w", encoding="utf-8") as f:
            json.dump(data, f)

    @classmethod
    def load_from_disk(cls, path: str) -> "SparseBM25DocumentStore":
        """
        Load a store saved by this class or `InMemoryDocumentStore`.

        :raises FileNotFoundError: If the file does not exist. :raises DocumentStoreError: If it cannot be read.
        """
        if not Path(path).exists():
            msg = f"File {path} not found."
            raise FileNotFoundError(msg)
        try:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
            store = cls(**data.get("init_parameters", {}))
            documents = [Document.from_dict(doc) for doc in data["documents"]]
        except Exception as exc:
            msg = f"Error loading {cls.__name__} from disk. error: {exc}"
            raise DocumentStoreError(msg) from exc
        store.write_documents(documents, policy=DuplicatePolicy.OVERWRITE)
        return store

    @functools.cached_property
    def shared(self) -> bool:
        """Whether the store shares its documents with other stores of the same `index` (read from `to_dict`)."""
        return bool(self.to_dict()["init_parameters"].get("shared", True))

    def _caches(self) -> tuple[dict[str, Any], dict[str, int]]:
        """The built matrices and change counters, by `index`: shared, or this store's own."""
        if self.shared:
            return _BUILT, _VERSIONS
        return self.__dict__.setdefault("_local_built", {}), self.__dict__.setdefault("_local_versions", {})

    def _changed(self) -> None:
        versions = self._caches()[1]
        with _LOCK:
            versions[self.index] = versions.get(self.index, 0) + 1

    def _tokens(self, text: str) -> list[str]:
        """BM25 tokens of a text, as Haystack makes them."""
        return self.tokenizer(unicodedata.normalize("NFC", text.lower()))

    write_documents = _rebuilding(InMemoryDocumentStore.write_documents)
    delete_documents = _rebuilding(InMemoryDocumentStore.delete_documents)
    delete_all_documents = _rebuilding(InMemoryDocumentStore.delete_all_documents)
    update_by_filter = _rebuilding(InMemoryDocumentStore.update_by_filter)

    def _bm25_index(self) -> SparseBM25Index | None:
        """The matrix of the current documents, built on first use after a change; `None` when no chunk has a token."""
        storage = self.storage
        built_by_index, versions = self._caches()
        fingerprint = (
            versions.get(self.index, 0),
            len(storage),
            self.bm25_algorithm,
            tuple(sorted(self.bm25_parameters.items())),
        )
        with _LOCK:
            built = built_by_index.get(self.index)
            if built is not None and built[0] == fingerprint:
                return built[1]
            # BM25 only searches chunks with content; only they count
            tokens = {doc_id: self._tokens(doc.content) for doc_id, doc in storage.items() if doc.content is not None}
            index = None
            if any(tokens.values()):
                index = SparseBM25Index(tokens, self.bm25_algorithm, self.bm25_parameters)
            built_by_index[self.index] = (fingerprint, index)
            logger.debug("Built the sparse BM25 matrix of {count} documents", count=len(tokens))
            return index

    def bm25_retrieval(
        self, query: str, filters: dict[str, Any] | None = None, top_k: int = 10, scale_score: bool = False
    ) -> list[Document]:
        """
        `InMemoryDocumentStore.bm25_retrieval`: copies of the `top_k` best documents matching `filters`, `score` set.

        :raises ValueError: On an empty query or filters without an `operator`.
        """
        if not query:
            msg = "Query should be a non-empty string"
            raise ValueError(msg)
        if filters and "operator" not in filters:
            msg = "Invalid filter syntax. See https://docs.haystack.deepset.ai/docs/metadata-filtering for details."
            raise ValueError(msg)
        index = self._bm25_index()
        if index is None:
            # No tokens at all: Haystack's own path handles this edge (every candidate scores 0).
            return super().bm25_retrieval(query=query, filters=filters, top_k=top_k, scale_score=scale_score)
        scores = index.scores(self._tokens(query))
        positive_only = self.bm25_algorithm != "BM25Okapi"
        if filters:
            rows = self._filtered_rows(index, scores, filters, top_k, positive_only)
        else:
            rows = index.ranked(scores, None, top_k, positive_only)
        results = []
        for row in rows:
            doc = self.storage[index.doc_ids[row]]
            score = expit(scores[row] / BM25_SCALING_FACTOR) if scale_score else float(scores[row])
            changes: dict[str, Any] = {"score": score, "meta": copy.deepcopy(doc.meta)}
            if not self.return_embedding:
                changes["embedding"] = None
            results.append(replace(doc, **changes))
        return results

    def _filtered_rows(
        self, index: SparseBM25Index, scores: np.ndarray, filters: dict[str, Any], top_k: int, positive_only: bool
    ) -> list[int]:
        storage = self.storage

        def matches(row: int) -> bool:
            return document_matches_filter(
                filters=filters,
                document=storage[index.doc_ids[row]],
                strict_datetime_comparison=self.strict_datetime_comparison,
            )

        preselect = equality_preselection(filters)
        if preselect is not None:
            candidates = self._value_rows(index, *preselect)
            ranked = index.ranked(scores, candidates, len(candidates), positive_only)
            return [int(row) for row in ranked if matches(int(row))][:top_k]
        # Check candidates best first, widening the window until top_k match or none are left.
        found: list[int] = []
        checked = 0
        window = max(4 * top_k, 64)
        while True:
            ranked = index.ranked(scores, None, window, positive_only)
            for row in ranked[checked:]:
                if matches(int(row)):
                    found.append(int(row))
                    if len(found) == top_k:
                        return found
            if len(ranked) < window:
                return found
            checked = len(ranked)
            window *= 8

    def _value_rows(self, index: SparseBM25Index, field: str, value: Any) -> np.ndarray:
        """Rows whose `meta[field] == value` (a value index per field, kept with the matrix)."""
        by_value = index.value_index.get(field)
        if by_value is None:
            by_value = index.value_index[field] = {}
            for row, doc_id in enumerate(index.doc_ids):
                with contextlib.suppress(TypeError):  # unhashable (a list or dict): never == a plain value
                    by_value.setdefault(self.storage[doc_id].meta.get(field), []).append(row)
        return np.asarray(by_value.get(value, ()), dtype=np.int64)
