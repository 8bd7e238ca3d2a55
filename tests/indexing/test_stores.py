# SPDX-License-Identifier: Apache-2.0
"""Swappable stores: SafeRetriever, Milvus Lite for real, in-memory persistence, Weaviate offline paths, indexing."""

import json

import pytest
from conftest import DOCS, QUESTION, answer, load_yaml, search
from haystack import Document, component
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.document_stores.in_memory import InMemoryDocumentStore
from scripted_chat_generator import ScriptedChatGenerator

from haystack_agentic import AgenticRouter, LoopController, build_loop_pipeline
from haystack_agentic.cli.main import main
from haystack_agentic.components.embedders.minilm_document_embedder import MiniLMDocumentEmbedder
from haystack_agentic.components.embedders.minilm_text_embedder import MiniLMTextEmbedder
from haystack_agentic.components.retrievers.safe_retriever import DocumentStoreUnavailableError, SafeRetriever
from haystack_agentic.indexing.document_stores import (
    EmbeddingDimensionError,
    check_embedding_dimension,
    milvus_document_store,
    weaviate_document_store,
)
from haystack_agentic.indexing.indexer import write_documents
from haystack_agentic.indexing.indexing_pipeline import build_indexing_pipeline, collect_files, convert_files
from haystack_agentic.sockets import component_sockets

TENANT = {"field": "meta.kind", "operator": "==", "value": "place"}


@component
class FailingRetriever:
    @component.output_types(documents=list[Document])
    def run(self, query: str, filters: dict | None = None, top_k: int | None = None):
        msg = "store is down"
        raise ConnectionError(msg)


# --- SafeRetriever and the loop -------------------------------------------------------------------------------


def test_safe_retriever_mirrors_inputs_and_catches_errors():
    safe = SafeRetriever(FailingRetriever())
    assert set(component_sockets(safe)[0]) == {"query", "filters", "top_k"}
    assert safe.run(query="x") == {"documents": [], "error": "ConnectionError: store is down"}
    store = InMemoryDocumentStore()
    store.write_documents(DOCS)
    ok = SafeRetriever(InMemoryBM25Retriever(store))
    out = ok.run(query="Stonehenge", top_k=1)
    assert out["error"] is None and out["documents"][0].id == "stonehenge"
    assert ok.document_store is store
    with pytest.raises(ValueError, match="documents"):
        SafeRetriever(object())


def test_store_error_goes_back_to_the_llm_and_the_loop_continues():
    llm = ScriptedChatGenerator([search("Big Stone Gap"), answer("I could not search.")])
    # The store error is under test, not the evidence check (which would hold back an answer from no chunks).
    pipeline = build_loop_pipeline(
        AgenticRouter(chat_generator=llm, search_question_first=False),
        SafeRetriever(FailingRetriever()),
        check_evidence=False,
    )
    result = pipeline.run({"controller": {"query": QUESTION}})["result"]
    assert result["terminated_by"] == "answered"
    assert result["answer"] == "I could not search."
    step = result["tool_history"][0]
    assert step["action"] == "search" and "store is down" in step["result"]
    tool_results = [m.tool_call_result for m in llm.calls[1][0] if m.tool_call_result]
    assert tool_results and tool_results[-1].error and "store is down" in tool_results[-1].result


def test_controller_without_search_error_keeps_its_behaviour():
    controller = LoopController()
    state = controller.run(query="q")["state"]
    assert controller.run(state=state, documents=[], search_error=None)["state"].iteration == 1


def test_safe_retriever_round_trips_and_checks_the_store_at_warm_up():
    safe = SafeRetriever(InMemoryBM25Retriever(InMemoryDocumentStore()))
    assert SafeRetriever.from_dict(safe.to_dict()).to_dict() == safe.to_dict()
    unreachable = SafeRetriever(_weaviate_retriever("http://127.0.0.1:9"))
    with pytest.raises(DocumentStoreUnavailableError, match=r"127.0.0.1:9"):
        unreachable.warm_up()


# --- Weaviate (no server here) --------------------------------------------------------------------------------


def _weaviate_retriever(url):
    from haystack_integrations.components.retrievers.weaviate import WeaviateHybridRetriever

    return WeaviateHybridRetriever(document_store=weaviate_document_store(url))


