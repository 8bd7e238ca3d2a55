# SPDX-License-Identifier: Apache-2.0
"""
Collections (issue 15): named, described subsets of one store (`meta.collection`), a run's scope over them, and the
LLM's choice of one. Real stores: the sparse in-memory BM25 store and Milvus Lite, each holding three collections.
"""

import json
import uuid
from typing import Any

import pytest
from conftest import answer, decide, load_yaml, search, tool_turn
from haystack import Document, Pipeline
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.core.errors import PipelineRuntimeError
from scripted_chat_generator import ScriptedChatGenerator

from haystack_agentic import AgenticRouter, BridgeEntityRouter, LoopController, LoopState, build_loop_pipeline
from haystack_agentic.cli.main import main
from haystack_agentic.components.generators.answerer import Answerer
from haystack_agentic.components.retrievers.safe_retriever import SafeRetriever
from haystack_agentic.document_stores.sparse_bm25_document_store import SparseBM25DocumentStore
from haystack_agentic.indexing.collections import (
    UnknownCollectionError,
    list_collections,
    normalise_scope,
    resolve_scope,
    tag_documents,
)

QUESTION = "Where is the director of the film Big Stone Gap based?"

#: Three collections. The question's answer needs a bridge from `films` (Big Stone Gap) to `people` (Trigiani);
#: `places` holds a namesake town and the neighbourhood the answer names.
CORPUS = {
    "films": (
        "Films and their makers",
        [
            ("Big Stone Gap (film)", "Big Stone Gap is a 2014 American romance film directed by Adriana Trigiani."),
            ("Kingston Morning", "Kingston Morning is a 2010 film set in Kingston, shot by a director from Ohio."),
        ],
    ),
    "people": (
        "Biographies",
        [
            ("Adriana Trigiani", "Adriana Trigiani is an author who lives in Greenwich Village."),
            ("Ed Gein", "Ed Gein was an American murderer from Plainfield, Wisconsin."),
        ],
    ),
    "places": (
        "Towns and neighbourhoods",
        [
            ("Big Stone Gap, Virginia", "Big Stone Gap is a town in Wise County, Virginia, with a film festival."),
            ("Greenwich Village", "Greenwich Village is a neighbourhood of Manhattan, New York City."),
        ],
    ),
}


def corpus_documents() -> list[Document]:
    docs = []
    for name, (description, pages) in CORPUS.items():
        plain = [Document(content=text, meta={"title": title}) for title, text in pages]
        docs.extend(tag_documents(plain, name, description))
    return docs


def collection_of(doc: Document) -> str:
    return doc.meta["collection"]


@pytest.fixture
def sparse_store() -> SparseBM25DocumentStore:
    store = SparseBM25DocumentStore(index=f"collections-{uuid.uuid4().hex}")
    store.write_documents(corpus_documents())
    return store


def bridge_loop(store: Any, retriever: Any, query_embedder: Any = None) -> Pipeline:
    router = BridgeEntityRouter(document_store=store, first_top_k=2, follow_up_top_k=1, max_follow_ups=2)
    answerer = Answerer(chat_generator=ScriptedChatGenerator([{"text": "From the chunks."}]))
    return build_loop_pipeline(
        router,
        retriever,
        controller=LoopController(max_iterations=5),
        answerer=answerer,
        query_embedder=query_embedder,
        check_evidence=False,
    )


def run(pipeline: Pipeline, collections: Any = None, **inputs: Any) -> dict[str, Any]:
    data = {"query": QUESTION, **inputs}
    if collections is not None:
        data["collections"] = collections
    return pipeline.run({"controller": data})["result"]


def searched_queries(result: dict[str, Any]) -> list[str]:
    return [s["query"] for s in result["tool_history"] if s["action"] == "search"]


# --- the store side -----------------------------------------------------------------------------------------


