# SPDX-License-Identifier: Apache-2.0
"""`extras.is_instance`: a class check against an optional package that never imports it."""

import subprocess
import sys
import types
from pathlib import Path

import pytest

from haystack_agentic.extras import is_instance


@pytest.fixture
def fake_package(monkeypatch):
    module = types.ModuleType("fake_optional_package")
    module.Store = type("Store", (), {})
    module.Retriever = type("Retriever", (), {})
    module.helper = lambda: None  # not a class: never matched
    monkeypatch.setitem(sys.modules, module.__name__, module)
    return module


def test_an_instance_of_a_loaded_optional_class_is_found(fake_package):
    assert is_instance(fake_package.Store(), "fake_optional_package", "Store")
    assert is_instance(fake_package.Retriever(), "fake_optional_package", "Store", "Retriever")
    assert not is_instance(fake_package.Retriever(), "fake_optional_package", "Store")
    assert not is_instance(fake_package.Store(), "fake_optional_package", "Missing", "helper")


def test_a_class_of_the_same_name_elsewhere_is_not_an_instance(fake_package):
    impostor = type("Store", (), {})()  # what a class-name comparison would take for the package's store
    assert not is_instance(impostor, "fake_optional_package", "Store")


def test_a_package_never_imported_is_not_imported_and_gives_false():
    code = (
        "import sys\nfrom haystack_agentic.extras import is_instance\n"
        "print(is_instance(object(), 'milvus_haystack', 'MilvusDocumentStore'), 'milvus_haystack' in sys.modules)"
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
