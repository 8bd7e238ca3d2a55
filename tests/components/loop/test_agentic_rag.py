# SPDX-License-Identifier: Apache-2.0
"""`AgenticRAG`: the loop as one SuperComponent inside a bigger pipeline, its inputs and outputs, YAML round trip,
construction from a built pipeline, a YAML file or a packaged name."""

import re
import textwrap
import uuid
from pathlib import Path

import pytest
from conftest import QUESTION, answer, load_yaml, search
from haystack import Document, Pipeline
from haystack.components.builders import PromptBuilder
from haystack.components.writers import DocumentWriter
from haystack.core.errors import DeserializationError
from haystack.dataclasses import ChatMessage, StreamingChunk
from haystack.document_stores.in_memory import InMemoryDocumentStore

from haystack_agentic import AgenticRAG
from haystack_agentic.components.loop.loop_controller import InvalidLoopInputError
from haystack_agentic.grounding.citations import strip_markers
from haystack_agentic.llm.streaming import ANSWER_META

HOPS = [search("Big Stone Gap film director"), search("Adriana Trigiani"), answer("Greenwich Village")]
USER_INPUTS = {"query", "messages", "filters", "collections", "streaming_callback"}
TEMPLATE = "Answer: {{ answer }}\nSources:{% for d in documents %} {{ d.id }}{% endfor %}"


@pytest.fixture(autouse=True)
def _no_allow_list_in_the_environment(monkeypatch):
    monkeypatch.delenv("HAYSTACK_DESERIALIZATION_ALLOWLIST", raising=False)


def _bigger_pipeline(rag: AgenticRAG) -> tuple[Pipeline, InMemoryDocumentStore]:
    """A user's pipeline: the loop's answer and documents feed a prompt builder; its documents, a writer."""
    cited = InMemoryDocumentStore(index=f"cited-{uuid.uuid4().hex}")
    pipeline = Pipeline()
    pipeline.add_component("rag", rag)
    pipeline.add_component("report", PromptBuilder(TEMPLATE, required_variables=["answer", "documents"]))
    pipeline.add_component("cite", DocumentWriter(cited))  # takes list[Document]: the connection checks the type
    pipeline.connect("rag.answer", "report.answer")
    pipeline.connect("rag.documents", "report.documents")
    pipeline.connect("rag.documents", "cite.documents")
    return pipeline, cited


def test_only_the_real_inputs_show_and_the_outputs_are_answer_documents_result(build_loop):
    loop = build_loop(HOPS)
    internal = {f"{c}.{s}" for c, sockets in loop.pipeline.inputs().items() for s in sockets}
    assert {"controller.documents", "finish.value", "controller.search_error"} & internal  # the raw loop's sockets
    rag = AgenticRAG(pipeline=loop.pipeline)
    assert set(rag.__haystack_input__._sockets_dict) == USER_INPUTS
    assert set(rag.__haystack_output__._sockets_dict) == {"answer", "answers", "documents", "messages", "result"}
    outer, _ = _bigger_pipeline(rag)
    assert set(outer.inputs()["rag"]) == USER_INPUTS
    assert all(not socket.is_mandatory for socket in rag.__haystack_input__._sockets_dict.values())


def test_inside_a_bigger_pipeline_its_answer_and_documents_feed_other_components(build_loop):
    loop = build_loop(HOPS)
    expected = loop.run()
    loop.llm.reset()
    outer, cited = _bigger_pipeline(AgenticRAG(pipeline=loop.pipeline))
    out = outer.run({"rag": {"query": QUESTION}}, include_outputs_from={"rag"})
    result = out["rag"]["result"]
    assert result == expected and strip_markers(result["answer"]) == "Greenwich Village"
    documents = out["rag"]["documents"]
    assert documents and all(isinstance(d, Document) for d in documents)
    assert [d.id for d in documents] == [d.id for d in result["documents"]]
    assert documents[0].score == result["documents"][0].score and documents[0].content
    assert out["report"]["prompt"] == "Answer: Greenwich Village [1]\nSources: " + " ".join(d.id for d in documents)
    assert {d.id for d in cited.filter_documents()} == {d.id for d in documents}
    assert out["cite"]["documents_written"] == len(documents)