def test_list_collections_reads_names_descriptions_and_counts(sparse_store):
    known = list_collections(sparse_store)
    assert list(known) == ["films", "people", "places"]
    assert [(k.description, k.documents) for k in known.values()] == [
        ("Films and their makers", 2),
        ("Biographies", 2),
        ("Towns and neighbourhoods", 2),
    ]


def test_scope_shapes_and_the_unknown_name_error(sparse_store):
    known = list_collections(sparse_store)
    assert normalise_scope("all") == "all" and normalise_scope(["people", "people"]) == ("people",)
    assert resolve_scope("all", known) == {n: k.description for n, k in known.items()}
    assert resolve_scope(["people"], known) == {"people": "Biographies"}
    with pytest.raises(UnknownCollectionError, match=r"'manuals'.*films, people, places"):
        resolve_scope(["people", "manuals"], known)
    for bad in ([], 3, ["all", "people"], [""], "x\x1b[31m"):
        with pytest.raises(ValueError):
            normalise_scope(bad)


def test_same_file_in_two_collections_keeps_both_and_reindex_replaces_only_its_own(tmp_path):
    from haystack_agentic.indexing.indexer import index_files

    store = SparseBM25DocumentStore(index=f"collections-{uuid.uuid4().hex}")
    note = tmp_path / "note.txt"
    note.write_text("The release ships on Monday.", encoding="utf-8")
    index_files([note], store, collection="docs", collection_description="Product docs")
    index_files([note], store, collection="tickets")
    assert {n: k.documents for n, k in list_collections(store).items()} == {"docs": 1, "tickets": 1}
    note.write_text("The release ships on Tuesday.", encoding="utf-8")
    result = index_files([note], store, collection="docs")  # replaces the docs chunk only; keeps the description
    assert result.removed == 1
    known = list_collections(store)
    assert known["docs"].description == "Product docs" and known["tickets"].documents == 1
    contents = {d.meta["collection"]: d.content for d in store.filter_documents()}
    assert "Tuesday" in contents["docs"] and "Monday" in contents["tickets"]
    index_files([note], store, collection="docs", collection_description="Manuals")  # re-described everywhere
    assert list_collections(store)["docs"].description == "Manuals"


# --- a run's scope, on the bridge policy (its title index included) -----------------------------------------


def test_scope_of_one_never_returns_other_collections_even_through_the_title_index(sparse_store):
    pipeline = bridge_loop(sparse_store, SafeRetriever(InMemoryBM25Retriever(sparse_store)))
    result = run(pipeline, "films")
    assert result["documents"] and {collection_of(d) for d in result["documents"]} == {"films"}
    # "Adriana Trigiani" is the title of a `people` page: a films-only run must not follow (or reveal) it.
    assert "Adriana Trigiani" not in searched_queries(result)
    assert all(s["collections"] == ["films"] for s in result["tool_history"] if s["action"] == "search")
    assert result["metadata"]["collections"] == ["films"]
    # The same run over films and people does follow the bridge into people: the scope above is what held it back.
    both = run(pipeline, ["films", "people"])
    assert "Adriana Trigiani" in searched_queries(both)
    assert {collection_of(d) for d in both["documents"]} == {"films", "people"}


def test_all_searches_everything_and_scope_is_anded_with_filters(sparse_store):
    pipeline = bridge_loop(sparse_store, SafeRetriever(InMemoryBM25Retriever(sparse_store)))
    everything = run(pipeline, "all")
    assert {collection_of(d) for d in everything["documents"]} >= {"films", "people"}
    assert everything["tool_history"][0]["collections"] == ["films", "people", "places"]
    towns = {"field": "meta.title", "operator": "==", "value": "Big Stone Gap, Virginia"}
    scoped = run(pipeline, ["films", "places"], filters=towns)
    assert [d.meta["title"] for d in scoped["documents"]] == ["Big Stone Gap, Virginia"]
    assert run(pipeline, ["films"], filters=towns)["documents"] == []