def test_weaviate_pipeline_loads_and_fails_clearly_at_start(monkeypatch, tmp_path):
    from haystack_agentic.pipelines.loop_builder import load_loop_pipeline
    from haystack_agentic.resources import pipeline_path

    pipeline = load_loop_pipeline(pipeline_path("agentic_rag_embedded_weaviate"), store_uri="http://127.0.0.1:9")
    loaded, built = load_yaml(pipeline.dumps()).to_dict(), pipeline.to_dict()
    for data in (loaded, built):  # built in Python: its connections in the order they were made
        data["connections"] = sorted(data["connections"], key=str)
    assert loaded == built
    retriever = pipeline.get_component("retriever")
    assert retriever.document_store._url == "http://127.0.0.1:9"  # via the wrapped retriever
    with pytest.raises(Exception, match="not reachable"):
        retriever.warm_up()


@pytest.mark.integration
@pytest.mark.skipif("not __import__('os').environ.get('WEAVIATE_URL')", reason="needs WEAVIATE_URL")
def test_weaviate_live_write_overwrite_and_search():
    import os

    store = weaviate_document_store(os.environ["WEAVIATE_URL"], "HaystackAgenticTest")
    embedder = MiniLMDocumentEmbedder()
    write_documents(DOCS, store, embedder)
    assert write_documents(DOCS, store, embedder) == len(DOCS)
    text = MiniLMTextEmbedder()
    text.warm_up()
    safe = SafeRetriever(_weaviate_retriever(os.environ["WEAVIATE_URL"]))
    out = safe.run(query="Stonehenge", query_embedding=text.run(text="Stonehenge")["embedding"], top_k=1)
    assert out["documents"][0].meta["title"] == "Stonehenge"


# --- Milvus Lite ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def embedded_docs():
    embedder = MiniLMDocumentEmbedder()
    embedder.warm_up()
    return embedder.run(documents=[Document(id=d.id, content=d.content, meta=d.meta) for d in DOCS])["documents"]


@pytest.fixture(scope="module")
def query_embedder():
    embedder = MiniLMTextEmbedder()
    embedder.warm_up()
    return embedder


@pytest.mark.integration
def test_milvus_lite_write_overwrite_search_filters(tmp_path, embedded_docs, query_embedder):
    from milvus_haystack import MilvusEmbeddingRetriever, MilvusHybridRetriever, MilvusSparseEmbeddingRetriever

    store = milvus_document_store(str(tmp_path / "m.db"))
    assert MilvusSparseEmbeddingRetriever(store).run(query_text="anything")["documents"] == []  # empty store
    assert store.filter_documents() == []
    assert write_documents(embedded_docs, store) == len(DOCS)
    assert write_documents(embedded_docs, store) == len(DOCS)  # overwrite, not duplicate
    q = query_embedder.run(text="prehistoric monument in England")["embedding"]
    dense = MilvusEmbeddingRetriever(store).run(query_embedding=q, top_k=1)["documents"]
    assert dense[0].id == "stonehenge"
    bm25 = MilvusSparseEmbeddingRetriever(store).run(query_text="Salisbury Plain Wiltshire", top_k=1)["documents"]
    assert bm25[0].id == "stonehenge"
    hybrid = MilvusHybridRetriever(store).run(query_embedding=q, query_text="Stonehenge", top_k=2)["documents"]
    assert hybrid[0].id == "stonehenge"
    scoped = MilvusEmbeddingRetriever(store).run(query_embedding=q, top_k=10, filters=TENANT)["documents"]
    assert scoped and all(d.meta["kind"] == "place" for d in scoped)
    with pytest.raises(EmbeddingDimensionError, match=r"768.*384"):
        check_embedding_dimension(store, 768)
    before = store.count_documents()
    bad = [Document(content="new", embedding=[0.1] * 8)]

    class EightDim:
        def run(self, documents):
            return {"documents": [Document(content=d.content, embedding=[0.1] * 8) for d in documents]}

    with pytest.raises(EmbeddingDimensionError, match=r"8-dimensional.*384"):
        write_documents(bad, store, EightDim())
    assert store.count_documents() == before  # nothing written


@pytest.mark.integration
def test_full_loop_on_milvus_lite_with_tenant_filter(tmp_path, embedded_docs):
    from milvus_haystack import MilvusHybridRetriever

    store = milvus_document_store(str(tmp_path / "loop.db"))
    write_documents(embedded_docs, store)
    llm = ScriptedChatGenerator([search("zzzz qqqq"), search("Big Stone Gap film director"), answer("Wise County.")])
    pipeline = build_loop_pipeline(
        AgenticRouter(chat_generator=llm),
        SafeRetriever(MilvusHybridRetriever(document_store=store)),
        query_embedder=MiniLMTextEmbedder(),
    )
    result = pipeline.run({"controller": {"query": QUESTION, "filters": TENANT}})["result"]
    assert result["terminated_by"] == "answered"
    assert result["documents"] and all(d.meta["kind"] == "place" for d in result["documents"])
    assert [s["action"] for s in result["tool_history"]] == ["search", "search", "answer"]


