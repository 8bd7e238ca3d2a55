# SPDX-License-Identifier: Apache-2.0
import uuid

import pytest
from conftest import load_yaml
from haystack import Document
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.document_stores.in_memory import InMemoryDocumentStore
from scripted_chat_generator import ScriptedChatGenerator

from haystack_agentic import (
    AgenticRouter,
    Answerer,
    BridgeEntityRouter,
    LoopController,
    build_loop_pipeline,
)
from haystack_agentic.grounding.citations import strip_markers
from haystack_agentic.indexing.collections import and_filters

QUESTION = 'The director of the romantic comedy "Big Stone Gap" is based in what New York city?'


@pytest.fixture
def store():
    store = InMemoryDocumentStore(index=f"bridge-{uuid.uuid4()}")
    docs = [
        ("Big Stone Gap (film)", "Big Stone Gap is a 2014 American romantic comedy film directed by Adriana Trigiani."),
        (
            "Adriana Trigiani",
            "Adriana Trigiani is an Italian American author based in Greenwich Village, New York City.",
        ),
        ("Kingston Morning", "Kingston Morning is a romantic comedy song about New York."),
        ("Romantic comedy", "Romantic comedy is a genre of film that combines romance and comedy."),
    ]
    store.write_documents([Document(id=t, content=f"{t}\n{c}", meta={"title": t, "lang": "en"}) for t, c in docs])
    return store


def _pipeline(store, **router_kwargs):
    router = BridgeEntityRouter(document_store=store, **router_kwargs)
    return build_loop_pipeline(
        router,
        InMemoryBM25Retriever(store),
        controller=LoopController(max_iterations=4, chunk_cap=router.max_chunks),
        answerer=Answerer(chat_generator=ScriptedChatGenerator([{"text": "Greenwich Village"}], per_call=True)),
    )


def test_same_sockets_as_agentic_router(store):
    bridge = BridgeEntityRouter(document_store=store)
    llm = AgenticRouter(chat_generator=ScriptedChatGenerator([{"text": "x"}]))
    assert set(bridge.__haystack_output__._sockets_dict) == set(llm.__haystack_output__._sockets_dict)
    assert set(bridge.__haystack_input__._sockets_dict) == set(llm.__haystack_input__._sockets_dict)


@pytest.mark.integration  # the packaged MiniLM (the evidence check's embeddings)
def test_searches_question_then_follows_the_bridge_entity(store):
    result = _pipeline(store, first_top_k=1)
    out = result.run({"controller": {"query": QUESTION}})["result"]
    searches = [s for s in out["tool_history"] if s["action"] == "search"]
    assert searches[0]["query"] == QUESTION
    assert searches[1]["query"] == "Adriana Trigiani"
    assert searches[1]["returned_chunk_ids"] == ["Adriana Trigiani"]
    assert out["tool_history"][-1]["action"] == "answer"
    assert strip_markers(out["answer"]) == "Greenwich Village"
    assert out["terminated_by"] == "answered"
    assert out["iterations"] == len(out["tool_history"])
    assert out["usage"]["answer"]["calls"] == 1 and "controller" not in out["usage"]


@pytest.mark.integration  # the packaged MiniLM (the evidence check's embeddings)
def test_follow_up_is_scoped_to_the_title_and_the_run_filters(store):
    run_filters = {"field": "meta.lang", "operator": "==", "value": "en"}
    out = _pipeline(store, first_top_k=1).run({"controller": {"query": QUESTION, "filters": run_filters}})
    follow_up = [s for s in out["result"]["tool_history"] if s["action"] == "search"][1]
    assert follow_up["arguments"]["filters"] == {"field": "meta.title", "operator": "==", "value": "Adriana Trigiani"}
    # A run filter that excludes every document leaves nothing to follow, and no search escapes it.
    none = {"field": "meta.lang", "operator": "==", "value": "fr"}
    out = _pipeline(store, first_top_k=1).run({"controller": {"query": QUESTION, "filters": none}})["result"]
    assert out["documents"] == []
    searches = [s for s in out["tool_history"] if s["action"] == "search"]
    assert all(s["returned_chunk_ids"] == [] for s in searches)
    assert out["tool_history"][-1]["action"] == "give_up"
    assert out["terminated_by"] == "gave_up" and "no document matched" in strip_markers(out["answer"])
    assert "answer" not in out["usage"]  # the answer LLM is not asked to answer from nothing


