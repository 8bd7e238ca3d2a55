# SPDX-License-Identifier: Apache-2.0
"""The loop as a Haystack pipeline: sync/async parity, YAML round trip, concurrency, bad input, chunk merging."""

import asyncio
import json
import time

import pytest
import yaml
from conftest import DOC_TEXT, QUESTION, ScriptedRetriever, actions, answer, calls, decide, load_yaml, search
from haystack import Document, Pipeline
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.core.errors import DeserializationError, PipelineRuntimeError
from scripted_chat_generator import ScriptedChatGenerator

from haystack_agentic import (
    AgenticRouter,
    Answerer,
    FallbackSynthesizer,
    LoopController,
    LoopLimits,
    LoopResultBuilder,
    LoopState,
    build_loop_pipeline,
)
from haystack_agentic.components.loop.loop_result_builder import RESULT_TYPES, result_to_dict
from haystack_agentic.grounding.citations import strip_markers
from haystack_agentic.pipelines.loop_pipeline import max_runs_for

HOPS = [search("Big Stone Gap film director"), search("Adriana Trigiani"), answer("Greenwich Village")]


def _sorted_connections(data: dict) -> dict:
    return {**data, "connections": sorted(data["connections"], key=lambda c: (c["sender"], c["receiver"]))}


# --- sync / async -------------------------------------------------------------------------------------------


async def test_run_and_run_async_give_the_same_result(build_loop):
    loop = build_loop(HOPS, answer_script=[{"text": "Greenwich Village, New York City"}])
    sync_result = loop.run()
    loop.answer_llm.reset()
    async_result = await loop.run_async()
    assert sync_result == async_result
    assert strip_markers(sync_result["answer"]) == "Greenwich Village, New York City"
    assert actions(sync_result) == ["search", "search", "answer"]
    json.dumps(result_to_dict(sync_result))


async def test_run_and_run_async_agree_at_max_iterations_and_in_json_mode(build_loop):
    exhausted = build_loop(
        [search("Adriana Trigiani"), search("Big Stone Gap")],
        max_iterations=2,
        fallback_script=[{"text": "Greenwich Village"}],
    )
    first = exhausted.run()
    assert first == await exhausted.run_async()
    assert (first["terminated_by"], strip_markers(first["answer"])) == ("max_iterations", "Greenwich Village")

    script = [decide("search", query="Adriana Trigiani"), decide("generate")]
    sync_loop = build_loop(script, mode="json", answer_script=[{"text": "Greenwich Village"}])
    async_loop = build_loop(script, mode="json", answer_script=[{"text": "Greenwich Village"}])
    assert sync_loop.run() == await async_loop.run_async()


# --- serialisation ------------------------------------------------------------------------------------------


def _full_pipeline(store) -> Pipeline:
    llm = ScriptedChatGenerator(HOPS, model="controller-model")
    return build_loop_pipeline(
        AgenticRouter(chat_generator=llm, temperature=0.1, system_prompt="Answer {{ question }}."),
        InMemoryBM25Retriever(store),
        controller=LoopController(max_iterations=4, chunk_cap=5),
        answerer=Answerer(
            chat_generator=ScriptedChatGenerator([{"text": "Greenwich Village, NYC"}], per_call=True), temperature=0.2
        ),
        fallback=FallbackSynthesizer(
            chat_generator=ScriptedChatGenerator([{"text": "fb"}], per_call=True), temperature=0.3
        ),
        metadata={"name": "agentic-rag-test"},
    )


def test_dumps_loads_round_trip(store):
    pipeline = _full_pipeline(store)
    dumped = pipeline.dumps()
    assert isinstance(yaml.safe_load(dumped), dict)  # plain data only
    loaded = load_yaml(dumped)
    reloaded = load_yaml(loaded.dumps())
    assert loaded.to_dict() == reloaded.to_dict()
    assert loaded.dumps() == reloaded.dumps()
    # The builder adds connections in another order than loading yields them.
    assert _sorted_connections(pipeline.to_dict()) == _sorted_connections(loaded.to_dict())
    assert loaded.to_dict()["max_runs_per_component"] == max_runs_for(4)
    router = yaml.safe_load(dumped)["components"]["router"]["init_parameters"]
    assert router["chat_generator"]["init_parameters"]["script"] == HOPS


