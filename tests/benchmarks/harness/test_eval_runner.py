# SPDX-License-Identifier: Apache-2.0
"""The evaluation harness (`benchmarks/harness/`) and its script (`benchmarks/eval.py`)."""

import json
from pathlib import Path

import pytest
from rich.console import Console
from scripted_chat_generator import ScriptedChatGenerator

from benchmarks.eval import EvalError, build_parser, main, run
from benchmarks.harness.gold import gold_document_ids
from benchmarks.harness.metrics import exact_match, f1, supporting_recall
from benchmarks.harness.pipeline_configs import retrieval_only
from benchmarks.harness.plot import plot_report
from benchmarks.harness.report import render_table, write_json
from benchmarks.harness.retrieval_only_answerer import RetrievalOnlyAnswerer
from benchmarks.harness.runner import (
    bridge_entity_config,
    build_store,
    llm_router_config,
    one_shot_config,
    run_eval,
)
from haystack_agentic.dataclasses.loop_state import LoopState
from haystack_agentic.grounding.markers import strip_markers
from haystack_agentic.indexing.hotpotqa import load_hotpotqa_questions
from haystack_agentic.pipelines.loop_builder import LoopOptions, build_loop
from haystack_agentic.resources import sample_corpus_path

SCRIPTED_YAML = Path(__file__).parents[2] / "serving" / "scripted_loop.yml"


@pytest.fixture(scope="module")
def rows():
    return load_hotpotqa_questions(sample_corpus_path())[:4]


def router_script():
    # The router searches the question itself first (no LLM call), so the model's one turn answers.
    return [{"tool_calls": [{"tool_name": "answer", "arguments": {"text": "yes"}}]}]


