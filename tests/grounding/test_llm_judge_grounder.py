# SPDX-License-Identifier: Apache-2.0
import json

import pytest
from conftest import load_yaml
from haystack import Pipeline
from scripted_chat_generator import ScriptedChatGenerator

from haystack_agentic import LLMJudgeGrounder
from haystack_agentic.components.grounders.llm_judge_grounder import parse_claims
from haystack_agentic.grounding.citations import strip_markers

from .conftest import ended_state

VERDICTS = {
    "claims": [
        {"sentence": 1, "claim": "Paris is the capital of France", "supported": True, "chunks": [0, 7]},
        {"sentence": 2, "claim": "London is in England", "supported": "no", "chunks": []},
        {"sentence": 9, "claim": "ghost", "supported": True, "chunks": [0]},
    ]
}


def judge(text):
    return LLMJudgeGrounder(chat_generator=ScriptedChatGenerator(script=[{"text": text}], per_call=True))


def test_wrapped_json_and_out_of_range_indices():
    reply = "Here is my verdict:\n```json\n" + json.dumps(VERDICTS) + "\n```\nHope it helps."
    state = ended_state()
    out = judge(reply).run(state)["state"]
    g = out.outcome.grounding
    assert g["method"] == "llm_judge"
    # the answer had no citations and was never streamed: the grounder cited it first, each sentence to its best
    # chunk sentence, the marker on the sentence it cites
    assert out.outcome.answer == "Paris is the capital of France [1]. London is in England [2]."
    assert [(c["document_id"], c["supported"], c["check"]) for c in out.outcome.citations] == [
        ("paris", True, "llm_judge"),
        ("london", False, "llm_judge"),
    ]
    assert [s["text"] for s in g["faithful_spans"]] == ["Paris is the capital of France [1]."]
    assert g["faithful_spans"][0]["chunk_ids"] == ["paris"]  # index 7 dropped
    assert g["faithful_spans"][0]["citations"] == [1]
    assert g["faithful_spans"][0]["sources"][0] == {
        "chunk_id": "paris",
        "title": "Paris",
        "iteration": 1,
        "query": "paris",
    }
    assert [s["text"] for s in g["hallucinated_spans"]] == ["London is in England [2]."]
    assert g["ignored_indices"] == 2  # chunk 7 and sentence 9
    span = g["faithful_spans"][0]
    assert out.outcome.answer[span["start"] : span["end"]] == span["text"]
    first, second = len("Paris is the capital of France [1]."), len("London is in England [2].")
    assert g["score"] == pytest.approx(first / (first + second), abs=1e-3)
    assert out.usage["grounding"]["calls"] == 1


def test_a_custom_judge_prompt_is_rendered_and_round_trips(allow_scripted_llm):
    generator = ScriptedChatGenerator(script=[{"text": json.dumps(VERDICTS)}], per_call=True)
    grounder = LLMJudgeGrounder(chat_generator=generator, judge_prompt="Q={{ question }} S={{ sentences | length }}")
    grounder.run(ended_state())
    assert generator.calls[0][0][-1].text.startswith("Q=") and " S=2" in generator.calls[0][0][-1].text
    assert LLMJudgeGrounder.from_dict(grounder.to_dict()).judge_prompt == grounder.judge_prompt


def test_bare_list_and_missing_sentence_is_unsupported():
    reply = json.dumps([{"sentence": "1", "supported": "supported", "chunks": ["1"]}])
    out = judge(reply).run(ended_state())["state"]
    # sentence 1 cites paris, but the judge says london supports it: the citation does not hold; sentence 2 unjudged
    assert [c["supported"] for c in out.outcome.citations] == [False, False]
    assert out.outcome.grounding["faithful_spans"] == [] and len(out.outcome.grounding["hallucinated_spans"]) == 2
    assert out.outcome.grounding["judged_sentences"] == [1]


