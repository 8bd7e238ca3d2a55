# SPDX-License-Identifier: Apache-2.0
"""
Where the packaged resources are: the YAML pipelines and the sample corpus.

In a wheel they sit inside the package (`haystack_agentic/pipelines`, `haystack_agentic/data`); in a source
checkout (an editable install) they are the repository's `pipelines/` and `examples/data/`.
"""

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent
_REPO = _PACKAGE.parent

#: File name of the shipped HotpotQA sample (CC BY-SA 4.0; see examples/data/SOURCES.md).
SAMPLE_CORPUS = "hotpotqa_dev_sample.jsonl"


def pipelines_dir() -> Path:
    """The directory of the packaged YAML pipelines (in the package from a wheel, else the repository's)."""
    packaged = _PACKAGE / "pipelines"
    # The package's own `pipelines/` is also the Python package that builds them: it holds YAML only in a wheel.
    if any(packaged.glob("*.yml")):
        return packaged
    return _REPO / "pipelines"


def pipeline_path(name: str) -> Path:
    """A packaged pipeline's path by file name or stem; `FileNotFoundError` (listing them) when there is none."""
    directory = pipelines_dir()
    path = directory / (name if name.endswith((".yml", ".yaml")) else f"{name}.yml")
    if not path.exists():
        stems = sorted(p.stem for p in directory.glob("*.yml"))
        loops = ", ".join(s for s in stems if not s.startswith("indexing_"))
        indexing = ", ".join(s for s in stems if s.startswith("indexing_"))
        msg = f"No packaged pipeline '{name}' in {directory}. Known pipelines: {loops} (indexing: {indexing})."
        raise FileNotFoundError(msg)
    return path


def sample_corpus_path() -> Path:
    """The path of the shipped HotpotQA sample corpus (360 questions, ~3,500 Wikipedia paragraphs)."""
    packaged = _PACKAGE / "data" / SAMPLE_CORPUS
    return packaged if packaged.exists() else _REPO / "examples" / "data" / SAMPLE_CORPUS
