# SPDX-License-Identifier: Apache-2.0
"""Saved in-memory store files: reading their documents without building a store, and loading them into one."""

import pytest
from haystack import Document
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.document_stores.in_memory import InMemoryDocumentStore

from haystack_agentic.document_stores.sparse_bm25_document_store import SparseBM25DocumentStore
from haystack_agentic.indexing import store_files
from haystack_agentic.indexing.store_faults import StoreError
from haystack_agentic.indexing.store_files import load_store_file, read_store_file

DOCUMENTS = [
    Document(content="Big Stone Gap is a film by Adriana Trigiani.", meta={"title": "Big Stone Gap"}),
    Document(content="Greenwich Village is in New York City.", meta={"title": "Greenwich Village"}),
]


@pytest.fixture
def saved(tmp_path):
    store = InMemoryDocumentStore(bm25_algorithm="BM25Plus", shared=False)
    store.write_documents(DOCUMENTS)
    path = tmp_path / "store.json"
    store.save_to_disk(str(path))
    return path


def test_read_store_file_gives_the_settings_and_documents(saved):
    settings, documents = read_store_file(saved)
    assert "documents" not in settings
    assert settings["init_parameters"]["bm25_algorithm"] == "BM25Plus"
    assert sorted(d.id for d in documents) == sorted(d.id for d in DOCUMENTS)
    assert {d.meta["title"] for d in documents} == {"Big Stone Gap", "Greenwich Village"}


def test_load_store_file_still_builds_the_store_with_its_settings(saved):
    store = load_store_file(saved)
    assert store.count_documents() == 2
    assert store.bm25_algorithm == "BM25Plus"


@pytest.mark.parametrize("content", [None, "not json", '{"documents": 3}', "[]"])
def test_an_unreadable_file_is_one_store_error_naming_it(tmp_path, content):
    path = tmp_path / "bad.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(StoreError, match=r"bad.json"):
        read_store_file(path)


def test_fill_in_memory_store_copies_the_documents_without_a_throwaway_store(saved, monkeypatch):
    from haystack import Pipeline

    from haystack_agentic.loop_loading import fill_in_memory_store

    def no_store(*_args, **_kwargs):
        msg = "load_store_file builds a store whose BM25 statistics the copy never uses"
        raise AssertionError(msg)

    monkeypatch.setattr(store_files, "load_store_file", no_store)
    pipeline = Pipeline()
    pipeline.add_component("retriever", InMemoryBM25Retriever(SparseBM25DocumentStore(index="fill-test")))
    assert fill_in_memory_store(pipeline, saved) == 2
