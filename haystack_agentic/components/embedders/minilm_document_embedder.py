# SPDX-License-Identifier: Apache-2.0

from typing import Any, ClassVar

from haystack import Document, component, logging

from haystack_agentic.components.embedders._packaged_minilm import PackagedMiniLM

logger = logging.getLogger(__name__)


@component
class MiniLMDocumentEmbedder(PackagedMiniLM):
    """
    Embeds Documents with the packaged all-MiniLM-L6-v2 model, offline.

    Embeds Documents (content, plus `meta.title` when present) with the all-MiniLM-L6-v2 shipped in a PyPI package
    (offline, 384 dimensions, normalised; any other model works too), by a `SentenceTransformersDocumentEmbedder`.

    ### Usage example
    ```python
    from haystack_agentic.components.embedders.minilm_document_embedder import MiniLMDocumentEmbedder

    from haystack import Document

    embedder = MiniLMDocumentEmbedder()
    embedder.warm_up()
    print(len(embedder.run(documents=[Document(content="Big Stone Gap")])["documents"][0].embedding))  # 384
    ```
    """

    _embedder_class = "SentenceTransformersDocumentEmbedder"

    _embedder_kwargs: ClassVar[dict[str, Any]] = {"meta_fields_to_embed": ["title"]}

    @component.output_types(documents=list[Document])
    def run(self, documents: list[Document]) -> dict[str, Any]:
        """
        Embed Documents.

        :param documents: The Documents; their `meta["title"]` is embedded with the content.
        :returns: `{"documents": list[Document]}`, copies with `embedding` set.
        :raises MissingExtraError: Without the `embeddings` extra.
        :raises RuntimeError: If the packaged model is not installed.
        """
        return self.embedder().run(documents=documents)
