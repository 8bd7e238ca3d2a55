# SPDX-License-Identifier: Apache-2.0
"""`import haystack_agentic` trusts its own modules (and the packaged YAMLs' few others) for `Pipeline.loads`."""

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from haystack_agentic import ALLOWED_MODULES
from haystack_agentic.resources import pipelines_dir

ROOT = Path(__file__).resolve().parents[1]
PACKAGED = sorted(p.name for p in pipelines_dir().glob("*.yml"))


def test_the_allow_list_names_exact_modules():
    assert all("*" not in pattern for pattern in ALLOWED_MODULES)
    assert "pymilvus" not in ALLOWED_MODULES and "milvus_haystack" not in ALLOWED_MODULES


@pytest.mark.slow  # runs for many seconds
@pytest.mark.parametrize("name", PACKAGED)
def test_each_packaged_yaml_loads_with_no_allowed_modules(name):
    # A fresh process: the trust comes from the import alone, not from another test's allow-list.
    code = f"""
        import haystack_agentic
        from haystack import Pipeline
        from haystack_agentic.resources import pipeline_path
        pipeline = Pipeline.loads(pipeline_path({name!r}).read_text())
        print(len(list(pipeline.walk())))
    """
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr
    assert int(result.stdout.strip().splitlines()[-1]) > 0


def test_without_the_import_haystack_refuses_our_modules():
    code = """
        from haystack import Pipeline
        from haystack.core.errors import DeserializationError
        text = open("pipelines/agentic_rag_embedded.yml").read()
        try:
            Pipeline.loads(text)
        except DeserializationError as exc:
            print("refused")
    """
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert result.stdout.strip() == "refused", result.stderr


def test_load_loop_pipeline_takes_a_packaged_name():
    from haystack_agentic import load_loop_pipeline

    pipeline = load_loop_pipeline("agentic_rag_embedded")
    assert pipeline.get_component("controller") is not None
    with pytest.raises(FileNotFoundError, match="Known pipelines"):
        load_loop_pipeline("no_such_pipeline")
