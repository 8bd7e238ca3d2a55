# SPDX-License-Identifier: Apache-2.0

from typing import Any

from haystack import component, logging
from haystack_integrations.components.embedders.sentence_transformers import SentenceTransformersDocumentEmbedder

from haystack_agentic.components.embedders._packaged_minilm import PackagedMiniLM

logger = logging.getLogger(__name__)


@component
class MiniLMDocumentEmbedder(PackagedMiniLM, SentenceTransformersDocumentEmbedder):
    """
    Embeds Documents (content, plus `meta.title` when present) with the all-MiniLM-L6-v2 shipped in a PyPI package:
    offline, 384 dimensions, normalised.

    A `SentenceTransformersDocumentEmbedder` whose default model is the packaged one, so a YAML pipeline stays
    machine-independent (no absolute model path in it). Any other model name or folder works too.

    ### Usage example
    ```python
    from haystack_agentic.components.embedders.minilm_document_embedder import MiniLMDocumentEmbedder

    from haystack import Document

    embedder = MiniLMDocumentEmbedder()
    embedder.warm_up()
    print(len(embedder.run(documents=[Document(content="Big Stone Gap")])["documents"][0].embedding))  # 384
    ```
    """

    def _embedder_kwargs(self) -> dict[str, Any]:
        """A document's `meta["title"]` is embedded with its content."""
        return {"meta_fields_to_embed": ["title"]}