def test_and_filters():
    a = {"field": "meta.a", "operator": "==", "value": 1}
    b = {"field": "meta.b", "operator": "==", "value": 2}
    assert and_filters(None, None) is None
    assert and_filters(a, None) == a
    assert and_filters(a, b) == {"operator": "AND", "conditions": [a, b]}
    either = {"operator": "OR", "conditions": [a, b]}  # Haystack's MERGE policy would drop `a` here
    assert and_filters(a, either) == {"operator": "AND", "conditions": [a, either]}


def test_title_index_follows_the_store(store):
    router = BridgeEntityRouter(document_store=store, first_top_k=1)
    router.warm_up()
    store.write_documents(
        [Document(id="gv", content="Greenwich Village\nA neighborhood.", meta={"title": "Greenwich Village"})]
    )
    chunks = [store.filter_documents({"field": "meta.title", "operator": "==", "value": "Adriana Trigiani"})[0]]
    proposals = [
        s["query"]
        for s in router._current_policy().next_searches("Where is she based?", chunks, ["Where is she based?"])
    ]
    assert "Greenwich Village" in proposals


@pytest.mark.integration  # the packaged MiniLM (the evidence check's embeddings)
def test_max_follow_ups_zero_is_one_search(store):
    out = _pipeline(store, first_top_k=2, max_follow_ups=0).run({"controller": {"query": QUESTION}})
    actions = [s["action"] for s in out["result"]["tool_history"]]
    assert actions == ["search", "answer"]


def test_yaml_round_trip_keeps_the_shared_store(store):
    pipeline = _pipeline(store)
    loaded = load_yaml(pipeline.dumps())
    assert loaded.get_component("router").document_store.index == store.index
    assert loaded.get_component("retriever").document_store.index == store.index
    again = load_yaml(loaded.dumps())
    assert again.to_dict() == loaded.to_dict()


def test_the_policy_scans_named_pages_first_and_follows_generic_pages_last(store):
    router = BridgeEntityRouter(document_store=store)
    assert router.warm_up() is None and router._current_policy().scan_named_first
    assert router._current_policy().generic_share == 0.05


def test_bad_parameters_raise(store):
    with pytest.raises(ValueError):
        BridgeEntityRouter(document_store=store, first_top_k=0)
    with pytest.raises(ValueError):
        BridgeEntityRouter(document_store=store, max_follow_ups=-1)


def test_a_store_that_caps_query_results_is_reported(store, caplog):
    class CappedStore:
        """Like milvus-haystack: filter_documents returns at most `cap` documents."""

        def __init__(self, inner, cap):
            self.inner, self.cap = inner, cap

        def count_documents(self):
            return self.inner.count_documents()

        def filter_documents(self, filters=None):
            return self.inner.filter_documents(filters)[: self.cap]

        def to_dict(self):
            return self.inner.to_dict()

    router = BridgeEntityRouter(document_store=CappedStore(store, 2))
    with caplog.at_level("WARNING"):
        router.warm_up()
    assert "titles of 2 of its 4 documents" in caplog.text


# --- tenants: the title index honours the run's filters ------------------------------------------------------------

TENANT_A = {"field": "meta.tenant", "operator": "==", "value": "a"}
TENANT_A_DOCS = [
    ("Big Stone Gap (film)", "Big Stone Gap is a 2014 American romantic comedy film directed by Adriana Trigiani."),
    ("Romantic comedy", "Romantic comedy is a genre of film that combines romance and comedy."),
]
#: Tenant B holds a document whose title tenant A's chunk mentions: A's runs must not notice it exists.
TENANT_B_DOCS = [
    ("Adriana Trigiani", "Adriana Trigiani is an Italian American author based in Greenwich Village, New York City."),
    ("Greenwich Village", "Greenwich Village is a neighbourhood of Lower Manhattan, New York City."),
]


def tenant_documents(with_b: bool) -> list[Document]:
    docs = [Document(id=f"a-{t}", content=f"{t}\n{c}", meta={"title": t, "tenant": "a"}) for t, c in TENANT_A_DOCS]
    if with_b:
        docs += [Document(id=f"b-{t}", content=f"{t}\n{c}", meta={"title": t, "tenant": "b"}) for t, c in TENANT_B_DOCS]
    return docs


def trace_of(out: dict) -> list[tuple]:
    """What a tenant sees of its run: every step's action, query, arguments and reasoning."""
    return [(s["action"], s.get("query"), s.get("arguments"), s.get("reasoning")) for s in out["tool_history"]]