@pytest.mark.integration  # the packaged MiniLM (the evidence check's embeddings)
def test_loaded_pipeline_runs_like_the_original(store):
    pipeline = _full_pipeline(store)
    loaded = load_yaml(pipeline.dumps())
    original = pipeline.run({"controller": {"query": QUESTION}})["result"]
    again = loaded.run({"controller": {"query": QUESTION}})["result"]
    assert original == again
    assert strip_markers(original["answer"]) == "Greenwich Village, NYC"
    assert original["tool_history"][1]["returned_chunk_ids"][0] == "trigiani"


def test_loading_without_the_allow_list_is_refused_although_the_package_is_imported(store):
    with pytest.raises(DeserializationError, match="haystack_agentic"):
        Pipeline.loads(_full_pipeline(store).dumps())


# --- concurrency --------------------------------------------------------------------------------------------


@pytest.mark.slow  # asserts on wall-clock time
async def test_one_pipeline_serves_concurrent_runs_unmixed(build_loop):
    # Each run searches for its own question and answers with it and the first line of its own search result.
    script = [
        {
            "tool_calls": [{"tool_name": "search", "arguments": {"query": "{{ question }}", "top_k": 2}}],
            "template": True,
        },
        {
            "tool_calls": [{"tool_name": "answer", "arguments": {"text": "{{ question }} => {{ last_message }}"}}],
            "template": True,
        },
    ]
    loop = build_loop(script, latency=0.05)
    questions = [
        f"Where is Adriana Trigiani based? ({i})" if i % 2 else f"What is Stonehenge? ({i})" for i in range(20)
    ]
    start = time.perf_counter()
    results = await asyncio.gather(*(loop.run_async(q) for q in questions))
    elapsed = time.perf_counter() - start
    for question, result in zip(questions, results, strict=True):
        assert result["terminated_by"] == "answered"
        assert strip_markers(result["answer"]).startswith(f'{question} => 2 result(s) for "{question}":')
        assert [s["query"] for s in result["tool_history"] if s["action"] == "search"] == [question]
        expected_top = "trigiani" if "Trigiani" in question else "stonehenge"
        assert result["tool_history"][0]["returned_chunk_ids"][0] == expected_top
        assert result["documents"][0].id == expected_top
        assert result["iterations"] == 2 and calls(result, "controller") == 2
    assert len(loop.llm.calls) == 40
    assert elapsed < 40 * 0.05, "runs overlapped (serial would take 2 s)"


# --- bad input ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "query, message",
    [
        ("   ", "The query is empty"),
        ("", "The query is empty"),
        (42, "must be a string, got int"),
        (["q"], "must be a string, got list"),
    ],
)
def test_blank_or_non_string_query_raises_a_clear_error(build_loop, query, message):
    loop = build_loop([answer("x")])
    with pytest.raises(PipelineRuntimeError, match=message):
        loop.pipeline.run({"controller": {"query": query}})
    assert loop.llm.calls == []


async def test_blank_query_raises_in_run_async_too(build_loop):
    with pytest.raises(PipelineRuntimeError, match="The query is empty"):
        await build_loop([answer("x")]).pipeline.run_async({"controller": {"query": " "}})


def test_missing_query_raises(build_loop):
    loop = build_loop([answer("x")])
    # Haystack reports the controller as blocked (no input); nothing runs.
    with pytest.raises(PipelineRuntimeError):
        loop.pipeline.run({"controller": {}})
    with pytest.raises(PipelineRuntimeError):
        loop.pipeline.run({})
    assert loop.llm.calls == []


def test_controller_rejects_missing_query_and_bad_filters():
    with pytest.raises(ValueError, match="needs a `query`"):
        LoopController().run()
    with pytest.raises(ValueError, match="filters must be a dict"):
        LoopController().run(query="q", filters=[("a", 1)])


def test_query_is_stripped_and_filters_start_the_state():
    filters = {"field": "meta.kind", "operator": "==", "value": "person"}
    state = LoopController(max_iterations=3, chunk_cap=7).run(query="  q  ", filters=filters)["state"]
    assert (state.question, state.limits, state.filters, state.iteration) == (
        "q",
        LoopLimits(max_iterations=3, chunk_cap=7),
        filters,
        0,
    )