def test_unknown_collection_is_a_clear_error_listing_the_known_ones(sparse_store):
    pipeline = bridge_loop(sparse_store, SafeRetriever(InMemoryBM25Retriever(sparse_store)))
    with pytest.raises(PipelineRuntimeError) as raised:
        run(pipeline, ["films", "manuals"])
    assert "Unknown collection(s) 'manuals': the store's collections are films, people, places" in str(
        raised.value.__cause__
    )
    with pytest.raises(ValueError, match="no document store to read them from"):
        LoopController().run(query=QUESTION, collections="films")


# --- the LLM's choice ---------------------------------------------------------------------------------------


def tools_loop(store: Any, script: list[dict[str, Any]], mode: str = "tools") -> tuple[Pipeline, Any]:
    llm = ScriptedChatGenerator(script, per_call=mode == "json")
    router = AgenticRouter(
        chat_generator=llm, mode=mode, search_question_first=False
    )  # the scripts decide every search
    answer_llm = ScriptedChatGenerator([{"text": "From the chunks."}]) if mode == "json" else None
    answerer = Answerer(chat_generator=answer_llm)
    pipeline = build_loop_pipeline(
        router,
        SafeRetriever(InMemoryBM25Retriever(store)),
        controller=LoopController(max_iterations=5),
        answerer=answerer,
        check_evidence=False,
    )
    return pipeline, llm


def test_tool_schema_offers_the_scope_with_descriptions_and_the_choice_is_honoured(sparse_store):
    script = [tool_turn("search", {"query": "Big Stone Gap", "collection": "places"}), answer("Wise County.")]
    pipeline, llm = tools_loop(sparse_store, script)
    result = run(pipeline, ["films", "places"])
    search_tool = next(t for t in llm.calls[0][2] if t.name == "search")
    assert search_tool.parameters["properties"]["collection"]["enum"] == ["films", "places"]
    assert "- films: Films and their makers" in search_tool.description
    assert "- places: Towns and neighbourhoods" in search_tool.description and "people" not in search_tool.description
    step = result["tool_history"][0]
    assert step["action"] == "search" and step["collections"] == ["places"]
    assert result["documents"] and {collection_of(d) for d in result["documents"]} == {"places"}


def test_out_of_scope_choice_is_a_tool_error_and_the_run_goes_on(sparse_store):
    script = [
        tool_turn("search", {"query": "Adriana Trigiani", "collection": "people"}),
        search("Big Stone Gap"),
        answer("A 2014 film."),
    ]
    pipeline, llm = tools_loop(sparse_store, script)
    result = run(pipeline, ["films"])
    assert [s["action"] for s in result["tool_history"]] == ["invalid", "search", "answer"]
    refused = result["tool_history"][0]
    assert "'people' is not one you may search; choose one of: films" in refused["result"]
    assert result["terminated_by"] == "answered"
    assert {collection_of(d) for d in result["documents"]} == {"films"}
    tool_error = llm.calls[1][0][-1]
    assert tool_error.tool_call_result.error and "not one you may search" in tool_error.tool_call_result.result


def test_no_scope_means_no_collection_argument(sparse_store):
    pipeline, llm = tools_loop(sparse_store, [tool_turn("search", {"query": "x", "collection": "films"}), answer("A.")])
    result = run(pipeline)
    assert "collection" not in next(t for t in llm.calls[0][2] if t.name == "search").parameters["properties"]
    assert result["tool_history"][0]["action"] == "invalid"


def test_json_mode_decision_names_a_collection(sparse_store):
    script = [
        decide("search", query="Trigiani", collection="places", reasoning="wrong one"),
        decide("search", query="Trigiani", collection="people", reasoning="a person"),
        decide("generate", reasoning="enough"),
    ]
    pipeline, llm = tools_loop(sparse_store, script, mode="json")
    result = run(pipeline, ["films", "people"])
    history = result["tool_history"]
    assert [s["action"] for s in history[:3]] == ["invalid", "search", "generate"]
    assert "'places' is not one you may search" in history[0]["result"]
    assert history[1]["collections"] == ["people"]
    assert {collection_of(d) for d in result["documents"]} == {"people"}
    prompt = llm.calls[1][0][0].text
    assert "- people: Biographies" in prompt and "not one you may search" in prompt