def test_unparseable_reply_skips_and_keeps_answer():
    state = ended_state()
    out = judge("I think it is all fine.").run(state)["state"]
    assert out.outcome.grounding is None and "no JSON claims" in out.metadata["grounding_skipped"]
    assert strip_markers(out.outcome.answer) == state.outcome.answer
    assert all(c["check"] == "offline" for c in out.outcome.citations)  # the offline verdicts stand


def test_generator_failure_is_swallowed():
    g = LLMJudgeGrounder(chat_generator=ScriptedChatGenerator(script=[{"raise": "down"}], per_call=True))
    out = g.run(ended_state())["state"]
    assert out.outcome.grounding is None and "down" in out.metadata["grounding_skipped"]


def test_skips_without_a_call():
    llm = ScriptedChatGenerator(script=[{"text": "{}"}], per_call=True)
    out = LLMJudgeGrounder(chat_generator=llm).run(ended_state(chunks=()))["state"]
    assert out.outcome.grounding is None and llm.calls == []


async def test_run_async():
    out = (await judge(json.dumps(VERDICTS)).run_async(ended_state()))["state"]
    assert len(out.outcome.grounding["faithful_spans"]) == 1


def test_parse_claims_variants():
    assert parse_claims('{"claims": []}') is None or parse_claims('{"claims": []}') == []
    assert parse_claims('prose [{"sentence": 1, "supported": true}] more')[0]["sentence"] == 1
    assert parse_claims("nothing") is None


def test_serialisation_round_trip(monkeypatch):
    # the nested chat generator is deserialised with the process-wide allow-list
    monkeypatch.setenv("HAYSTACK_DESERIALIZATION_ALLOWLIST", f"haystack_agentic.*,{ScriptedChatGenerator.__module__}")
    grounder = judge("{}")
    data = grounder.to_dict()
    restored = LLMJudgeGrounder.from_dict(data)
    assert isinstance(restored.chat_generator, ScriptedChatGenerator)
    pipeline = Pipeline()
    pipeline.add_component("grounder", grounder)
    assert load_yaml(pipeline.dumps()).to_dict() == pipeline.to_dict()


def test_the_builder_swaps_in_the_judge_grounder_when_hhem_is_missing_and_an_llm_is_configured(
    tmp_path, store, allow_scripted_llm
):
    """Without HHEM weights an `openai` run grounds with the controller LLM as judge; an embedded one runs without."""
    from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
    from scripted_chat_generator import ScriptedChatGenerator

    from haystack_agentic import AgenticRouter, HHEMGrounder, LLMJudgeGrounder, build_loop_pipeline
    from haystack_agentic.pipelines.loop_builder import LoopOptions, build_loop

    llm = ScriptedChatGenerator([{"text": "x"}])
    missing = HHEMGrounder(model=str(tmp_path / "no-model"), foundation=str(tmp_path / "no-t5"), local_files_only=True)
    path = tmp_path / "loop.yml"
    path.write_text(
        build_loop_pipeline(AgenticRouter(chat_generator=llm), InMemoryBM25Retriever(store), grounder=missing).dumps()
    )
    notes: list[str] = []
    with_llm = build_loop(LoopOptions(pipeline=str(path), llm="openai"), notify=notes.append)
    judge = with_llm.get_component("grounder")
    assert isinstance(judge, LLMJudgeGrounder)
    assert judge.chat_generator.to_dict() == with_llm.get_component("router").chat_generator.to_dict()
    as_written = build_loop(LoopOptions(pipeline=str(path), grounding="pipeline"))
    links = [sorted(map(str, p.to_dict()["connections"])) for p in (with_llm, as_written)]
    assert links[0] == links[1]  # same graph, other grounder
    embedded = build_loop(LoopOptions(pipeline=str(path), llm="embedded"), notify=notes.append)
    assert isinstance(embedded.get_component("grounder"), HHEMGrounder)
    assert "LLMJudgeGrounder" in notes[0] and "is not available" in notes[0]
    assert notes[1].endswith("Running without grounding.")