@pytest.mark.parametrize("kwargs", [{"max_iterations": 0}, {"chunk_cap": 0}, {"chunk_preview_chars": 0}])
def test_controller_limits_must_be_positive(kwargs):
    with pytest.raises(ValueError, match="at least 1"):
        LoopController(**kwargs)


def test_controller_ignores_documents_without_a_pending_search():
    state = LoopState(question="q", iteration=1, limits=LoopLimits(max_iterations=5))
    out = LoopController().run(state=state, documents=[Document(id="x", content="x", score=1.0)])
    assert out["state"].chunks == () and out["state"].iteration == 2


def test_controller_routes_to_exhausted_at_the_limit():
    state = LoopState(question="q", iteration=2, limits=LoopLimits(max_iterations=3))
    assert set(LoopController().run(state=state)) == {"exhausted"}
    assert LoopController().run(state=state)["exhausted"].iteration == 3


def test_search_result_preview_is_cut_to_chunk_preview_chars():
    controller = LoopController(chunk_preview_chars=10)
    text = controller.format_search_result("q", [Document(id="a", content="0123456789ABCDEF", meta={"title": "T"})])
    assert text == '1 result(s) for "q":\n\n[1] id=a title=T\n0123456789 [...]'


def test_result_builder_reports_an_unended_state_as_an_error():
    result = LoopResultBuilder().run(state=LoopState(question="q"))
    assert result["terminated_by"] == "error"
    assert result["error"] == "The loop ended without a termination reason."


# --- chunk merging across searches --------------------------------------------------------------------------


def test_duplicate_chunk_ids_across_searches_are_kept_once_with_the_highest_score(build_loop):
    retriever = ScriptedRetriever(
        {
            "Big Stone Gap": [("bsg", 0.4), ("trigiani", 0.2)],
            "Adriana Trigiani": [("trigiani", 0.9), ("bsg", 0.1)],
        }
    )
    loop = build_loop([search("Big Stone Gap"), search("Adriana Trigiani"), answer("x")], retriever=retriever)
    result = loop.run()
    assert [(d.id, d.score) for d in result["documents"]] == [("trigiani", 0.9), ("bsg", 0.4)]
    assert result["tool_history"][0]["returned_chunk_ids"] == ["bsg", "trigiani"]
    assert result["tool_history"][1]["returned_chunk_ids"] == ["trigiani", "bsg"]
    assert result["documents"][0].content == DOC_TEXT["trigiani"]


@pytest.mark.parametrize(
    "chunk_cap, kept",
    [(2, ["a", "d"]), (3, ["a", "d", "e"]), (4, ["a", "d", "e", "c"]), (5, ["a", "d", "e", "c", "b"])],
)
def test_chunk_cap_evicts_the_lowest_score_first(build_loop, chunk_cap, kept):
    # b has no score (ranks lowest), c has 0.0 (a real score).
    retriever = ScriptedRetriever({"one": [("a", 0.9), ("b", None), ("c", 0.0)], "two": [("d", 0.5), ("e", 0.1)]})
    loop = build_loop([search("one"), search("two"), answer("x")], retriever=retriever, chunk_cap=chunk_cap)
    result = loop.run()
    assert [d.id for d in result["documents"]] == kept
    # What each search returned is recorded in full, whatever was evicted.
    assert result["tool_history"][0]["returned_chunk_ids"] == ["a", "b", "c"]
    assert result["tool_history"][1]["returned_chunk_ids"] == ["d", "e"]


# --- per-role generators and temperatures -------------------------------------------------------------------


