# SPDX-License-Identifier: Apache-2.0
"""
The evidence check's semantic feature: the cosine similarity between the question and its closest chunk's head
(`chunk_head`), with the packaged all-MiniLM-L6-v2. Chunk embeddings are cached by chunk id and text (bounded LRU).
"""

import re
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from haystack import Document

from haystack_agentic.evidence.features import chunk_title

#: Chunk embeddings kept per `QuestionChunkSimilarity` (each is 384 floats).
CACHE_SIZE = 4096

_SENTENCE_END_RE = re.compile(r"(?<=[.!?])\s+")


def chunk_head(doc: Document, max_chars: int = 300) -> str:
    """What is embedded of a chunk: `"<title>: <first sentence>"` (or the sentence alone), at most `max_chars`."""
    content = (doc.content or "").strip()
    title = chunk_title(content, doc.meta)
    first, newline, rest = content.partition("\n")
    body = rest.strip() if newline and first.strip() == title else content
    sentence = _SENTENCE_END_RE.split(body, maxsplit=1)[0] if body else ""
    head = f"{title}: {sentence}" if title and sentence else title or sentence
    return head[:max_chars]


class QuestionChunkSimilarity:
    """Cosine similarity of a question to its closest chunk's head (`chunk_chars` of it) with `model` (MiniLM)."""

    def __init__(self, model: str, chunk_chars: int = 300) -> None:
        self.model = model
        self.chunk_chars = chunk_chars
        self._embedder: Any = None
        self._cache: OrderedDict[tuple[str, int], Any] = OrderedDict()
        self._lock = threading.Lock()

    def warm_up(self) -> None:
        """Load the model (`RuntimeError` without the packaged model, `ImportError` without sentence-transformers)."""
        if self._embedder is not None:
            return
        from haystack_agentic.components.embedders.minilm_text_embedder import MiniLMTextEmbedder  # noqa: PLC0415

        embedder = MiniLMTextEmbedder(model=self.model)
        embedder.warm_up()
        self._embedder = embedder

    def best(self, question: str, chunks: Sequence[Document]) -> tuple[float, int | None]:
        """
        The chunk closest to the question: `(cosine similarity, its index)`, `(0.0, None)` without chunks with text.

        :raises RuntimeError: If the model is not loaded (`warm_up`).
        """
        if self._embedder is None:
            raise RuntimeError("QuestionChunkSimilarity needs warm_up() before use.")
        import numpy as np  # noqa: PLC0415 - comes with sentence-transformers

        indexed = [(i, chunk_head(doc, self.chunk_chars)) for i, doc in enumerate(chunks)]
        indexed = [(i, text) for i, text in indexed if text.strip()]
        if not indexed:
            return 0.0, None
        keys = [(chunks[i].id, hash(text)) for i, text in indexed]
        with self._lock:
            cached = {key: self._cache[key] for key in keys if key in self._cache}
        todo = [(key, text) for key, (_, text) in zip(keys, indexed, strict=True) if key not in cached]
        vectors = np.asarray(self._embedder.embed_texts([question] + [text for _, text in todo]), dtype="float32")
        query, fresh = vectors[0], vectors[1:]
        with self._lock:
            for (key, _), vector in zip(todo, fresh, strict=True):
                self._cache[key] = vector
                cached[key] = vector
            for key in keys:
                self._cache.move_to_end(key)
            while len(self._cache) > CACHE_SIZE:
                self._cache.popitem(last=False)
        matrix = np.stack([cached[key] for key in keys])
        sims = matrix @ query
        best = int(np.argmax(sims))
        return float(sims[best]), indexed[best][0]