# --- serialisation ------------------------------------------------------------------------------------------


def test_yaml_round_trip_keeps_the_scope(sparse_store, tmp_path):
    from haystack_agentic.pipelines.loop_builder import load_loop_pipeline

    router = BridgeEntityRouter(document_store=sparse_store, first_top_k=2, max_follow_ups=2)
    pipeline = build_loop_pipeline(
        router,
        SafeRetriever(InMemoryBM25Retriever(sparse_store)),
        controller=LoopController(max_iterations=5, document_store=sparse_store),
        check_evidence=False,
    )
    loaded = load_yaml(pipeline.dumps())
    controllers = [p.to_dict()["components"]["controller"] for p in (loaded, pipeline)]
    assert controllers[0] == controllers[1]
    result = run(loaded, "films")
    assert result["documents"] and {collection_of(d) for d in result["documents"]} == {"films"}
    # A YAML file without a store on the controller: load_loop_pipeline hands it the retriever's store.
    pipeline.get_component("controller").document_store = None
    path = tmp_path / "loop.yml"
    path.write_text(pipeline.dumps(), encoding="utf-8")
    from_file = load_loop_pipeline(path)
    from_file.get_component("retriever").document_store.write_documents(corpus_documents())
    assert {collection_of(d) for d in run(from_file, ["people"])["documents"]} == {"people"}
    state = LoopController(document_store=sparse_store).run(query=QUESTION, collections=["people"])["state"]
    assert LoopState.from_dict(json.loads(json.dumps(state.to_dict()))) == state


# --- Milvus Lite ------------------------------------------------------------------------------------------


@pytest.mark.integration
def test_milvus_lite_three_collections(tmp_path):
    from milvus_haystack import MilvusHybridRetriever

    from haystack_agentic.components.embedders.minilm_document_embedder import MiniLMDocumentEmbedder
    from haystack_agentic.components.embedders.minilm_text_embedder import MiniLMTextEmbedder
    from haystack_agentic.indexing.document_stores import milvus_document_store
    from haystack_agentic.indexing.indexer import write_documents

    store = milvus_document_store(str(tmp_path / "collections.db"))
    write_documents(corpus_documents(), store, MiniLMDocumentEmbedder())
    assert {n: k.documents for n, k in list_collections(store).items()} == {"films": 2, "people": 2, "places": 2}
    assert list_collections(store)["people"].description == "Biographies"
    pipeline = bridge_loop(store, SafeRetriever(MilvusHybridRetriever(document_store=store)), MiniLMTextEmbedder())
    films = run(pipeline, "films")
    assert films["documents"] and {collection_of(d) for d in films["documents"]} == {"films"}
    assert "Adriana Trigiani" not in searched_queries(films)
    both = run(pipeline, ["films", "people"])
    assert "Adriana Trigiani" in searched_queries(both)
    assert {collection_of(d) for d in run(pipeline, "all")["documents"]} >= {"films", "people"}
    with pytest.raises(PipelineRuntimeError, match="films, people, places"):
        run(pipeline, "manuals")


# --- CLI and serving -----------------------------------------------------------------------------------------


