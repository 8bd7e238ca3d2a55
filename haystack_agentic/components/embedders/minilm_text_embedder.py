# SPDX-License-Identifier: Apache-2.0

from typing import Any

from haystack import component, logging

from haystack_agentic.components.embedders._packaged_minilm import PackagedMiniLM

logger = logging.getLogger(__name__)


@component
class MiniLMTextEmbedder(PackagedMiniLM):
    """
    Embeds a query with the packaged all-MiniLM-L6-v2 model, offline.

    Embeds a query with the all-MiniLM-L6-v2 shipped in a PyPI package (offline, 384 dimensions, normalised; any
    other model works too), by a `SentenceTransformersTextEmbedder` (the `embeddings` extra, imported on `warm_up`).

    ### Usage example
    ```python
    from haystack_agentic.components.embedders.minilm_text_embedder import MiniLMTextEmbedder

    embedder = MiniLMTextEmbedder()
    embedder.warm_up()
    print(len(embedder.run(text="Who directed Big Stone Gap?")["embedding"]))  # 384
    ```
    """

    _embedder_class = "SentenceTransformersTextEmbedder"

    @component.output_types(embedding=list[float])
    def run(self, text: str) -> dict[str, Any]:
        """
        Embed one text.

        :param text: The text (a query).
        :returns: `{"embedding": list[float]}` (384 floats for the packaged model).
        :raises MissingExtraError: Without the `embeddings` extra.
        :raises RuntimeError: If the packaged model is not installed.
        """
        return self.embedder().run(text=text)

    def embed_texts(self, texts: list[str]) -> list[list[float]]:
        """
        Embed many texts, in batches of `batch_size` (one model call per batch).

        :param texts: The texts.
        :returns: One embedding per text, in order.
        :raises MissingExtraError: Without the `embeddings` extra.
        :raises RuntimeError: If the packaged model is not installed.
        """
        backend = self.embedder().embedding_backend
        vectors = backend.embed(texts, batch_size=self.batch_size, show_progress_bar=False, normalize_embeddings=True)
        return [list(map(float, vector)) for vector in vectors]
