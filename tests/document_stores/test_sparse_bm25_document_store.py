# SPDX-License-Identifier: Apache-2.0
"""SparseBM25DocumentStore gives InMemoryBM25Retriever's results: same ids, scores, order, with and without filters."""

import uuid
from pathlib import Path

import pytest
from haystack import Document
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.document_stores.in_memory import InMemoryDocumentStore
from haystack.document_stores.types import DuplicatePolicy

from haystack_agentic.document_stores.sparse_bm25_document_store import SparseBM25DocumentStore, equality_preselection
from haystack_agentic.indexing.hotpotqa import hotpotqa_documents, load_hotpotqa_questions

DATA = Path(__file__).resolve().parents[2] / "examples" / "data" / "hotpotqa_dev_sample.jsonl"


def _corpus() -> tuple[list[Document], list[str]]:
    rows = load_hotpotqa_questions(DATA)[:25]
    docs = hotpotqa_documents(rows, title_in_content=True)
    for number, doc in enumerate(docs):
        doc.meta.update({"n": number, "parity": number % 2, "day": f"2024-01-{1 + number % 28:02d}"})
    # Exact duplicates of content under other ids make BM25 ties: their order must match too.
    twins = [Document(id=f"twin-{i}", content=docs[i].content, meta=dict(docs[i].meta)) for i in range(0, 40, 4)]
    empty = [Document(id="no-content", content=None, meta={"title": "x"}), Document(id="blank", content="")]
    questions = [r["question"] for r in rows[:10]]
    return [*docs, *twins, *empty], questions + [d.meta["title"] for d in docs[:30:3]] + ["zzzz unknownword"]


def _pair(algorithm: str = "BM25L", parameters: dict | None = None, **kwargs):
    docs, queries = _corpus()
    plain = InMemoryDocumentStore(bm25_algorithm=algorithm, bm25_parameters=parameters, index=f"p-{uuid.uuid4()}")
    sparse = SparseBM25DocumentStore(
        bm25_algorithm=algorithm, bm25_parameters=parameters, index=f"s-{uuid.uuid4()}", **kwargs
    )
    for store in (plain, sparse):
        store.write_documents([Document.from_dict(d.to_dict()) for d in docs])
    return plain, sparse, queries


def _same(plain, sparse, query, **kwargs):
    expected = InMemoryBM25Retriever(plain).run(query=query, **kwargs)["documents"]
    got = InMemoryBM25Retriever(sparse).run(query=query, **kwargs)["documents"]
    assert [d.id for d in got] == [d.id for d in expected], query
    assert [d.score for d in got] == pytest.approx([d.score for d in expected], rel=1e-12, abs=1e-12)
    assert [d.meta for d in got] == [d.meta for d in expected]
    return got


FILTERS = [
    {"field": "meta.parity", "operator": "==", "value": 1},
    {
        "operator": "AND",
        "conditions": [
            {"field": "meta.parity", "operator": "==", "value": 0},
            {"field": "meta.n", "operator": ">", "value": 100},
        ],
    },
    {
        "operator": "OR",
        "conditions": [
            {"field": "meta.n", "operator": "<", "value": 20},
            {"field": "meta.n", "operator": "in", "value": [50, 51, 52]},
        ],
    },
    {"operator": "NOT", "conditions": [{"field": "meta.parity", "operator": "==", "value": 1}]},
    {"field": "meta.day", "operator": "==", "value": "2024-01-05"},
    {"field": "meta.day", "operator": ">=", "value": "2024-01-20"},
    {"field": "meta.n", "operator": "==", "value": 10_000},
]


@pytest.mark.parametrize("algorithm", ["BM25L", "BM25Plus", "BM25Okapi"])
def test_unfiltered_results_equal_the_in_memory_store(algorithm):
    plain, sparse, queries = _pair(algorithm)
    for query in queries:
        for top_k in (1, 5, 12):
            _same(plain, sparse, query, top_k=top_k)


@pytest.mark.parametrize("filters", FILTERS)
def test_filtered_results_equal_the_in_memory_store(filters):
    plain, sparse, queries = _pair()
    for query in queries:
        _same(plain, sparse, query, top_k=5, filters=filters)


def test_title_filters_of_the_bridge_policy_equal_the_in_memory_store():
    plain, sparse, queries = _pair()
    titles = sorted({d.meta["title"] for d in plain.filter_documents() if d.meta.get("title")})[:40]
    for title in titles:
        title_filter = {"field": "meta.title", "operator": "==", "value": title}
        for query in (title, queries[0]):
            _same(plain, sparse, query, top_k=1, filters=title_filter)
            _same(plain, sparse, query, top_k=3, filters={"operator": "AND", "conditions": [title_filter]})


