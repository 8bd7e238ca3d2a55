# SPDX-License-Identifier: Apache-2.0
"""
Every tool call of a turn runs (several searches included), results go back in call order; user tools run with
Haystack's tool-invocation semantics (`outputs_to_state`, `outputs_to_string`, `inputs_from_state`), and tools that
return Documents add them to the run's chunks and show the model readable text.
"""

import asyncio
import contextlib

import pytest
from conftest import QUESTION, ScriptedRetriever, actions, answer, search, tool_turn
from haystack import Document, tracing
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.dataclasses import ChatMessage, ChatRole
from haystack.tools import ComponentTool, Tool
from haystack.tracing import Span, Tracer
from scripted_chat_generator import ScriptedChatGenerator

from haystack_agentic import AgenticRouter, LoopController, LoopState, build_loop_pipeline
from haystack_agentic.components.retrievers.safe_retriever import SafeRetriever

FILTERS = {"field": "meta.kind", "operator": "in", "value": ["film", "person", "place"]}


def _tool_messages(messages: list[ChatMessage]) -> list[ChatMessage]:
    return [m for m in messages if m.role == ChatRole.TOOL]


def film_year(title: str) -> str:
    """Release year of a film (module level, so it serialises)."""
    return f"{title} was released in 2014."


YEAR_TOOL = Tool(
    name="film_year",
    description="Release year of a film.",
    parameters={"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]},
    function=film_year,
)


def _calls(*calls: tuple[str, dict]) -> dict:
    return {"tool_calls": [{"tool_name": name, "arguments": arguments} for name, arguments in calls]}


# --- several searches in one turn ---------------------------------------------------------------------------


def _parallel_turn_loop(build_loop):
    retriever = ScriptedRetriever(
        {"a": [("bsg", 0.4), ("trigiani", 0.5)], "b": [("trigiani", 0.9), ("greenwich", 0.3)]}
    )
    turn = _calls(
        ("search", {"query": "a"}),
        ("film_year", {"title": "Big Stone Gap"}),
        ("search", {"query": "b", "top_k": 2}),
        ("search", {"query": "A"}),  # the same query again in the same turn
    )
    return build_loop([turn, answer("x")], retriever=retriever, router_kwargs={"tools": [YEAR_TOOL]})


def _check_parallel_turn(loop, result):
    calls = [(c["query"], c["filters"], c["top_k"]) for c in loop.retriever.calls]
    assert calls == [("a", FILTERS, None), ("b", FILTERS, 2)]  # both ran, with the run's filters
    assert actions(result) == ["search", "tool", "search", "invalid", "answer"]
    history = result["tool_history"]
    assert history[0]["returned_chunk_ids"] == ["bsg", "trigiani"]
    assert history[2]["returned_chunk_ids"] == ["trigiani", "greenwich"]
    assert "already searched" in history[3]["result"]
    assert result["iterations"] == 2  # one turn, however many searches it ran
    # Chunks merged once: trigiani kept with its best score.
    assert {d.id: d.score for d in result["documents"]} == {"trigiani": 0.9, "bsg": 0.4, "greenwich": 0.3}
    # One tool message per call, in call order, right after the assistant message.
    sent = loop.llm.calls[1][0]
    assistant = max(i for i, m in enumerate(sent) if m.role == ChatRole.ASSISTANT)
    back = sent[assistant + 1 :]
    assert [m.tool_call_result.origin.id for m in back] == ["call_0_0", "call_0_1", "call_0_2", "call_0_3"]
    texts = [m.tool_call_result.result for m in back]
    assert texts[0].startswith('2 result(s) for "a"') and "id=bsg" in texts[0]
    assert texts[1] == "Big Stone Gap was released in 2014."
    assert texts[2].startswith('2 result(s) for "b"') and "id=greenwich" in texts[2]
    assert "already searched" in texts[3]


def test_every_search_of_a_turn_runs_and_results_go_back_in_call_order(build_loop):
    loop = _parallel_turn_loop(build_loop)
    _check_parallel_turn(loop, loop.run(filters=FILTERS))


def test_every_search_of_a_turn_runs_async(build_loop):
    loop = _parallel_turn_loop(build_loop)
    _check_parallel_turn(loop, asyncio.run(loop.run_async(filters=FILTERS)))


def test_searches_beyond_the_per_turn_limit_go_back_as_errors():
    state = LoopController(max_searches_per_turn=2).run(query=QUESTION)["state"]
    turn = _calls(("search", {"query": "a"}), ("search", {"query": "b"}), ("search", {"query": "c"}))
    out = AgenticRouter(chat_generator=ScriptedChatGenerator([turn]), search_question_first=False).run(state=state)
    assert (out["query"], out["top_k"]) == ("a", None)  # no top_k from the model: the retriever uses its own
    routed = out["loop"]
    assert routed.pending.query == "a" and [s.query for s in routed.queued] == ["b"]
    assert routed.queries_tried == ("a", "b")
    assert "at most 2 searches run per turn" in routed.tool_history[-1].result
    # The router sends the queued search on without calling the LLM when the state comes back.
    back = LoopController(max_searches_per_turn=2).run(state=routed, documents=[Document(id="d1", content="x")])
    assert back["state"].iteration == 0 and back["state"].pending is None
    nxt = AgenticRouter(chat_generator=ScriptedChatGenerator([])).run(state=back["state"])
    assert nxt["query"] == "b" and nxt["loop"].queued == () and nxt["loop"].pending.query == "b"


def test_an_answer_in_the_same_turn_drops_the_searches(build_loop):
    retriever = ScriptedRetriever({"a": [("bsg", 1.0)]})
    loop = build_loop(
        [_calls(("search", {"query": "a"}), ("answer", {"text": "Greenwich Village"}))], retriever=retriever
    )
    result = loop.run()
    assert retriever.calls == [] and result["answer"] == "Greenwich Village"
    assert actions(result) == ["answer"]


def test_turns_of_many_searches_stay_within_max_runs_per_component(build_loop):
    turns = [_calls(*[("search", {"query": f"q{turn} {i}"}) for i in range(4)]) for turn in range(5)]
    loop = build_loop(turns, max_iterations=5)
    result = loop.run()
    assert (result["terminated_by"], result["iterations"]) == ("max_iterations", 5)
    assert sum(1 for step in result["tool_history"] if step["action"] == "search") == 20


def test_state_with_queued_searches_round_trips():
    state = LoopController().run(query=QUESTION)["state"]
    turn = _calls(("search", {"query": "a"}), ("search", {"query": "b"}))
    routed = AgenticRouter(chat_generator=ScriptedChatGenerator([turn]), search_question_first=False).run(state=state)[
        "loop"
    ]
    again = LoopState.from_dict(routed.to_dict())
    assert again.queued == routed.queued and again.pending == routed.pending


# --- user tools: Haystack tool-invocation semantics ----------------------------------------------------------


def test_component_tool_retriever_adds_its_documents_and_shows_readable_text(build_loop, store):
    tool = ComponentTool(
        component=InMemoryBM25Retriever(store),
        name="wiki",
        description="Search the wiki.",
        inputs_from_state={"filters": "filters"},  # the run's filters, not the model's
    )
    loop = build_loop(
        [tool_turn("wiki", {"query": "Adriana Trigiani", "top_k": 2}), search("Trigiani"), answer("Greenwich Village")],
        router_kwargs={"tools": [tool]},
    )
    result = loop.run(filters={"field": "meta.kind", "operator": "==", "value": "person"})
    step = result["tool_history"][0]
    assert step["action"] == "tool" and step["returned_chunk_ids"] == ["trigiani"]
    text = _tool_messages(loop.llm.calls[1][0])[-1].tool_call_result.result
    assert "Document(" not in text and '"id"' not in text
    assert "Adriana Trigiani" in text and "Greenwich Village" in text and "id=trigiani" in text
    # The tool's chunk joined the run's chunks once, deduplicated with the later search's.
    assert [d.id for d in result["documents"]] == ["trigiani"]


def documents_about(topic: str) -> list[Document]:
    """A tool returning Documents, one of them outside the run's filters."""
    return [
        Document(id="t1", content=f"About {topic}: first.", meta={"title": topic, "kind": "person"}, score=0.7),
        Document(id="t2", content=f"About {topic}: second.", meta={"title": topic, "kind": "band"}, score=0.6),
    ]


def test_tool_returning_documents_joins_chunks_within_the_run_filters(build_loop):
    tool = Tool(
        name="about",
        description="Documents about a topic.",
        parameters={"type": "object", "properties": {"topic": {"type": "string"}}, "required": ["topic"]},
        function=documents_about,
    )
    loop = build_loop([tool_turn("about", {"topic": "Trigiani"}), answer("x")], router_kwargs={"tools": [tool]})
    result = loop.run(filters={"field": "meta.kind", "operator": "==", "value": "person"})
    assert [d.id for d in result["documents"]] == ["t1"]  # t2 is outside the run's filters
    text = _tool_messages(loop.llm.calls[1][0])[-1].tool_call_result.result
    assert text.startswith("1 result(s) from about") and "title=Trigiani" in text and "About Trigiani: first." in text
    assert "t2" not in text


def film_facts(title: str) -> dict:
    """Facts about a film, as a dict of outputs."""
    return {"year": 2014, "director": "Adriana Trigiani", "title": title}


def director_born(director: str) -> str:
    """Where a director was born (reads the director from the tool state)."""
    return f"{director} was born in Giuseppe, Italy."


def test_outputs_to_string_and_outputs_to_state_follow_haystack_semantics(build_loop):
    facts = Tool(
        name="film_facts",
        description="Facts about a film.",
        parameters={"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]},
        function=film_facts,
        outputs_to_string={"source": "year"},
        outputs_to_state={"director": {"source": "director"}},
    )
    born = Tool(
        name="director_born",
        description="Where the director found by film_facts was born.",
        parameters={"type": "object", "properties": {}},
        function=director_born,
        inputs_from_state={"director": "director"},
    )
    loop = build_loop(
        [tool_turn("film_facts", {"title": "Big Stone Gap"}), tool_turn("director_born", {}), answer("Giuseppe")],
        router_kwargs={"tools": [facts, born]},
    )
    result = loop.run()
    first = _tool_messages(loop.llm.calls[1][0])[-1].tool_call_result.result
    assert first == "2014"  # outputs_to_string: only the `year` output
    second = _tool_messages(loop.llm.calls[2][0])[-1].tool_call_result.result
    assert second == "Adriana Trigiani was born in Giuseppe, Italy."  # read back from the state in a later turn
    assert result["tool_state"] == {"director": "Adriana Trigiani"}


def test_outputs_to_state_documents_join_the_chunks(build_loop):
    tool = Tool(
        name="about",
        description="Documents about a topic.",
        parameters={"type": "object", "properties": {"topic": {"type": "string"}}, "required": ["topic"]},
        function=lambda topic: {"documents": documents_about(topic), "note": "two found"},
        outputs_to_state={"documents": {"source": "documents"}},
        outputs_to_string={"source": "note"},
    )
    loop = build_loop([tool_turn("about", {"topic": "Trigiani"}), answer("x")], router_kwargs={"tools": [tool]})
    result = loop.run()
    assert sorted(d.id for d in result["documents"]) == ["t1", "t2"]
    assert _tool_messages(loop.llm.calls[1][0])[-1].tool_call_result.result == "two found"
    assert "documents" not in result["tool_state"]


@pytest.mark.parametrize("run_async", [False, True])
def test_failing_user_tool_is_a_tool_error_on_both_paths(build_loop, run_async):
    def broken(**kwargs):
        msg = "missing"
        raise KeyError(msg)

    tool = Tool(name="broken", description="d", parameters={"type": "object", "properties": {}}, function=broken)
    loop = build_loop([tool_turn("broken", {}), answer("ok")], router_kwargs={"tools": [tool]})
    result = asyncio.run(loop.run_async()) if run_async else loop.run()
    message = loop.llm.calls[1][0][-1]
    assert message.tool_call_result.error is True and "missing" in message.tool_call_result.result
    assert result["answer"] == "ok"


# --- tracing: one retriever span per search, one tool span per user tool call ---------------------------------


class _Span(Span):
    def __init__(self, name: str, tags: dict | None) -> None:
        self.name, self.tags = name, dict(tags or {})

    def set_tag(self, key: str, value) -> None:
        self.tags[key] = value


class _Tracer(Tracer):
    def __init__(self) -> None:
        self.spans: list[_Span] = []

    @contextlib.contextmanager
    def trace(self, operation_name: str, tags: dict | None = None, parent_span: Span | None = None):
        span = _Span(operation_name, tags)
        self.spans.append(span)
        yield span

    def current_span(self) -> Span | None:
        return self.spans[-1] if self.spans else None


def test_each_search_of_a_turn_and_each_user_tool_call_has_its_own_span(store):
    recording = _Tracer()
    tracing.enable_tracing(recording)
    try:
        turn = _calls(
            ("search", {"query": "Adriana Trigiani"}),
            ("film_year", {"title": "Big Stone Gap"}),
            ("search", {"query": "Greenwich Village"}),
        )
        llm = ScriptedChatGenerator([turn, answer("x")])
        router = AgenticRouter(chat_generator=llm, tools=[YEAR_TOOL], search_question_first=False)
        pipeline = build_loop_pipeline(router, SafeRetriever(InMemoryBM25Retriever(store)), check_evidence=False)
        pipeline.run({"controller": {"query": QUESTION}})
    finally:
        tracing.disable_tracing()
    searches = [s.tags for s in recording.spans if "haystack_agentic.chunks_found" in s.tags]
    assert [s["haystack_agentic.query"] for s in searches] == ["Adriana Trigiani", "Greenwich Village"]
    assert all(s["haystack_agentic.chunks_found"] > 0 for s in searches)
    tools = [s.tags for s in recording.spans if s.name == "haystack.agent.step.tool"]
    assert [t["haystack.tool.name"] for t in tools] == ["film_year"]


def test_the_same_words_in_two_collections_in_one_turn_are_two_searches(tmp_path):
    from haystack_agentic.document_stores.sparse_bm25_document_store import SparseBM25DocumentStore

    store = SparseBM25DocumentStore(index=f"turn-tools-{tmp_path.name}")
    store.write_documents(
        [
            Document(id="film", content="Big Stone Gap is a 2014 film.", meta={"collection": "films"}),
            Document(id="town", content="Big Stone Gap is a town in Virginia.", meta={"collection": "places"}),
        ]
    )
    turn = _calls(
        ("search", {"query": "Big Stone Gap", "collection": "films"}),
        ("search", {"query": "Big Stone Gap", "collection": "places"}),
    )
    llm = ScriptedChatGenerator([turn, answer("x")])
    pipeline = build_loop_pipeline(
        AgenticRouter(chat_generator=llm, search_question_first=False),
        SafeRetriever(InMemoryBM25Retriever(store)),
        check_evidence=False,
    )
    result = pipeline.run({"controller": {"query": QUESTION, "collections": ["films", "places"]}})["result"]
    steps = [s for s in result["tool_history"] if s["action"] == "search"]
    found = [(s["collections"], s["returned_chunk_ids"]) for s in steps]
    assert found == [(["films"], ["film"]), (["places"], ["town"])]
    back = _tool_messages(llm.calls[1][0])
    assert [m.tool_call_result.origin.id for m in back] == ["call_0_0", "call_0_1"]
    assert "id=film" in back[0].tool_call_result.result and "id=town" in back[1].tool_call_result.result
