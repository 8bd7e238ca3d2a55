# SPDX-License-Identifier: Apache-2.0
"""Haystack's in-memory BM25 scores as a `scipy.sparse` matrix of per-term scores (documents x vocabulary), built
once, so a query sums a few columns; term for term Haystack's float64 arithmetic, so scores and ties are equal."""

import math
import re
from collections.abc import Mapping, Sequence
from itertools import chain
from typing import Any

import numpy as np
from scipy import sparse

#: A string Haystack may compare as a date (its `_looks_like_iso_date`): a YYYY-MM-DD prefix.
_DATE = re.compile(r"\d{4}-\d\d-\d\d(?:\Z|[Tt ])", re.ASCII)

#: Haystack's default BM25 parameters per algorithm (`InMemoryDocumentStore._score_*`).
_DEFAULTS = {
    "BM25L": {"k1": 1.5, "b": 0.75, "delta": 0.5},
    "BM25Plus": {"k1": 1.5, "b": 0.75, "delta": 1.0},
    "BM25Okapi": {"k1": 1.5, "b": 0.75, "epsilon": 0.25},
}


class SparseBM25Index:
    """Per-term BM25 scores of fixed documents as a CSC matrix (rows in Haystack's tie order), and top-k selection."""

    def __init__(
        self,
        doc_ids: Sequence[str],
        term_frequencies: Sequence[Mapping[str, int]],
        doc_lengths: Sequence[int],
        document_frequencies: Mapping[str, int],
        average_length: float,
        algorithm: str = "BM25L",
        parameters: Mapping[str, float] | None = None,
    ) -> None:
        """
        :param term_frequencies: Per document, token -> count; `doc_lengths`: per document, its number of tokens.
        :param document_frequencies: Token -> number of documents holding it.
        :param algorithm: `BM25L`, `BM25Plus` or `BM25Okapi`, with Haystack's `bm25_parameters` (defaults as its).
        :raises ValueError: On an unknown algorithm or an average length of 0.
        """
        if algorithm not in _DEFAULTS:
            raise ValueError(f"BM25 algorithm '{algorithm}' is not supported.")
        if average_length <= 0:
            raise ValueError("SparseBM25Index needs documents with tokens (average length > 0).")
        self.doc_ids = list(doc_ids)
        self.algorithm = algorithm
        self.value_index: dict[str, dict[Any, list[int]]] = {}  # field -> value -> rows (`SparseBM25DocumentStore`)
        params = {**_DEFAULTS[algorithm], **(parameters or {})}
        self.vocabulary = {token: column for column, token in enumerate(document_frequencies)}
        self.idf = self._idf(document_frequencies, len(self.doc_ids), algorithm, params)

        counts = np.fromiter((len(tf) for tf in term_frequencies), dtype=np.int64, count=len(self.doc_ids))
        total = int(counts.sum())
        lookup = self.vocabulary.__getitem__
        cols = np.fromiter(chain.from_iterable(map(lookup, tf) for tf in term_frequencies), np.int32, total)
        freq = np.fromiter(chain.from_iterable(tf.values() for tf in term_frequencies), np.float64, total)
        length = np.repeat(np.asarray(doc_lengths, dtype=np.float64), counts)
        values = self._term_scores(freq, length, float(average_length), self.idf[cols], algorithm, params)
        indptr = np.zeros(len(self.doc_ids) + 1, dtype=np.int64)
        np.cumsum(counts, out=indptr[1:])
        shape = (len(self.doc_ids), len(self.vocabulary))
        # Built row by row (CSR, no sort needed), then turned into columns: a query reads whole columns.
        self.matrix = sparse.csr_matrix((values, cols, indptr), shape=shape).tocsc()
        self.matrix.sort_indices()

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

    def __len__(self) -> int:
        return len(self.doc_ids)

    def scores(self, tokens: Sequence[str]) -> np.ndarray:
        """The BM25 score (float64) of every row for a tokenised query; each distinct token counts once."""
        total = np.zeros(len(self.doc_ids), dtype=np.float64)
        matrix = self.matrix
        for token in dict.fromkeys(tokens):
            column = self.vocabulary.get(token)
            if column is None:
                continue
            start, end = matrix.indptr[column], matrix.indptr[column + 1]
            total[matrix.indices[start:end]] += matrix.data[start:end]
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


def equality_preselection(filters: Mapping[str, Any] | None) -> tuple[str, Any] | None:
    """
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