def test_each_role_uses_its_own_generator_and_temperature(build_loop):
    answer_llm = ScriptedChatGenerator([{"text": "Greenwich Village, NYC"}], per_call=True)
    fallback_llm = ScriptedChatGenerator([{"text": "Greenwich Village"}], per_call=True)
    kwargs = {
        "router_kwargs": {"temperature": 0.1},
        "answerer": Answerer(chat_generator=answer_llm, temperature=0.2),
        "fallback": FallbackSynthesizer(chat_generator=fallback_llm, temperature=0.3),
    }
    answered = build_loop([search("Adriana Trigiani"), answer("Greenwich")], **kwargs)
    result = answered.run()
    assert [c[1]["temperature"] for c in answered.llm.calls] == [0.1, 0.1]
    assert [c[1]["temperature"] for c in answer_llm.calls] == [0.2]
    assert fallback_llm.calls == []
    assert (calls(result, "controller"), calls(result, "answer"), calls(result, "fallback")) == (2, 1, 0)
    assert result["usage"]["total"]["calls"] == 3

    kwargs["answerer"] = Answerer(chat_generator=answer_llm, temperature=0.2)
    kwargs["fallback"] = FallbackSynthesizer(chat_generator=fallback_llm, temperature=0.3)
    answer_llm.reset()
    exhausted = build_loop([search("Adriana Trigiani"), search("Big Stone Gap")], max_iterations=2, **kwargs)
    result = exhausted.run()
    assert [c[1]["temperature"] for c in exhausted.llm.calls] == [0.1, 0.1]
    assert [c[1]["temperature"] for c in fallback_llm.calls] == [0.3]
    assert answer_llm.calls == []
    assert (calls(result, "controller"), calls(result, "answer"), calls(result, "fallback")) == (2, 0, 1)
    assert strip_markers(result["answer"]) == "Greenwich Village"


def test_usage_tokens_come_from_the_replies(build_loop):
    loop = build_loop(HOPS)
    result = loop.run()
    reported = [loop.llm.run(messages=c[0])["replies"][0].meta["usage"] for c in list(loop.llm.calls)[:3]]
    assert result["usage"]["controller"]["prompt_tokens"] == sum(u["prompt_tokens"] for u in reported)
    assert result["usage"]["controller"]["completion_tokens"] == sum(u["completion_tokens"] for u in reported)


# --- limits -------------------------------------------------------------------------------------------------


def test_long_runs_stay_within_max_runs_per_component(build_loop):
    # Every turn searches (a new query each time), the most controller visits a run can take.
    result = build_loop([search(f"query {i}") for i in range(10)], max_iterations=10).run()
    assert (result["terminated_by"], result["iterations"]) == ("max_iterations", 10)
    # json mode reflect turns go through the answerer and back around the loop.
    script = [decide("search", query="Adriana Trigiani")] + [decide("reflect")] * 10
    json_result = build_loop(
        script, mode="json", max_iterations=8, answer_script=[{"text": "Improved answer: Greenwich Village"}]
    ).run()
    assert (json_result["terminated_by"], json_result["iterations"]) == (
        "max_iterations",
        8,
    )  # the answer forced at the cap says so
    assert (
        strip_markers(json_result["answer"]) == "Improved answer: Greenwich Village"
    )  # the final rewrite of the draft
    assert actions(json_result).count("reflect") >= 6


# --- design: unset roles fall back to the controller's generator (DESIGN.md, "Components") --------------------


def test_default_answerer_in_json_mode_uses_the_controller_generator(retriever):
    """DESIGN.md: 'unset roles fall back to the controller's'. The default Answerer has no LLM, so json mode ends
    every run in an error ('Answerer has no chat_generator ...') instead of answering."""
    llm = ScriptedChatGenerator([decide("generate"), {"text": "Greenwich Village"}], per_call=True)
    pipeline = build_loop_pipeline(AgenticRouter(chat_generator=llm, mode="json"), retriever, check_evidence=False)
    result = pipeline.run({"controller": {"query": QUESTION}})["result"]
    assert result["terminated_by"] == "answered", result["error"]
    assert strip_markers(result["answer"]) == "Greenwich Village"
    assert calls(result, "answer") == 1


@pytest.mark.integration  # the packaged MiniLM (the evidence check's embeddings)
def test_default_fallback_uses_the_controller_generator(retriever):
    """DESIGN.md: at max_iterations with chunks the fallback answers from them, and unset roles fall back to the
    controller's generator. The builder's default fallback is disabled, so chunks found are never used."""
    llm = ScriptedChatGenerator([search("Adriana Trigiani")])
    pipeline = build_loop_pipeline(
        AgenticRouter(chat_generator=llm), retriever, controller=LoopController(max_iterations=1)
    )
    result = pipeline.run({"controller": {"query": QUESTION}})["result"]
    assert result["terminated_by"] == "max_iterations"
    assert calls(result, "fallback") == 1
    assert DOC_TEXT["trigiani"] in llm.calls[-1][0][0].text