def test_the_bigger_pipeline_round_trips_through_yaml_with_the_modules_it_names_allowed(build_loop):
    loop = build_loop(HOPS)
    expected = loop.run()
    loop.llm.reset()
    outer, _ = _bigger_pipeline(AgenticRAG(pipeline=loop.pipeline))
    text = outer.dumps()
    assert "haystack_agentic.components.loop.agentic_rag.AgenticRAG" in text
    assert "haystack_agentic.components.loop.loop_controller.LoopController" in text  # the loop stays visible
    with pytest.raises(DeserializationError, match="agentic_rag"):  # importing the package trusts nothing
        Pipeline.loads(text)
    loaded = load_yaml(text)
    assert load_yaml(loaded.dumps()).dumps() == loaded.dumps()
    out = loaded.run({"rag": {"query": QUESTION}}, include_outputs_from={"rag"})
    assert out["rag"]["result"] == expected
    assert out["report"]["prompt"].startswith("Answer: Greenwich Village [1]\nSources: ")


async def test_run_async_a_conversation_and_a_streaming_callback(build_loop):
    loop = build_loop(
        [search("Adriana Trigiani"), answer("Greenwich Village")],
        answer_script=[{"text": "She is based in Greenwich Village."}],
    )
    rag = AgenticRAG(pipeline=loop.pipeline)
    chunks: list[StreamingChunk] = []
    history = [
        ChatMessage.from_system("Be brief."),
        ChatMessage.from_user("Who directed Big Stone Gap?"),
        ChatMessage.from_assistant("Adriana Trigiani."),
        ChatMessage.from_user("Where is she based?"),
    ]
    out = await rag.run_async(messages=history, streaming_callback=chunks.append)
    assert strip_markers(out["answer"]) == "She is based in Greenwich Village."
    assert "".join(c.content for c in chunks if c.meta.get(ANSWER_META)).strip() == strip_markers(out["answer"])
    first_prompt = loop.llm.calls[0][0]
    assert [m.text for m in first_prompt if m.is_from("user")][:2] == [
        "Who directed Big Stone Gap?",
        "Where is she based?",
    ]


def test_filters_scope_the_run(build_loop):
    loop = build_loop(HOPS)
    out = AgenticRAG(pipeline=loop.pipeline).run(
        query=QUESTION, filters={"field": "meta.kind", "operator": "==", "value": "place"}
    )
    assert out["documents"] and {d.meta["kind"] for d in out["documents"]} == {"place"}


async def test_malformed_filters_are_a_value_error_naming_the_node_before_anything_runs(build_loop):
    loop = build_loop(HOPS)
    rag = AgenticRAG(pipeline=loop.pipeline)
    with pytest.raises(InvalidLoopInputError, match=r"Not a valid Haystack filter: filters has neither 'field'"):
        rag.run(query=QUESTION, filters={"bad": 1})
    with pytest.raises(InvalidLoopInputError, match=r"filters\.conditions\[0\]"):
        await rag.run_async(query=QUESTION, filters={"operator": "AND", "conditions": [{"bad": 1}]})
    assert loop.llm.calls == []


def test_built_from_a_yaml_file_and_from_a_packaged_name(build_loop, tmp_path, allow_scripted_llm):
    loop = build_loop(HOPS)
    expected = loop.run()
    path = tmp_path / "my_loop.yml"
    path.write_text(loop.pipeline.dumps(), encoding="utf-8")
    from_file = AgenticRAG(pipeline=str(path))
    store = from_file.pipeline.get_component("retriever").document_store
    assert store.count_documents() == 0  # a YAML file's in-memory store gets its own storage (load_loop_pipeline)
    store.write_documents(loop.retriever.document_store.filter_documents())
    assert from_file.run(query=QUESTION)["result"] == expected
    packaged = AgenticRAG("agentic_rag_embedded")  # the default: not run here (it loads SmolLM2)
    assert set(packaged.__haystack_input__._sockets_dict) == USER_INPUTS
    assert packaged.pipeline.get_component("answerer").__class__.__name__ == "Answerer"
    restored = AgenticRAG.from_dict(packaged.to_dict())
    assert restored.to_dict() == packaged.to_dict()


