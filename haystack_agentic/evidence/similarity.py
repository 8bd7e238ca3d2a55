# SPDX-License-Identifier: Apache-2.0
"""
The evidence check's semantic feature: question-to-chunk cosine similarity with MiniLM.

The evidence check's semantic feature: the cosine similarity between the question and its closest chunk's head
(`chunk_head`), with the packaged all-MiniLM-L6-v2. Chunk embeddings are cached by chunk id and text (bounded LRU).
"""

import json
import re
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from haystack import Document

from haystack_agentic.components.embedders._packaged_minilm import PACKAGED_MINILM, resolve_model
from haystack_agentic.evidence.features import chunk_title
from haystack_agentic.extras import require

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


class MeanPoolingEncoder:
    """
    A mean-pooling sentence-transformers model run with transformers alone.

    A sentence-transformers model made of a transformer, mean pooling and unit-length normalisation (the packaged
    all-MiniLM-L6-v2), run with transformers alone: importing sentence-transformers also imports scikit-learn, SciPy
    and pandas (its `util.similarity` imports `sklearn.metrics`), about a second that the similarity never uses.
    """

    def __init__(self, folder: str, batch_size: int = 32) -> None:
        """
        Create a MeanPoolingEncoder for a model folder; the model loads on first use.

        :param folder: The model's folder (a sentence-transformers save; `sentence_bert_config.json` gives the most
            tokens a text keeps, default 256).
        :param batch_size: Texts per forward pass.
        """
        self.folder = folder
        self.batch_size = batch_size
        self._model: Any = None
        self._tokenizer: Any = None
        self._max_tokens = 256
        self._lock = threading.Lock()  # a fast tokenizer refuses concurrent calls that set truncation and padding

    def warm_up(self) -> None:
        """Load the tokenizer and the model (`MissingExtraError` without transformers, `OSError` for a bad folder)."""
        if self._model is not None:
            return
        transformers = require("transformers", "embeddings", "The evidence check's similarity")
        config = Path(self.folder) / "sentence_bert_config.json"
        if config.is_file():
            self._max_tokens = int(json.loads(config.read_text()).get("max_seq_length") or self._max_tokens)
        self._tokenizer = transformers.AutoTokenizer.from_pretrained(self.folder, local_files_only=True)
        self._model = transformers.AutoModel.from_pretrained(self.folder, local_files_only=True).eval()

    def embed_texts(self, texts: Sequence[str]) -> Any:
        """The texts' unit-length embeddings, one row each (a float32 numpy array); `warm_up` first."""
        import torch  # noqa: PLC0415 - comes with transformers, an optional extra

        rows = []
        with torch.inference_mode():
            for start in range(0, len(texts), self.batch_size):
                with self._lock:
                    batch = self._tokenizer(
                        list(texts[start : start + self.batch_size]),
                        padding=True,
                        truncation=True,
                        max_length=self._max_tokens,
                        return_tensors="pt",
                    )
                tokens = self._model(**batch).last_hidden_state
                mask = batch["attention_mask"].unsqueeze(-1).to(tokens.dtype)
                mean = (tokens * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
                rows.append(torch.nn.functional.normalize(mean, p=2, dim=1))
        return torch.cat(rows).numpy()


class QuestionChunkSimilarity:
    """Cosine similarity of a question to its closest chunk's head (`chunk_chars` of it) with `model` (MiniLM)."""

    def __init__(self, model: str, chunk_chars: int = 300) -> None:
        self.model = model
        self.chunk_chars = chunk_chars
        self._embedder: Any = None
        self._cache: OrderedDict[tuple[str, int], Any] = OrderedDict()
        self._lock = threading.Lock()

    def warm_up(self) -> None:
        """
        Load the similarity model.

        The packaged MiniLM with `MeanPoolingEncoder`, any other with sentence-transformers (`RuntimeError` without the
        packaged model, `ImportError` without the `embeddings` extra).
        """
        if self._embedder is not None:
            return
        if self.model == PACKAGED_MINILM:
            embedder: Any = MeanPoolingEncoder(resolve_model(self.model))
        else:
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
            msg = "QuestionChunkSimilarity needs warm_up() before use."
            raise RuntimeError(msg)
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