def tenant_a_trace(store, retriever) -> list[tuple]:
    router = BridgeEntityRouter(document_store=store, first_top_k=1, max_follow_ups=2)
    pipeline = build_loop_pipeline(
        router,
        retriever,
        controller=LoopController(max_iterations=4, chunk_cap=router.max_chunks),
        answerer=Answerer(chat_generator=ScriptedChatGenerator([{"text": "New York"}], per_call=True)),
    )
    out = pipeline.run({"controller": {"query": QUESTION, "filters": TENANT_A}})["result"]
    assert all(d.meta["tenant"] == "a" for d in out["documents"])
    return trace_of(out)


@pytest.mark.integration  # the packaged MiniLM (the evidence check's embeddings)
def test_another_tenants_titles_do_not_change_a_run():
    """Finding 7 of issue 10: tenant A's trace is the same whether tenant B's documents exist or not."""
    alone = InMemoryDocumentStore(index=f"tenant-{uuid.uuid4()}")
    alone.write_documents(tenant_documents(with_b=False))
    shared = InMemoryDocumentStore(index=f"tenant-{uuid.uuid4()}")
    shared.write_documents(tenant_documents(with_b=True))
    expected = tenant_a_trace(alone, InMemoryBM25Retriever(alone))
    assert tenant_a_trace(shared, InMemoryBM25Retriever(shared)) == expected
    assert not any(
        isinstance(args, dict) and "Adriana Trigiani" in str(args.get("filters")) for _, _, args, _ in expected
    )


def test_the_policy_of_one_scope_only_knows_that_scopes_titles():
    shared = InMemoryDocumentStore(index=f"tenant-{uuid.uuid4()}")
    shared.write_documents(tenant_documents(with_b=True))
    router = BridgeEntityRouter(document_store=shared)
    scoped = router.policy_for(TENANT_A)
    assert scoped.knows_title("Big Stone Gap (film)")
    assert not scoped.knows_title("Adriana Trigiani")
    assert router.policy_for(None).knows_title("Adriana Trigiani")  # no run filters: the whole store


@pytest.mark.integration
def test_another_tenants_titles_do_not_change_a_run_on_milvus_lite(tmp_path):
    from milvus_haystack import MilvusSparseEmbeddingRetriever

    from haystack_agentic.components.retrievers.safe_retriever import SafeRetriever
    from haystack_agentic.indexing.document_stores import milvus_document_store
    from haystack_agentic.indexing.indexer import write_documents

    dim = 384  # the packaged stores' dense field; BM25 search does not read it

    def milvus_with(with_b: bool, name: str):
        store = milvus_document_store(str(tmp_path / f"{name}.db"))
        docs = [
            Document(id=d.id, content=d.content, meta=d.meta, embedding=[0.01] * dim) for d in tenant_documents(with_b)
        ]
        write_documents(docs, store)
        return store

    alone, shared = milvus_with(False, "alone"), milvus_with(True, "shared")
    expected = tenant_a_trace(alone, SafeRetriever(MilvusSparseEmbeddingRetriever(document_store=alone)))
    assert tenant_a_trace(shared, SafeRetriever(MilvusSparseEmbeddingRetriever(document_store=shared))) == expected


@pytest.mark.integration
def test_a_router_store_made_before_the_collection_existed_still_sees_its_titles(tmp_path):
    """A YAML pipeline gives the router its own MilvusDocumentStore; made before the retriever's instance created
    the collection, milvus-haystack kept counting 0 documents, so the bridge policy ran without any title."""
    from haystack_agentic.indexing.document_stores import milvus_document_store
    from haystack_agentic.indexing.indexer import write_documents

    uri = str(tmp_path / "late.db")
    router = BridgeEntityRouter(document_store=milvus_document_store(uri))  # the collection does not exist yet
    writer = milvus_document_store(uri)
    docs = [Document(id=d.id, content=d.content, meta=d.meta, embedding=[0.01] * 384) for d in tenant_documents(False)]
    write_documents(docs, writer)
    router.warm_up()
    assert router._indexed_count == len(docs)
    assert all(router._policy.knows_title(d.meta["title"]) for d in docs)
    reopened = router.document_store.to_dict()["init_parameters"]
    assert reopened["connection_args"]["uri"] == uri and reopened["collection_name"] == writer.collection_name