def test_one_pipeline_serves_concurrent_threads_unmixed(build_loop):
    from concurrent.futures import ThreadPoolExecutor

    script = [
        {"tool_calls": [{"tool_name": "search", "arguments": {"query": "{{ question }}"}}], "template": True},
        {"tool_calls": [{"tool_name": "answer", "arguments": {"text": "answer to {{ question }}"}}], "template": True},
    ]
    loop = build_loop(script, latency=0.01)
    questions = [f"Where is Adriana Trigiani based? #{i}" for i in range(12)]
    with ThreadPoolExecutor(max_workers=6) as pool:
        results = list(pool.map(loop.run, questions))
    for question, result in zip(questions, results, strict=True):
        assert strip_markers(result["answer"]) == f"answer to {question}"
        assert result["tool_history"][0]["query"] == question


# --- no worker-thread hops on the async path ------------------------------------------------------------------


async def test_run_async_runs_no_loop_component_in_a_worker_thread(build_loop, monkeypatch):
    # Pipeline.run_async hands components without run_async to asyncio.to_thread; the loop's own components all
    # have run_async, so a whole run (search, answer, rewrite) makes no such hop.
    from haystack.utils import async_utils

    hopped = []
    original = async_utils.asyncio.to_thread

    async def recording(function, *args, **kwargs):
        hopped.append(getattr(function, "__qualname__", repr(function)))
        return await original(function, *args, **kwargs)

    monkeypatch.setattr(async_utils.asyncio, "to_thread", recording)
    loop = build_loop(HOPS, answer_script=[{"text": "Greenwich Village"}])  # in-memory BM25: its own executor
    result = await loop.run_async()
    assert strip_markers(result["answer"]) == "Greenwich Village"
    assert hopped == []


def test_answerer_state_comes_back_through_controller_revised(build_loop):
    pipeline = build_loop(
        [decide("reflect"), decide("generate")], mode="json", answer_script=[{"text": "draft"}, {"text": "final"}]
    ).pipeline
    receivers = {(c["sender"], c["receiver"]) for c in pipeline.to_dict()["connections"]}
    assert ("answerer.state", "controller.revised") in receivers
    assert ("router.loop", "controller.state") in receivers
    assert "entry" not in pipeline.to_dict()["components"]


def test_controller_refuses_two_states_in_one_visit():
    state = LoopController().run(query=QUESTION)["state"]
    with pytest.raises(ValueError, match="more than one state"):
        LoopController().run(state=state, revised=state)


# --- a flat result ------------------------------------------------------------------------------------------


@pytest.mark.integration  # the packaged MiniLM (the evidence check's embeddings)
def test_the_result_is_flat_under_the_result_component(store):
    """`pipeline.run(...)["result"]` is the result dict itself (one level, not `["result"]`)."""
    pipeline = _full_pipeline(store)
    out = pipeline.run({"controller": {"query": QUESTION}})["result"]
    assert strip_markers(out["answer"]) == "Greenwich Village, NYC"
    assert out["terminated_by"] == "answered"
    expected_keys = set(RESULT_TYPES)
    assert set(out) == expected_keys
    assert set(pipeline.outputs()["result"]) == expected_keys
    json.dumps(result_to_dict(out))


def test_an_embedding_retriever_without_a_query_embedder_is_refused_with_the_fix():
    from haystack.components.retrievers.in_memory import InMemoryEmbeddingRetriever
    from haystack.document_stores.in_memory import InMemoryDocumentStore

    retriever = InMemoryEmbeddingRetriever(InMemoryDocumentStore())
    with pytest.raises(ValueError, match=r"query_embedder=MiniLMTextEmbedder\(\)"):
        build_loop_pipeline(AgenticRouter(chat_generator=ScriptedChatGenerator([])), retriever)
