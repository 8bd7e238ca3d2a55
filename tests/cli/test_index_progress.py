# SPDX-License-Identifier: Apache-2.0
"""`index` shows labelled stages (converting, loading model, embedding, writing) with counts and an ETA."""

import io

import pytest
from haystack.document_stores.in_memory import InMemoryDocumentStore
from rich.console import Console

from haystack_agentic.cli.index import IndexProgress
from haystack_agentic.indexing.indexer import CONVERTING, EMBEDDING, LOADING_MODEL, WRITING, index_files


def make_files(tmp_path, n):
    files = []
    for i in range(n):
        path = tmp_path / f"doc{i}.txt"
        path.write_text(f"Document number {i} is about the town of Fnordville.", encoding="utf-8")
        files.append(path)
    return files


def stage_order(events):
    order = []
    for stage, _, _ in events:
        if stage not in order:
            order.append(stage)
    return order


def test_stages_report_counts_from_zero_to_the_total(tmp_path, monkeypatch):
    from haystack_agentic.indexing import indexer

    monkeypatch.setattr(indexer, "BATCH_SIZE", 8)
    events = []
    files = make_files(tmp_path, 20)
    result = index_files(files, InMemoryDocumentStore(), progress=lambda *e: events.append(e))
    assert result.files == 20 and result.chunks == 20 and result.in_store == 20
    assert stage_order(events) == [CONVERTING, WRITING]
    converting = [(done, total) for stage, done, total in events if stage == CONVERTING]
    assert converting[0] == (0, 20) and converting[-1] == (20, 20) and len(converting) >= 3  # reported per batch
    writing = [done for stage, done, _ in events if stage == WRITING]
    assert writing == [0, 8, 16, 20]


@pytest.mark.integration
def test_loading_the_model_is_its_own_stage_before_embedding(tmp_path):
    from haystack_agentic.components.embedders.minilm_document_embedder import MiniLMDocumentEmbedder

    events = []
    index_files(
        make_files(tmp_path, 3),
        InMemoryDocumentStore(),
        embedder=MiniLMDocumentEmbedder(),
        progress=lambda *e: events.append(e),
    )
    assert stage_order(events) == [CONVERTING, LOADING_MODEL, EMBEDDING, WRITING]
    loading = [(done, total) for stage, done, total in events if stage == LOADING_MODEL]
    assert loading == [(0, None), (1, 1)]  # no count while the model loads, so no bar sits at 0/N
    assert [e for e in events if e[0] == EMBEDDING][-1] == (EMBEDDING, 3, 3)


def test_the_display_labels_each_stage_with_its_count_and_eta():
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=110, color_system=None)
    with IndexProgress(console) as show:
        show(CONVERTING, 0, 4)
        show(CONVERTING, 4, 4)
        show(LOADING_MODEL, 0, None)
        show(LOADING_MODEL, 1, 1)
        show(EMBEDDING, 0, 10)
        show(EMBEDDING, 5, 10)
        show(WRITING, 0, 10)
    text = out.getvalue()
    for label in ("Converting", "Loading model", "Embedding", "Writing"):
        assert label in text
    assert "4/4 files" in text and "5/10 chunks" in text and "0/10 chunks" in text
    assert "done in" in text and "ETA" in text  # 5 of 10 done: an estimate for the rest
    assert "elapsed" in text  # 0 of 10 written: no estimate yet


def test_the_display_is_silent_when_quiet_or_not_a_terminal():
    for console, quiet in (
        (Console(file=io.StringIO(), force_terminal=True), True),
        (Console(file=io.StringIO(), force_terminal=False), False),
    ):
        with IndexProgress(console, quiet) as show:
            show(CONVERTING, 0, 1)
            show(CONVERTING, 1, 1)
        assert console.file.getvalue() == ""