@pytest.mark.integration
def test_bridge_router_reads_titles_from_milvus(tmp_path, embedded_docs):
    from haystack_agentic.components.routers.bridge_entity_router import BridgeEntityRouter

    store = milvus_document_store(str(tmp_path / "b.db"))
    write_documents(embedded_docs, store)
    router = BridgeEntityRouter(document_store=store)
    router.warm_up()
    assert router._indexed_count == len(DOCS)


@pytest.mark.integration
def test_a_milvus_store_made_before_its_collection_is_reopened_only_when_rows_exist(tmp_path, embedded_docs):
    from haystack_agentic.document_stores.milvus_support import reopened_if_stale

    uri = str(tmp_path / "stale.db")
    early = milvus_document_store(uri)  # before any collection: milvus-haystack remembers "no collection"
    assert reopened_if_stale(early) is early  # nothing there yet
    write_documents(embedded_docs, milvus_document_store(uri))  # another instance creates it and writes
    assert early.count_documents() == 0  # the stale instance does not see them
    fresh = reopened_if_stale(early)
    assert fresh is not early and fresh.count_documents() == len(DOCS)
    assert reopened_if_stale(fresh) is fresh


@pytest.mark.integration
def test_cli_index_and_ask_on_milvus_lite(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HAYSTACK_AGENTIC_CACHE", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "docs"
    folder.mkdir()
    for doc in DOCS:
        (folder / f"{doc.id}.txt").write_text(f"{doc.meta['title']}\n{doc.content}")
    (folder / "page.html").write_text(
        "<html><body><p>Gamma is the third letter of the Greek alphabet.</p></body></html>"
    )
    uri = str(tmp_path / "cli.db")
    assert main(["index", str(folder), "--backend", "milvus", "--uri", uri, "--quiet"]) == 0
    assert f"({len(DOCS) + 1} in the store)" in capsys.readouterr().out
    assert main(["index", str(folder), "--backend", "milvus", "--uri", uri, "--quiet"]) == 0
    assert f"({len(DOCS) + 1} in the store)" in capsys.readouterr().out  # idempotent
    from haystack_agentic.pipelines import loop_builder

    loaded = {}
    real = loop_builder.build_loop

    def spy(options, notify=None):
        pipeline = real(options, notify)
        loaded["pipeline"] = pipeline
        retriever = pipeline.get_component("retriever")
        assert retriever.document_store.connection_args["uri"] == uri
        # swap the SmolLM2 answerer for a scripted one: this test is about the store
        pipeline.get_component("answerer").chat_generator = ScriptedChatGenerator([{"text": "Adriana Trigiani"}])
        try:
            pipeline.remove_component("grounder")
            pipeline.connect("finish.value", "result.state")
        except ValueError:
            pass
        return pipeline

    monkeypatch.setattr(loop_builder, "build_loop", spy)
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
    assert out["tool_history"][0]["returned_chunk_ids"]


@pytest.mark.integration
def test_cli_dimension_mismatch_is_one_line(tmp_path, capsys):
    uri = str(tmp_path / "dim.db")
    store = milvus_document_store(uri)
    store.write_documents([Document(content="x", embedding=[0.5] * 8)])
    store.client.close()
    folder = tmp_path / "d"
    folder.mkdir()
    (folder / "a.txt").write_text("Alpha is a letter.")
    assert main(["index", str(folder), "--backend", "milvus", "--uri", uri, "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "384" in err and "8-dimensional" in err and "Traceback" not in err


# --- in-memory persistence and indexing -------------------------------------------------------------------------


@pytest.mark.integration  # the packaged MiniLM
def test_in_memory_store_with_embeddings_saves_and_loads(tmp_path, embedded_docs):
    from haystack.components.retrievers.in_memory import InMemoryEmbeddingRetriever

    store = InMemoryDocumentStore()
    write_documents(embedded_docs, store)
    store.save_to_disk(str(tmp_path / "s.json"))
    loaded = InMemoryDocumentStore.load_from_disk(str(tmp_path / "s.json"))
    assert loaded.count_documents() == len(DOCS)
    q = next(d for d in embedded_docs if d.id == "stonehenge").embedding
    assert InMemoryEmbeddingRetriever(loaded).run(query_embedding=q, top_k=1)["documents"][0].id == "stonehenge"
    assert InMemoryBM25Retriever(loaded).run(query="Stonehenge", top_k=1)["documents"][0].id == "stonehenge"


def test_convert_files_gives_stable_ids(tmp_path):
    (tmp_path / "a.txt").write_text("Alpha is a letter. " * 300)
    (tmp_path / "b.md").write_text("# Beta\nBeta is another letter.")
    (tmp_path / "c.html").write_text("<html><body><p>Gamma is a letter.</p></body></html>")
    first = convert_files(collect_files(tmp_path))
    second = convert_files(collect_files(tmp_path))
    assert [d.id for d in first] == [d.id for d in second]
    assert len(first) >= 5  # the long text file is split


def test_indexing_pipeline_round_trips_and_writes(tmp_path):
    (tmp_path / "a.txt").write_text("Alpha is a letter.")
    store = InMemoryDocumentStore()
    pipeline = build_indexing_pipeline(store)
    load_yaml(pipeline.dumps())
    for _ in range(2):
        pipeline.run({"router": {"sources": [tmp_path / "a.txt"]}})
    assert store.count_documents() == 1
    assert store.filter_documents()[0].meta["sentence_spans"] == [0, 18]  # citations read them, not split again


def test_written_chunks_carry_their_sentence_spans(tmp_path):
    """`index` (files) and `write_documents` (Documents) store each chunk's sentence boundaries with it."""
    (tmp_path / "a.txt").write_text("Alpha is a letter.\n\nIt comes first.")
    store = InMemoryDocumentStore()
    write_documents([*convert_files(collect_files(tmp_path)), Document(content="Beta. Gamma.")], store)
    written = {d.content: d.meta["sentence_spans"] for d in store.filter_documents()}
    assert written["Beta. Gamma."] == [0, 5, 6, 12]
    [(text, spans)] = [(c, s) for c, s in written.items() if c.startswith("Alpha")]
    assert [text[a:b] for a, b in zip(spans[::2], spans[1::2], strict=True)] == [
        "Alpha is a letter.",
        "It comes first.",
    ]


@pytest.mark.integration
def test_cli_index_with_the_packaged_milvus_indexing_pipeline(tmp_path, capsys):
    """`index PATH --pipeline pipelines/indexing_milvus.yml --uri FILE`, twice: same count (overwrite)."""
    from haystack_agentic.cli.main import main
    from haystack_agentic.resources import pipeline_path

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "town.html").write_text("<html><body><p>The mayor of Fnordville is Zorblax Quintessa.</p></body></html>")
    (docs / "notes.md").write_text("# Notes\n\nFnordville lies on the river Blort.")
    uri = str(tmp_path / "index.db")
    yaml_path = str(pipeline_path("indexing_milvus"))
    assert main(["index", str(docs), "--pipeline", yaml_path, "--uri", uri, "--quiet"]) == 0
    first = capsys.readouterr().out
    assert main(["index", str(docs), "--pipeline", yaml_path, "--uri", uri, "--quiet"]) == 0
    second = capsys.readouterr().out
    assert "(2 in the store)" in first and "(2 in the store)" in second
    store = milvus_document_store(uri)
    contents = " ".join(d.content for d in store.filter_documents())
    assert "Zorblax Quintessa" in contents and "river Blort" in contents
    assert all(len(d.embedding or []) == 384 for d in store.filter_documents())
    # JSONL is refused by a converter pipeline, before anything is written.
    (docs / "qa.jsonl").write_text("{}\n")
    assert main(["index", str(docs), "--pipeline", yaml_path, "--uri", uri, "--quiet"]) == 2
    assert "Index HotpotQA-format JSONL without --pipeline" in capsys.readouterr().err


@pytest.mark.integration
def test_cli_index_embed_in_memory_then_ask_with_dense_retrieval(tmp_path, capsys, monkeypatch):
    """In-memory dense: `index --embed` saves MiniLM embeddings; the dense pipeline answers from the saved file."""
    from haystack_agentic.cli.main import main
    from haystack_agentic.resources import pipeline_path

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "town.txt").write_text("The mayor of Fnordville is Zorblax Quintessa.")
    (docs / "river.txt").write_text("The river Blort floods every spring.")
    store = tmp_path / "dense.json"
    for _ in range(2):  # idempotent
        assert main(["index", str(docs), "--embed", "--store", str(store), "--quiet"]) == 0
        assert "(2 in the store)" in capsys.readouterr().out
    saved = InMemoryDocumentStore.load_from_disk(str(store)).filter_documents()
    assert all(len(d.embedding) == 384 for d in saved)
    pipeline = str(pipeline_path("agentic_rag_embedded_dense"))
    assert (
        main(["ask", "Who is the mayor of Fnordville?", "--pipeline", pipeline, "--store", str(store), "--json"]) == 0
    )
    result = json.loads(capsys.readouterr().out)
    assert result["tool_history"][0]["returned_chunk_ids"]
    assert result["documents"][0]["content"].startswith("The mayor of Fnordville")  # dense ranking, best first