def test_parameters_scale_score_and_return_embedding_are_honoured():
    plain, sparse, queries = _pair("BM25L", {"k1": 1.2, "b": 0.6, "delta": 0.3})
    for query in queries[:5]:
        _same(plain, sparse, query, top_k=5, scale_score=True)
    docs = [Document(id="e", content="embedded text", embedding=[0.1, 0.2])]
    for flag in (True, False):
        store = SparseBM25DocumentStore(return_embedding=flag)
        store.write_documents(docs)
        got = store.bm25_retrieval("embedded", top_k=1)[0]
        assert (got.embedding is not None) is flag


def test_changes_to_the_documents_are_seen():
    plain, sparse, queries = _pair()
    extra = Document(id="new", content="Greenwich Village Greenwich Village Trigiani", meta={"parity": 1})
    for store in (plain, sparse):
        store.write_documents([extra])
        replacement = Document(id="new", content="a different text entirely about rivers", meta={"parity": 1})
        store.write_documents([replacement], policy=DuplicatePolicy.OVERWRITE)
        store.delete_documents(["twin-0"])
    for query in ("Greenwich Village", "rivers", queries[1]):
        _same(plain, sparse, query, top_k=5)
    for store in (plain, sparse):
        store.update_by_filter({"field": "meta.parity", "operator": "==", "value": 1}, {"parity": 7})
    _same(plain, sparse, queries[1], top_k=5, filters={"field": "meta.parity", "operator": "==", "value": 7})
    for store in (plain, sparse):
        store.delete_all_documents()
    assert sparse.bm25_retrieval("rivers") == plain.bm25_retrieval("rivers") == []


def test_writes_through_a_plain_store_sharing_the_index_are_seen():
    index = f"shared-{uuid.uuid4()}"
    sparse = SparseBM25DocumentStore(index=index)
    sparse.write_documents([Document(id="a", content="apples and pears")])
    assert [d.id for d in sparse.bm25_retrieval("pears")] == ["a"]
    InMemoryDocumentStore(index=index).write_documents([Document(id="b", content="pears pears pears")])
    assert [d.id for d in sparse.bm25_retrieval("pears")] == ["b", "a"]


def test_malformed_filters_and_empty_query_fail_as_in_haystack():
    _, sparse, _ = _pair()
    with pytest.raises(ValueError, match="Invalid filter syntax"):
        sparse.bm25_retrieval("x", filters={"field": "meta.n", "value": 1})
    with pytest.raises(ValueError, match="non-empty"):
        sparse.bm25_retrieval("")


def test_loads_store_files_saved_by_the_in_memory_store(tmp_path):
    plain, _, queries = _pair()
    path = tmp_path / "store.json"
    plain.save_to_disk(str(path))
    loaded = SparseBM25DocumentStore.load_from_disk(str(path))
    assert isinstance(loaded, SparseBM25DocumentStore) and loaded.count_documents() == plain.count_documents()
    _same(plain, loaded, queries[0], top_k=5)
    again = tmp_path / "again.json"
    loaded.save_to_disk(str(again))
    assert InMemoryDocumentStore.load_from_disk(str(again)).count_documents() == plain.count_documents()
    with pytest.raises(FileNotFoundError):
        SparseBM25DocumentStore.load_from_disk(str(tmp_path / "missing.json"))


def test_equality_preselection_only_takes_plain_equalities():
    assert equality_preselection({"field": "meta.title", "operator": "==", "value": "X"}) == ("title", "X")
    anded = {
        "operator": "AND",
        "conditions": [
            {"field": "meta.n", "operator": ">", "value": 1},
            {"field": "meta.k", "operator": "==", "value": 3},
        ],
    }
    assert equality_preselection(anded) == ("k", 3)
    assert equality_preselection({"field": "meta.day", "operator": "==", "value": "2024-01-05"}) is None
    assert equality_preselection({"operator": "OR", "conditions": [anded]}) is None
    assert equality_preselection({"field": "meta.a.b", "operator": "==", "value": 1}) is None
    assert equality_preselection({"field": "content", "operator": "==", "value": "x"}) is None


def test_a_dropped_store_does_not_wait_for_its_threads_where_the_garbage_collector_may_run_it():
    """Issue 39: the garbage collector can finalize a store in a thread that holds CPython's thread-shutdown lock
    (a thread being started); a finalizer that joins the executor's threads then deadlocks (Haystack's does; a
    hostile-replies benchmark process hung for good). Here the lock is held and the store finalized: it must return."""
    import asyncio
    import threading

    shutdown_lock = getattr(threading, "_shutdown_locks_lock", None)
    if shutdown_lock is None:
        pytest.skip("this Python's threading has no _shutdown_locks_lock (the deadlock needs it)")
    store = SparseBM25DocumentStore()
    store.write_documents([Document(content="Adriana Trigiani lives in Greenwich Village.")])
    found = asyncio.run(store.bm25_retrieval_async(query="Trigiani", top_k=1))  # the executor starts a thread
    assert found and store.executor._threads

    def finalize():
        with shutdown_lock:
            store.__del__()

    finalizer = threading.Thread(target=finalize, daemon=True)
    finalizer.start()
    finalizer.join(timeout=10)
    assert not finalizer.is_alive(), "the store's finalizer waited for its threads while the shutdown lock was held"
