# SPDX-License-Identifier: Apache-2.0
"""Every Python block of the README runs verbatim, each in a fresh interpreter, from a folder outside the source tree
(as a user who installed the wheel would run it): no block may lean on another block's names or on repository paths."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from haystack_agentic.components.generators.embedded_chat_generator import embedded_model_available

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"^```python\n(.*?)^```", README.read_text(encoding="utf-8"), re.S | re.M)
#: The README's own shell command that makes the store file a block reads.
SETUP = {"store.json": ["-m", "haystack_agentic.cli.main", "index", "sample", "--store", "store.json", "--quiet"]}


def _id(block: str) -> str:
    first = next((line for line in block.splitlines() if line and not line.startswith(("from ", "import "))), "")
    return re.sub(r"\W+", "_", first)[:40]


def test_the_readme_has_python_blocks():
    assert len(BLOCKS) >= 5


#: A block that runs the embedded SmolLM2 uses a real model: integration and slow (the others are unit tests).
PARAMS = [
    pytest.param(b, id=_id(b), marks=[pytest.mark.integration, pytest.mark.slow] if "agentic_rag_embedded" in b else [])
    for b in BLOCKS
]


@pytest.mark.parametrize("block", PARAMS)
def test_a_readme_python_block_runs_verbatim(block, tmp_path):
    if "agentic_rag_embedded" in block and not embedded_model_available():
        pytest.skip("the packaged SmolLM2 GGUF is not installed (haystack-agentic install-model)")
    for name, command in SETUP.items():
        if f'"{name}"' in block:
            subprocess.run([sys.executable, *command], cwd=tmp_path, check=True, timeout=300)
    script = tmp_path / "block.py"
    script.write_text(block, encoding="utf-8")
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    # What a `print(...)  # <output>` line promises is printed (the comment up to any bracket; "# the ..." describes)
    for comment in re.findall(r"^print\(.*\)\s+#\s*(.+)$", block, re.M):
        expected = re.split(r"\s*[\[(<]", comment, maxsplit=1)[0].strip()
        if expected and not comment.startswith("the "):
            assert expected in done.stdout, (expected, done.stdout[-2000:])