@pytest.mark.slow  # runs for many seconds
def test_short_eval_with_scripted_llms(rows, tmp_path):
    store = build_store(rows)
    answer_llm = ScriptedChatGenerator([{"text": "yes"}], per_call=True)
    configs = [
        one_shot_config(store, 6, answer_llm),
        bridge_entity_config(store, 6, answer_llm),
        llm_router_config(store, ScriptedChatGenerator(router_script()), 6),
    ]
    seen = []
    report = run_eval(rows, configs, on_question=lambda name, done: seen.append((name, done)))
    assert list(report["configs"]) == ["one-shot", "bridge-entity", "llm-router"]
    assert len(seen) == 3 * len(rows)
    for entry in report["configs"].values():
        summary = entry["summary"]
        assert summary["questions"] == len(rows)
        assert summary["terminated_by"] == {"answered": len(rows)}
        for row, record in zip(rows, entry["questions"], strict=True):
            assert strip_markers(record["answer"]) == "yes"
            assert record["em"] == exact_match("yes", row["answer"])
            assert record["f1"] == f1("yes", row["answer"])
            assert record["gold_total"] == 2
        assert summary["em"] == pytest.approx(sum(r["em"] for r in entry["questions"]) / len(rows))
    one_shot = report["configs"]["one-shot"]
    assert all(r["searches"] == 1 and r["llm_calls"]["answer"] == 1 for r in one_shot["questions"])
    assert one_shot["summary"]["llm_calls_mean"] == 1.0
    bridge = report["configs"]["bridge-entity"]
    assert all(1 <= r["searches"] <= 3 and r["llm_calls_total"] == 1 for r in bridge["questions"])
    router = report["configs"]["llm-router"]
    assert all(r["llm_calls"]["controller"] == 1 and r["searches"] == 1 for r in router["questions"])
    assert router["questions"][0]["tokens"]["controller"]["prompt"] > 0
    # recall of the one-shot run equals a direct BM25 search of 6 chunks
    retriever_store_hits = []
    from haystack.components.retrievers.in_memory import InMemoryBM25Retriever

    retriever = InMemoryBM25Retriever(store)
    for row, record in zip(rows, one_shot["questions"], strict=True):
        docs = retriever.run(query=row["question"], top_k=6)["documents"]
        expected = supporting_recall([d.id for d in docs], gold_document_ids(row))
        retriever_store_hits.append(expected["all_found"] == record["all_gold_found"])
    assert all(retriever_store_hits)

    # report files
    report["meta"] = {"data_name": "sample", "questions": len(rows), "budget": 6}
    json_path = write_json(report, tmp_path / "out" / "eval.json")
    assert json.loads(json_path.read_text())["configs"]["bridge-entity"]["summary"]["questions"] == len(rows)
    png = plot_report(report, tmp_path / "out" / "eval.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    console = Console(record=True, width=250)
    render_table(report, console, per_question=True)
    text = console.export_text()
    assert "bridge-entity" in text and "llm-router" in text and "Per question" in text


def test_retrieval_only_answerer_keeps_draft_and_skips_llm():
    state = LoopState(question="q", pending_action="answer", draft="d")
    assert RetrievalOnlyAnswerer().run(state=state)["finished"].outcome.answer == "d"
    ended = RetrievalOnlyAnswerer().run(state=LoopState(question="q", pending_action="answer"))["finished"]
    assert ended.outcome.terminated_by == "answered" and ended.outcome.answer is None and not ended.usage
    assert "state" in RetrievalOnlyAnswerer().run(state=LoopState(question="q", pending_action="reflect"))


def test_retrieval_only_replaces_the_answerer_and_turns_the_fallback_off(allow_scripted_llm):
    """`SCRIPTED_YAML`'s test LLM is trusted here, as a user trusts their own components."""
    pipeline = build_loop(LoopOptions(pipeline=str(SCRIPTED_YAML)))
    before = {(c["sender"], c["receiver"]) for c in pipeline.to_dict()["connections"]}
    retrieval_only(pipeline)
    assert isinstance(pipeline.get_component("answerer"), RetrievalOnlyAnswerer)
    assert pipeline.get_component("fallback").enabled is False
    assert {(c["sender"], c["receiver"]) for c in pipeline.to_dict()["connections"]} == before
    with pytest.raises(ValueError, match="has none"):
        pipeline.remove_component("answerer")
        retrieval_only(pipeline)


def test_the_embedded_loop_stays_whole_when_retrieval_only():
    """The short-answer stage stays between the answerer and the end (`agentic_rag_embedded` has one)."""
    pipeline = build_loop(LoopOptions(llm="embedded"), notify=lambda _: None)
    retrieval_only(pipeline)
    edges = {(c["sender"], c["receiver"]) for c in pipeline.to_dict()["connections"]}
    assert {("answerer.finished", "extractor.state"), ("extractor.state", "finish.value")} <= edges


@pytest.mark.integration  # the evaluated configurations warm up the packaged MiniLM
def test_eval_script_retrieval_only_writes_files(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    data = tmp_path / "qa.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in load_hotpotqa_questions(sample_corpus_path())[:3]))
    args = build_parser().parse_args(["--data", str(data), "--no-answer", "--out", str(tmp_path / "res"), "--quiet"])
    console = Console(record=True, width=250)
    assert run(args, console) == 0
    report = json.loads((tmp_path / "res" / "qa.json").read_text())
    assert set(report["configs"]) == {"one-shot", "bridge-entity"}
    assert report["meta"]["retrieval_only"] is True
    assert all(r["em"] is None and r["llm_calls_total"] == 0 for r in report["configs"]["one-shot"]["questions"])
    assert (tmp_path / "res" / "qa.png").stat().st_size > 0
    assert "one-shot" in console.export_text()


def test_eval_script_rejects_unknown_config():
    args = build_parser().parse_args(["--configs", "one-shot,magic", "--no-answer"])
    with pytest.raises(EvalError, match="magic"):
        run(args, Console())


@pytest.mark.slow  # runs for many seconds
def test_eval_unanswerable_reports_abstention(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    out_dir = tmp_path / "eval"
    code = main(
        [
            "--unanswerable",
            "--no-answer",
            "--limit",
            "3",
            "--configs",
            "bridge-entity",
            "--out",
            str(out_dir),
            "--json",
            "--quiet",
        ]
    )
    assert code == 0
    totals = json.loads(capsys.readouterr().out)
    summary = totals["hotpotqa_dev_sample"]["bridge-entity"]
    assert summary["unanswerable"] == 3 and summary["normal"] == 3
    assert 0.0 <= summary["abstention_rate"] <= 1.0 and summary["threshold"] is not None
    assert summary["checks"] >= 6 and summary["ms_per_check_mean"] > 0
    report = json.loads((out_dir / "hotpotqa_dev_sample-unanswerable.json").read_text())
    assert {q["condition"] for q in report["configs"]["bridge-entity"]["questions"]} == {"normal", "unanswerable"}


def test_eval_out_that_is_a_file_is_refused_before_the_run(tmp_path, capsys, monkeypatch):
    taken = tmp_path / "results.txt"
    taken.write_text("keep me")
    monkeypatch.setattr("haystack_agentic.indexing.hotpotqa.load_hotpotqa_questions", lambda *_: pytest.fail("ran"))
    assert main(["--no-answer", "--limit", "2", "--out", str(taken)]) == 2
    assert f"--out {taken} is a file: pass a folder" in capsys.readouterr().err
    assert taken.read_text() == "keep me"
