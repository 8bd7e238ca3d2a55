# SPDX-License-Identifier: Apache-2.0
"""`extras.is_milvus_store`: a class check against the optional milvus-haystack package that never imports it."""

import subprocess
import sys
import types
from pathlib import Path

import pytest

from haystack_agentic.extras import is_milvus_store


@pytest.fixture
def fake_milvus(monkeypatch):
    module = types.ModuleType("milvus_haystack")
    module.MilvusDocumentStore = type("MilvusDocumentStore", (), {})
    monkeypatch.setitem(sys.modules, module.__name__, module)
    return module


def test_an_instance_of_the_loaded_class_or_a_subclass_is_a_milvus_store(fake_milvus):
    assert is_milvus_store(fake_milvus.MilvusDocumentStore())
    assert is_milvus_store(type("Custom", (fake_milvus.MilvusDocumentStore,), {})())
    assert not is_milvus_store(object())


def test_a_class_of_the_same_name_elsewhere_is_not_a_milvus_store(fake_milvus):
    impostor = type("MilvusDocumentStore", (), {})()  # what a class-name comparison would take for the store
    assert not is_milvus_store(impostor)


def test_milvus_never_imported_is_not_imported_and_gives_false():
    code = (
        "import sys\nfrom haystack_agentic.extras import is_milvus_store\n"
        "print(is_milvus_store(object()), 'milvus_haystack' in sys.modules)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        cwd=Path(__file__).resolve().parents[1],
    )
    assert result.stdout.split() == ["False", "False"]