def test_cli_index_into_collections_and_list_them(tmp_path, capsys):
    for name in ("manuals", "tickets"):
        folder = tmp_path / name
        folder.mkdir()
        (folder / f"{name}.txt").write_text(f"The {name} say the device resets with the red button.", "utf-8")
    store = str(tmp_path / "store.json")
    args = ["--store", store, "--quiet"]
    assert (
        main(
            [
                "index",
                str(tmp_path / "manuals"),
                *args,
                "--collection",
                "manuals",
                "--collection-description",
                "Product manuals",
            ]
        )
        == 0
    )
    assert main(["index", str(tmp_path / "tickets"), *args, "--collection", "tickets"]) == 0
    capsys.readouterr()
    assert main(["collections", "--store", store, "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert listed == [
        {"name": "manuals", "description": "Product manuals", "documents": 1},
        {"name": "tickets", "description": "", "documents": 1},
    ]
    assert main(["collections", "--store", store]) == 0
    assert "manuals        1 chunk(s)  Product manuals" in capsys.readouterr().out
    assert main(["index", str(tmp_path / "tickets"), *args, "--collection-description", "x"]) == 2
    assert "needs --collection" in capsys.readouterr().err
    assert main(["index", str(tmp_path / "tickets"), *args, "--collection", "all"]) == 2


@pytest.mark.slow  # runs for many seconds
def test_a_pipeline_from_pipeline_loads_scopes_runs_after_fill_in_memory_store(tmp_path):
    # The README's "From YAML" flow (Pipeline.loads + fill_in_memory_store), then a run scoped to one collection.

    from haystack_agentic.loop_loading import fill_in_memory_store
    from haystack_agentic.resources import pipeline_path

    for name in ("manuals", "tickets"):
        folder = tmp_path / name
        folder.mkdir()
        (folder / f"{name}.txt").write_text(f"The {name} say the device resets with the red button.", "utf-8")
        assert main(["index", str(folder), "--store", str(tmp_path / "s.json"), "--quiet", "--collection", name]) == 0
    text = pipeline_path("agentic_rag_embedded_ungrounded").read_text(encoding="utf-8")
    pipeline = load_yaml(text)
    fill_in_memory_store(pipeline, tmp_path / "s.json")
    out = pipeline.run({"controller": {"query": "How does the device reset?", "collections": ["tickets"]}})
    assert {d.meta["collection"] for d in out["result"]["documents"]} == {"tickets"}


def test_served_inputs_carry_the_scope():
    from haystack_agentic.serving.agentic_loop_wrapper import AgenticLoopWrapper, BadRequest

    wrapper = AgenticLoopWrapper()
    assert wrapper._inputs({"query": "q"}, None, ["docs", "docs"]) == {
        "controller": {"query": "q", "collections": ("docs",)}
    }
    assert wrapper._inputs({"query": "q"}, None, "all")["controller"]["collections"] == "all"
    assert "collections" not in wrapper._inputs({"query": "q"}, None, None)["controller"]
    with pytest.raises(BadRequest, match="collections"):
        wrapper._inputs({"query": "q"}, None, [])


@pytest.mark.integration  # the evaluated configurations warm up the packaged MiniLM
def test_eval_reports_per_collection():
    from benchmarks.harness.runner import bridge_entity_config, build_store, run_eval
    from haystack_agentic.indexing.hotpotqa import load_hotpotqa_questions
    from haystack_agentic.resources import sample_corpus_path

    rows = load_hotpotqa_questions(sample_corpus_path())[:6]
    rows = [{**row, "collection": "first" if i < 3 else "second"} for i, row in enumerate(rows)]
    store = build_store(rows)
    assert {n: k.documents for n, k in list_collections(store).items()} == {"first": 30, "second": 30}
    configs = [bridge_entity_config(store, budget=6)]
    summary = run_eval(rows, configs, with_answer=False)["configs"]["bridge-entity"]["summary"]
    assert set(summary["by_collection"]) == {"first", "second"}
    for totals in summary["by_collection"].values():
        assert totals["questions"] == 3 and totals["foreign_chunk_rate"] == 0.0
        assert totals["all_gold_recall"] is not None


def test_streamed_progress_names_the_collections():
    from haystack_agentic.serving import progress_line

    step = {"iteration": 2, "action": "search", "query": "Trigiani", "collections": ["people"]}
    assert progress_line(step) == '2. search "Trigiani" in people\n'