def test_an_unknown_name_or_a_pipeline_that_is_not_a_loop_is_refused():
    with pytest.raises(FileNotFoundError, match=r"Known pipelines: .*agentic_rag_embedded"):
        AgenticRAG("no_such_pipeline")
    other = Pipeline()
    other.add_component("report", PromptBuilder("{{ x }}"))
    with pytest.raises(ValueError, match="controller"):
        AgenticRAG(pipeline=other)


def test_the_usage_example_in_the_docstring_runs():
    code = textwrap.dedent(re.search(r"```python\n(.*?)```", AgenticRAG.__doc__, re.S).group(1))
    namespace: dict = {}
    exec(code, namespace)  # noqa: S102 - our own docstring
    assert namespace["out"]["answer"] == "Adriana Trigiani [1]"
    assert [doc.id for doc in namespace["out"]["documents"]] == ["bsg"]


def _readme_block(heading: str) -> str:
    """The first Python block of a README section."""
    readme = (Path(__file__).parents[3] / "README.md").read_text(encoding="utf-8")
    section = readme.split(heading, 1)[1]
    return textwrap.dedent(re.search(r"```python\n(.*?)```", section, re.S).group(1))


def test_the_readme_examples_run(tmp_path, monkeypatch, capsys):
    """The README's AgenticRAG example, then its breakpoint example on the same loop."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HAYSTACK_PIPELINE_SNAPSHOT_SAVE_ENABLED", "false")  # recorded: undone after the example sets it
    namespace: dict = {}
    exec(_readme_block("### One component in your pipeline: `AgenticRAG`"), namespace)  # noqa: S102
    assert namespace["out"]["report"]["prompt"] == "Greenwich Village [1] (sources: bsg trigiani)"
    assert namespace["out"]["rag"]["result"]["terminated_by"] == "answered"
    exec(_readme_block("### Breakpoints and snapshots"), namespace)  # noqa: S102
    snapshot_file = Path(namespace["snapshot_file"])
    assert snapshot_file.parent == Path("snapshots") and (tmp_path / snapshot_file).is_file()
    printed = capsys.readouterr().out.splitlines()
    assert printed == ["Greenwich Village [1] (sources: bsg trigiani)", "answered", "Greenwich Village [1]"]


def test_messages_out_are_the_conversation_with_the_answer_appended(build_loop):
    out = AgenticRAG(pipeline=build_loop(HOPS).pipeline).run(query=QUESTION)
    assert [m.role.value for m in out["messages"]] == ["user", "assistant"]
    assert out["messages"][0].text == QUESTION and out["messages"][-1].text == "Greenwich Village"
    assert out["result"]["messages"] is out["messages"]  # built once, by the loop's result component


def test_no_query_and_no_messages_is_refused_with_what_to_pass(build_loop):
    with pytest.raises(ValueError, match="pass `query`"):
        AgenticRAG(pipeline=build_loop(HOPS).pipeline).run()


def test_a_generator_failure_raises_by_default_and_is_returned_when_asked(build_loop):
    with pytest.raises(RuntimeError, match="The agentic loop failed") as caught:
        AgenticRAG(pipeline=build_loop([{"raise": "the model server is down"}]).pipeline).run(query=QUESTION)
    assert caught.value.result["terminated_by"] == "error"
    rag = AgenticRAG(pipeline=build_loop([{"raise": "the model server is down"}]).pipeline, raise_on_failure=False)
    out = rag.run(query=QUESTION)
    assert out["result"]["terminated_by"] == "error" and "the model server is down" in out["result"]["error"]
    assert strip_markers(out["answer"]) is None
