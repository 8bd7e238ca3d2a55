# SPDX-License-Identifier: Apache-2.0
"""A wheel built from this checkout installs with no extras into a fresh virtualenv (from the package index), passes
`pip check`, carries both licences, and runs the README's "own pipeline" block verbatim outside the source tree."""

import re
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _run(command: list[str], cwd: Path | None = None) -> str:
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, f"{' '.join(map(str, command))}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def test_the_wheel_installs_without_extras_and_runs_the_readme_own_pipeline(tmp_path):
    _run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(tmp_path / "dist"), str(ROOT)])
    wheel = next((tmp_path / "dist").glob("haystack_agentic-*.whl"))
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        metadata = archive.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert {"haystack_agentic/data/LICENSE", "haystack_agentic/data/hotpotqa_dev_sample.jsonl"} <= names
    assert "License-Expression: Apache-2.0 AND CC-BY-SA-4.0" in metadata and "Project-URL: Source" in metadata
    venv.create(tmp_path / "venv", with_pip=True)
    python = str(tmp_path / "venv" / "bin" / "python")
    _run([python, "-m", "pip", "install", "--quiet", str(wheel)])
    assert "No broken requirements" in _run([python, "-m", "pip", "check"])
    heavy = _run([python, "-c", "import importlib.util as u; print([m for m in ('torch', 'transformers', "
                  "'sentence_transformers', 'pymilvus', 'hayhooks') if u.find_spec(m)])"])  # fmt: skip
    assert heavy.strip() == "[]"
    blocks = re.findall(r"^```python\n(.*?)^```", (ROOT / "README.md").read_text(encoding="utf-8"), re.S | re.M)
    (tmp_path / "own.py").write_text(next(b for b in blocks if "AgenticRAG(pipeline=loop)" in b), encoding="utf-8")
    out = _run([python, "own.py"], cwd=tmp_path)
    assert "Greenwich Village [1] (sources: bsg trigiani)" in out and "answered" in out
    # the command-line entry point of the base install, and the shipped sample by name
    assert "Indexed 3572 documents" in _run([str(tmp_path / "venv" / "bin" / "haystack-agentic"), "index", "sample",
                                             "--store", "s.json", "--quiet"], cwd=tmp_path)  # fmt: skip
