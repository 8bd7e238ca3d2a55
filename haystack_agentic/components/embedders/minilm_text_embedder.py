# SPDX-License-Identifier: Apache-2.0

from haystack import component, logging
from haystack_integrations.components.embedders.sentence_transformers import SentenceTransformersTextEmbedder

# The packaged model's name, dimension and folder are re-exported: they are public names of this module.
from haystack_agentic.components.embedders._packaged_minilm import (  # noqa: F401
    MINILM_DIMENSION,
    PACKAGED_MINILM,
    PackagedMiniLM,
    resolve_model,
)

logger = logging.getLogger(__name__)


@component
class MiniLMTextEmbedder(PackagedMiniLM, SentenceTransformersTextEmbedder):
    """
    Embeds a query with the all-MiniLM-L6-v2 shipped in a PyPI package: offline, 384 dimensions, normalised.

    A `SentenceTransformersTextEmbedder` whose default model is the packaged one, so a YAML pipeline stays
    machine-independent (no absolute model path in it). Any other model name or folder works too.

    ### Usage example
    ```python
    from haystack_agentic.components.embedders.minilm_text_embedder import MiniLMTextEmbedder

    embedder = MiniLMTextEmbedder()
    embedder.warm_up()
    print(len(embedder.run(text="Who directed Big Stone Gap?")["embedding"]))  # 384
    ```
    """
