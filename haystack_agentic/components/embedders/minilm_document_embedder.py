# SPDX-License-Identifier: Apache-2.0

from typing import Any

from haystack import component, default_from_dict, default_to_dict, logging
from haystack_integrations.components.embedders.sentence_transformers import SentenceTransformersDocumentEmbedder

from haystack_agentic.components.embedders.minilm_text_embedder import PACKAGED_MINILM, resolve_model

logger = logging.getLogger(__name__)


@component
class MiniLMDocumentEmbedder(SentenceTransformersDocumentEmbedder):
    """
    Embeds Documents (content, plus `meta.title` when present) with the all-MiniLM-L6-v2 shipped in a PyPI package: offline, 384 dimensions, normalised.

    A `SentenceTransformersDocumentEmbedder` whose default model is the packaged one, so a YAML pipeline stays
    machine-independent (no absolute model path in it). Any other model name or folder works too.

    ### Usage example
    ```python
    from haystack_agentic.components.embedders.minilm_text_embedder import MiniLMDocumentEmbedder

    from haystack import Document

    embedder = MiniLMDocumentEmbedder()
    embedder.warm_up()
    print(len(embedder.run(documents=[Document(content="Big Stone Gap")])["documents"][0].embedding))  # 384
    ```
    """

    def __init__(
        self,
        model: str = PACKAGED_MINILM,
        batch_size: int = 32,
        progress_bar: bool = False,
        normalize_embeddings: bool = True,
    ) -> None:
        """
        Create a MiniLMDocumentEmbedder.

        :param model: `PACKAGED_MINILM` (default), a local folder or a sentence-transformers model name.
        :param batch_size: Texts per forward pass. Default 32.
        :param progress_bar: Show sentence-transformers' progress bar. Default `False`.
        :param normalize_embeddings: Unit-length embeddings (cosine = dot = L2 ranking). Default `True`.
        """
        SentenceTransformersDocumentEmbedder.__init__(  # explicit: @component rebuilds the class
            self,
            model=model,
            batch_size=batch_size,
            progress_bar=progress_bar,
            normalize_embeddings=normalize_embeddings,
            local_files_only=model == PACKAGED_MINILM,
            meta_fields_to_embed=["title"],
        )

    def warm_up(self) -> None:
        """
        Load the model (from the package folder for `PACKAGED_MINILM`).

        :raises RuntimeError: If the packaged model is not installed.
        """
        name = self.model
        self.model = resolve_model(name)
        try:
            SentenceTransformersDocumentEmbedder.warm_up(self)
        finally:
            self.model = name

    def to_dict(self) -> dict[str, Any]:
        """
        Serialize the component to a dictionary.

        :returns: Dictionary with serialized data.
        """
        return default_to_dict(
            self,
            model=self.model,
            batch_size=self.batch_size,
            progress_bar=self.progress_bar,
            normalize_embeddings=self.normalize_embeddings,
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "MiniLMDocumentEmbedder":
        """
        Deserialize the component from a dictionary.

        :param data: Dictionary to deserialize from.
        :returns: The component.
        """
        return default_from_dict(cls, data)
