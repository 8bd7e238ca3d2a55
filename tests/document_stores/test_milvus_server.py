# SPDX-License-Identifier: Apache-2.0
"""
A real Milvus server (not Milvus Lite): the `milvus` wheel's standalone server, started on a free port in a temp dir.

The wheel on PyPI is Milvus 2.3.5: dense retrieval works there, BM25 and hybrid need Milvus >= 2.5, so those tests
skip with that reason on it, and the user's error for them is checked instead. The CLI runs exactly what a user
types: `index PATH --backend milvus --uri http://127.0.0.1:PORT`, then `ask ... --backend milvus --uri ...`.
"""

import json
import socket

import pytest
from conftest import DOCS
from haystack import Document
from scripted_chat_generator import ScriptedChatGenerator

from haystack_agentic.cli.main import main
from haystack_agentic.document_stores import milvus_support
from haystack_agentic.grounding.markers import strip_markers
from haystack_agentic.indexing.document_stores import milvus_document_store
from haystack_agentic.pipelines import loop_builder
from haystack_agentic.resources import pipeline_path

pytest.importorskip("milvus", reason="the `milvus` wheel (dev extra) starts the Milvus server these tests use")
pytestmark = pytest.mark.integration


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def milvus_server(tmp_path_factory):
    """A Milvus standalone server on 127.0.0.1:<free port>, data in a temp dir; yields `(uri, version)`."""
    from milvus import MilvusServer, MilvusServerConfig

    server = MilvusServer(MilvusServerConfig())
    server.set_base_dir(str(tmp_path_factory.mktemp("milvus-server")))
    server.listen_port = _free_port()
    try:
        server.start()  # polls the server's /healthz until it answers (180 s deadline)
        uri = f"http://127.0.0.1:{server.listen_port}"
        from pymilvus import MilvusClient

        client = MilvusClient(uri=uri)
        version = milvus_support.server_version(client)
        client.close()
        yield uri, version
    finally:
        server.stop()  # terminate, then kill, by pid


@pytest.fixture
def corpus(tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    for doc in DOCS:
        (folder / f"{doc.id}.txt").write_text(f"{doc.meta['title']}\n{doc.content}")
    return folder


def _scripted_answers(monkeypatch, loaded: dict):
    """Load the pipeline as the CLI does, then swap SmolLM2 for a scripted answer: these tests are about the store."""
    real = loop_builder.build_loop

    def spy(options, notify=None):
        pipeline = real(options, notify)
        loaded["pipeline"] = pipeline
        pipeline.get_component("answerer").chat_generator = ScriptedChatGenerator([{"text": "Adriana Trigiani"}])
        try:
            pipeline.remove_component("grounder")
            pipeline.connect("finish.value", "result.state")
        except ValueError:
            pass
        return pipeline

    monkeypatch.setattr(loop_builder, "build_loop", spy)


def test_cli_index_and_ask_with_dense_retrieval_on_a_milvus_server(
    milvus_server, corpus, tmp_path, monkeypatch, capsys
):
    uri, version = milvus_server
    monkeypatch.setenv("HAYSTACK_AGENTIC_CACHE", str(tmp_path))
    assert main(["index", str(corpus), "--backend", "milvus", "--uri", uri, "--quiet"]) == 0
    captured = capsys.readouterr()
    assert f"({len(DOCS)} in the store)" in captured.out
    if not milvus_support.supports_bm25(version):
        assert "has no BM25 (Milvus >= 2.5)" in captured.err
    loaded: dict = {}
    _scripted_answers(monkeypatch, loaded)
    code = main(
        [
            "ask",
            "Who directed Big Stone Gap?",
            "--llm",
            "embedded",
            "--backend",
            "milvus",
            "--uri",
            uri,
            "--json",
            "--store",
            str(tmp_path / "unused.json"),
        ]
    )
    out = json.loads(capsys.readouterr().out)
    assert code == 0, out
    retriever = loaded["pipeline"].get_component("retriever").retriever
    expected = "MilvusEmbeddingRetriever" if not milvus_support.supports_bm25(version) else "MilvusHybridRetriever"
    assert type(retriever).__name__ == expected
    assert retriever.document_store.connection_args["uri"] == uri
    first = out["tool_history"][0]
    assert first["action"] == "search" and first["returned_chunk_ids"]
    assert strip_markers(out["answer"]) == "Adriana Trigiani" and out["terminated_by"] == "answered"


def test_bm25_and_hybrid_pipeline_on_an_old_server_fails_saying_why(milvus_server, tmp_path, monkeypatch, capsys):
    uri, version = milvus_server
    if milvus_support.supports_bm25(version):
        pytest.skip(f"the server runs Milvus {version}, which has BM25: no version error to check")
    monkeypatch.setenv("HAYSTACK_AGENTIC_CACHE", str(tmp_path))
    code = main(
        [
            "ask",
            "Who directed Big Stone Gap?",
            "--llm",
            "embedded",
            "--pipeline",
            str(pipeline_path("agentic_rag_embedded_milvus")),
            "--uri",
            uri,
            "--quiet",
        ]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert "MilvusHybridRetriever needs BM25" in err and "Milvus >= 2.5" in err
    assert ".".join(map(str, version)) in err and "Traceback" not in err


def test_bm25_and_hybrid_retrieval_on_a_milvus_server(milvus_server):
    uri, version = milvus_server
    if not milvus_support.supports_bm25(version):
        pytest.skip(
            f"BM25 and hybrid retrieval need Milvus >= 2.5; the test server (the `milvus` wheel) runs "
            f"{'.'.join(map(str, version))}"
        )
    from milvus_haystack import MilvusHybridRetriever, MilvusSparseEmbeddingRetriever

    store = milvus_document_store(uri, collection_name="bm25_test", drop_old=True)
    store.write_documents([Document(id=d.id, content=d.content, meta=d.meta, embedding=[0.1] * 384) for d in DOCS])
    sparse = MilvusSparseEmbeddingRetriever(store, top_k=2).run(query_text="Stonehenge")["documents"]
    assert sparse and sparse[0].id == "stonehenge"
    hybrid = MilvusHybridRetriever(store, top_k=2).run(query_text="Stonehenge", query_embedding=[0.1] * 384)
    assert hybrid["documents"]


def test_require_bm25_names_the_server_version(milvus_server):
    uri, version = milvus_server
    store = milvus_document_store(uri, collection_name="version_probe")
    if milvus_support.supports_bm25(version):
        milvus_support.require_bm25(store, "BM25")  # no error
        return
    with pytest.raises(milvus_support.MilvusBM25UnsupportedError, match=r"needs Milvus >= 2\.5; the server at"):
        milvus_support.require_bm25(store, "BM25")
