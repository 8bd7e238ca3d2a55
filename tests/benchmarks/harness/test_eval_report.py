# SPDX-License-Identifier: Apache-2.0
"""The eval table fits 80, 100 and 120 columns without cutting a number; the plot shows what the run has."""

import copy
import math
import re
import struct

import pytest
from rich.console import Console
from scripted_chat_generator import ScriptedChatGenerator

from benchmarks.harness.plot import bootstrap_mean_interval, plot_points, plot_report, wilson_interval
from benchmarks.harness.report import left_out_note, render_table
from benchmarks.harness.runner import (
    bridge_entity_config,
    build_store,
    llm_router_config,
    one_shot_config,
    run_eval,
)
from haystack_agentic.indexing.hotpotqa import load_hotpotqa_questions
from haystack_agentic.resources import sample_corpus_path


@pytest.fixture(scope="module")
def rows():
    return load_hotpotqa_questions(sample_corpus_path())[:6]


@pytest.fixture(scope="module")
def answered(rows):
    """A report with answers from all three configurations, its figures made as wide as they get."""
    script = [
        {"tool_calls": [{"tool_name": "search", "arguments": {"query": "{{ question }}"}}], "template": True},
        {"tool_calls": [{"tool_name": "answer", "arguments": {"text": "yes"}}]},
    ]
    store = build_store(rows)
    answer_llm = ScriptedChatGenerator([{"text": "yes"}], per_call=True)
    configs = [
        one_shot_config(store, 6, answer_llm),
        bridge_entity_config(store, 6, answer_llm),
        llm_router_config(store, ScriptedChatGenerator(script), 6),
    ]
    report = run_eval(rows, configs)
    report["meta"] = {"data_name": "sample", "questions": len(rows), "budget": 6, "retrieval_only": False}
    wide = report["configs"]["llm-router"]["summary"]
    wide.update(
        prompt_tokens_mean=1234567.0,
        completion_tokens_mean=98765.4,
        latency_median_s=123.4567,
        latency_p90_s=9876.54321,
        searches_mean=12.3456,
        searches_max=99,
        grounding_mean=0.87654,
        terminated_by={"answered": 4, "max_iterations": 1, "error": 1},
    )
    return report


@pytest.fixture(scope="module")
def retrieval_only(rows):
    store = build_store(rows)
    report = run_eval(rows, [one_shot_config(store), bridge_entity_config(store)], with_answer=False)
    report["meta"] = {"data_name": "sample", "questions": len(rows), "budget": 6, "retrieval_only": True}
    return report


def _pct(value):
    return f"{100 * value:.1f}%"


def summary_numbers(report):
    """Every figure of the summary as the table must print it, formatted here independently of the table."""
    numbers = []
    for s in (entry["summary"] for entry in report["configs"].values()):
        numbers += [_pct(s[k]) for k in ("em", "f1", "all_gold_recall", "gold_recall") if s[k] is not None]
        numbers += [f"{s['searches_mean']:.2f}", f"({s['searches_max']})", f"{s['iterations_mean']:.2f}"]
        numbers += [f"{s['llm_calls_mean']:.2f}"]
        numbers += ["+".join(f"{s['llm_calls_per_role_mean'][r]:.2f}" for r in ("controller", "answer", "fallback"))]
        numbers += [f"{s['prompt_tokens_mean']:.0f}+{s['completion_tokens_mean']:.0f}"]
        numbers += [f"{s['latency_median_s']:.3f}", f"({s['latency_p90_s']:.3f})"]
        numbers += [f"{s['grounding_mean']:.2f}"] if s["grounding_mean"] is not None else []
        numbers += [f"{k} {v}" for k, v in s["terminated_by"].items()]
    return numbers


def question_numbers(report):
    numbers = []
    for entry in report["configs"].values():
        for r in entry["questions"]:
            numbers += [str(r["id"]), f"{r['gold_found']}/{r['gold_total']}", f"{r['latency_s']:.2f}"]
            numbers += [f"{r['f1']:.2f}"] if r["f1"] is not None else []
    return numbers


def render(report, width, per_question=False):
    console = Console(record=True, width=width)
    render_table(report, console, per_question=per_question)
    return console.export_text()


def intact(number, text):
    """The number appears as a whole: not cut, and not only as part of a longer number."""
    return re.search(rf"(?<![\w.+]){re.escape(number)}(?![\w.+])", " ".join(text.split())) is not None


