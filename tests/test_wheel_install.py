# SPDX-License-Identifier: Apache-2.0
"""A wheel built from this checkout holds the library and the application only (no test, benchmark or evaluation
code), installs with no extras into a fresh virtualenv (from the package index), passes `pip check`, carries both
licences, and runs the README's "own pipeline" block verbatim outside the source tree."""

import re
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(command: list[str], cwd: Path | None = None) -> str:
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, f"{' '.join(map(str, command))}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel of this checkout, built once (hatchling, fetched by pip into an isolated build environment)."""
    dist = tmp_path_factory.mktemp("dist")
    _run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(dist), str(ROOT)])
    return next(dist.glob("haystack_agentic-*.whl"))


#: Code that must stay out of the wheel: the evaluation harness and benchmarks, the tests and their doubles.
NOT_SHIPPED = (
    "benchmarks/",
    "tests/",
    "haystack_agentic/evaluation/",
    "haystack_agentic/datasets/",
    "haystack_agentic/testing/",
    "haystack_agentic/cli/eval.py",
)


#: Test code by file name, wherever it would sit: the test doubles, conftest and test modules.
TEST_CODE_NAMES = (
    "scripted_chat_generator.py",
    "tiny_hhem.py",
    "citing_result.py",
    "hostile_replies.py",
    "conftest.py",
)


def shipped_code_problems(names: list[str]) -> list[str]:
    """The wheel entries that break the layout: anything under `NOT_SHIPPED`, test code by name (`TEST_CODE_NAMES`,
    `test_*.py`), a `.py` file outside the package, compiled files."""
    return sorted(
        name
        for name in names
        if name.startswith(NOT_SHIPPED)
        or (name.endswith(".py") and not name.startswith("haystack_agentic/"))
        or Path(name).name in TEST_CODE_NAMES
        or Path(name).name.startswith("test_")
        or name.endswith((".pyc", ".pyo"))
        or "__pycache__" in name
    )


def test_the_layout_check_sees_test_and_benchmark_code():
    names = [
        "haystack_agentic/__init__.py",
        "haystack_agentic/cli/main.py",
        "haystack_agentic/data/LICENSE",
        "tests/conftest.py",
        "benchmarks/harness/metrics.py",
        "haystack_agentic/testing/__init__.py",
        "haystack_agentic/scripted_chat_generator.py",
        "conftest.py",
        "haystack_agentic/__pycache__/x.pyc",
    ]
    assert shipped_code_problems(names) == sorted(names[3:])


@pytest.mark.integration
@pytest.mark.slow
def test_the_wheel_holds_the_library_and_application_only(wheel):
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    assert shipped_code_problems(names) == []
    shipped = {name for name in names if name.endswith(".py")}
    source = {p.relative_to(ROOT).as_posix() for p in (ROOT / "haystack_agentic").rglob("*.py")}
    assert shipped == source  # every module of the package, and nothing else
    assert {"haystack_agentic/cli/main.py", "haystack_agentic/serving/app.py"} <= shipped  # the application stays
    assert {f"haystack_agentic/pipelines/{p.name}" for p in (ROOT / "pipelines").glob("*.yml")} <= set(names)


@pytest.mark.integration
@pytest.mark.slow
def test_the_wheel_installs_without_extras_and_runs_the_readme_own_pipeline(wheel, tmp_path):
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        metadata = archive.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert {"haystack_agentic/data/LICENSE", "haystack_agentic/data/hotpotqa_dev_sample.jsonl"} <= names
    assert "License-Expression: Apache-2.0 AND CC-BY-SA-4.0" in metadata and "Project-URL: Source" in metadata
    venv.create(tmp_path / "venv", with_pip=True)
    python = str(tmp_path / "venv" / "bin" / "python")
    _run([python, "-m", "pip", "install", "--quiet", str(wheel)])
    assert "No broken requirements" in _run([python, "-m", "pip", "check"])
    heavy = _run(
        [
            python,
            "-c",
            (
                "import importlib.util as u; print([m for m in ('torch', 'transformers', "
                "'sentence_transformers', 'pymilvus', 'hayhooks') if u.find_spec(m)])"
            ),
        ]
    )
    assert heavy.strip() == "[]"
    blocks = re.findall(r"^```python\n(.*?)^```", (ROOT / "README.md").read_text(encoding="utf-8"), re.S | re.M)
    (tmp_path / "own.py").write_text(next(b for b in blocks if "AgenticRAG(pipeline=loop)" in b), encoding="utf-8")
    out = _run([python, "own.py"], cwd=tmp_path)
    assert "Greenwich Village [1] (sources: bsg trigiani)" in out and "answered" in out
    # the command-line entry point of the base install, and the shipped sample by name
    assert "Indexed 3572 documents" in _run(
        [str(tmp_path / "venv" / "bin" / "haystack-agentic"), "index", "sample", "--store", "s.json", "--quiet"],
        cwd=tmp_path,
    )