@pytest.mark.integration  # the evaluated configurations warm up the packaged MiniLM
@pytest.mark.parametrize("width", [80, 100, 120])
@pytest.mark.parametrize("per_question", [False, True])
def test_every_number_is_intact_at_common_widths(answered, width, per_question):
    text = render(answered, width, per_question)
    assert "…" not in text
    assert max(len(line) for line in text.splitlines()) <= width
    numbers = summary_numbers(answered) + (question_numbers(answered) if per_question else [])
    cut = [number for number in numbers if not intact(number, text)]
    assert cut == [], f"at {width} columns these figures are cut or missing: {cut}"


def test_the_intact_check_sees_a_cut_number():
    assert intact("1234567+98765", "│ 1234567+98765 │")
    assert not intact("1234567+98765", "│ 1234567+987… │")
    assert not intact("0.50", "10.50")


@pytest.mark.integration  # the evaluated configurations warm up the packaged MiniLM
def test_a_wide_console_gets_one_table_a_narrow_one_several(answered):
    wide = render(answered, 250)
    assert wide.count("┏") == 1
    narrow = render(answered, 80)
    assert narrow.count("┏") >= 2 and narrow.count("config") == narrow.count("┏")  # each repeats the name


@pytest.mark.integration  # the evaluated configurations warm up the packaged MiniLM
def test_retrieval_only_leaves_out_empty_columns_and_says_so(retrieval_only):
    text = render(retrieval_only, 100)
    headers = " ".join(line for line in text.splitlines() if "┃" in line)
    assert " EM " not in headers and " F1 " not in headers and "grounding" not in headers
    note = "Not shown: EM, F1 (no answers scored); grounding (no grounding scores)."
    assert left_out_note(retrieval_only) == note
    assert note in " ".join(text.split())
    cut = [n for n in summary_numbers(retrieval_only) if not intact(n, text)]
    assert cut == []


def test_wilson_interval_known_values():
    assert wilson_interval(0, 10) == (0.0, pytest.approx(0.2775, abs=1e-4))
    assert wilson_interval(5, 10) == (pytest.approx(0.2366, abs=1e-4), pytest.approx(0.7634, abs=1e-4))
    assert wilson_interval(10, 10)[1] == 1.0
    with pytest.raises(ValueError, match="successes"):
        wilson_interval(11, 10)


def test_bootstrap_interval():
    values = [0.0, 0.2, 0.5, 1.0, 1.0, 0.4] * 5
    low, high = bootstrap_mean_interval(values)
    mean = sum(values) / len(values)
    assert low < mean < high
    assert bootstrap_mean_interval(values) == (low, high)  # fixed seed: reproducible
    wider_low, wider_high = bootstrap_mean_interval(values[:6])
    assert wider_high - wider_low > high - low  # fewer questions, wider interval
    assert bootstrap_mean_interval([0.3] * 20) == (0.3, 0.3)
    with pytest.raises(ValueError):
        bootstrap_mean_interval([])


def _png_size(path):
    width, height = struct.unpack(">II", path.read_bytes()[16:24])
    return width, height


@pytest.mark.integration  # the evaluated configurations warm up the packaged MiniLM
def test_plot_points_have_intervals_and_n(answered, retrieval_only):
    points, x_label = plot_points(answered)
    assert x_label == "LLM calls per question"
    assert [p.name for p in points] == ["one-shot", "bridge-entity", "llm-router"]
    for point in points:
        records = answered["configs"][point.name]["questions"]
        assert point.n == len(records)
        found = sum(r["all_gold_found"] for r in records)
        assert point.recall == found / len(records)
        assert (point.recall_low, point.recall_high) == wilson_interval(found, len(records))
        assert point.f1_low <= point.f1 <= point.f1_high
        assert point.x_low <= point.x <= point.x_high
    points, x_label = plot_points(retrieval_only)
    assert x_label.startswith("searches per question")  # no LLM calls: the calls axis would be all zeros
    assert all(p.f1 is None for p in points)


@pytest.mark.integration  # the evaluated configurations warm up the packaged MiniLM
def test_plot_omits_the_answer_panel_in_retrieval_only_runs(answered, retrieval_only, tmp_path):
    with_answers = _png_size(plot_report(answered, tmp_path / "answered.png"))
    without = _png_size(plot_report(retrieval_only, tmp_path / "retrieval.png"))
    assert without[0] < with_answers[0] and math.isclose(with_answers[0] / without[0], 2, rel_tol=0.05)


def test_plot_of_an_empty_report_says_so(tmp_path):
    empty = copy.deepcopy({"configs": {"one-shot": {"questions": [], "summary": {}}}})
    with pytest.raises(ValueError, match="nothing to plot"):
        plot_report(empty, tmp_path / "x.png")
