# SPDX-License-Identifier: Apache-2.0
"""What `ask` and `chat` show of an answer's citations: a Sources list after the answer, one line per citation cut
to the terminal width, the unsupported ones flagged and named in one line; `--json` carries them as data."""

import io
import json
from pathlib import Path

import pytest
import yaml
from citing_result import CITING_TYPE, with_citations
from conftest import DOCS, SCRIPTED_MODULE
from haystack.document_stores.in_memory import InMemoryDocumentStore
from rich.cells import cell_len
from rich.console import Console

from haystack_agentic.cli.ask_output import print_trace
from haystack_agentic.cli.chat import cmd_chat
from haystack_agentic.cli.main import build_parser, main

SCRIPTED_YAML = Path(__file__).parents[1] / "serving" / "scripted_loop.yml"
QUESTION = "Where is Adriana Trigiani based?"
QUOTE_1 = "Adriana Trigiani is an Italian American best-selling author and film director."
QUOTE_2 = "Big Stone Gap is a 2014 American drama romance film written and directed by Adriana Trigiani."


def citation(n: int, document_id: str, title: str | None, quote: str, supported: bool | None) -> dict:
    return {
        "n": n,
        "document_id": document_id,
        "title": title,
        "quote": quote,
        "start": 0,
        "end": len(quote),
        "claim": "Adriana Trigiani is based in Greenwich Village.",
        "search": {"iteration": 1, "query": "q"},
        "supported": supported,
        "check": "offline" if supported is not None else None,
    }


def result_with(citations: list[dict] | None) -> dict:
    result = {
        "answer": "Adriana Trigiani [1] is based in Greenwich Village [2].",
        "terminated_by": "answered",
        "iterations": 2,
        "tool_history": [],
        "documents": [{"id": "trigiani", "meta": {"title": "Adriana Trigiani"}}],
        "grounding": None,
        "usage": {},
        "error": None,
        "metadata": {},
        "evidence": None,
    }
    if citations is not None:
        result["citations"] = citations
    return result


def printed(result: dict) -> str:
    out = io.StringIO()
    print_trace(Console(file=out, width=300, soft_wrap=True), QUESTION, result, 0.1, {"llm": "x", "policy": "y"})
    return out.getvalue()


def test_sources_follow_the_answer_one_line_each_with_the_unsupported_flagged(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    text = printed(
        result_with(
            [
                citation(1, "trigiani", "Adriana Trigiani", QUOTE_1, True),
                citation(
                    2, "bsg", None, "Big Stone Gap is a\n  2014 film.\x1b[2J", False
                ),  # no title: the id stands in
            ]
        )
    )
    lines = text.splitlines()
    answer = lines.index("Answer: Adriana Trigiani [1] is based in Greenwich Village [2].")  # the markers kept
    assert lines[answer + 1 : answer + 5] == [
        "Sources:",
        f'  [1] Adriana Trigiani: "{QUOTE_1}"',
        '  [2] (unsupported) bsg: "Big Stone Gap is a 2014 film.\\x1b[2J"',  # one line, no terminal escape
        "  The offline check found [2] unsupported: its quoted sentence does not support the claim.",
    ]


def test_a_source_line_is_cut_to_the_terminal_width_with_an_ellipsis(monkeypatch):
    monkeypatch.setenv("COLUMNS", "40")
    wide = "東京は日本の首都であり、最大の都市である。"  # two terminal cells per character
    text = printed(
        result_with(
            [citation(1, "trigiani", "Adriana Trigiani", QUOTE_1, None), citation(2, "tokyo", "東京", wide, True)]
        )
    )
    lines = text.splitlines()
    sources = lines[lines.index("Sources:") + 1 :][:2]
    assert sources[0] == '  [1] Adriana Trigiani: "Adriana Trigia…' and len(sources[0]) == 40
    assert sources[1].startswith('  [2] 東京: "東京は') and sources[1].endswith("…")
    assert cell_len(sources[1]) in (39, 40)  # a wide character that would straddle the edge is left out
    assert "unsupported" not in text  # supported or not checked: no flag, no note


@pytest.mark.parametrize("citations", [None, []])
def test_an_answer_without_citations_is_said_to_have_no_source(citations):
    lines = printed(result_with(citations)).splitlines()
    answer = lines.index("Answer: Adriana Trigiani [1] is based in Greenwich Village [2].")
    assert lines[answer + 1] == (
        "Sources: none. No chunk of this run says this answer: it is unsupported, check it before relying on it."
    )


def test_a_run_without_an_answer_prints_no_sources():
    text = printed({**result_with([]), "answer": "I could not find the answer.", "terminated_by": "gave_up"})
    assert "Sources" not in text and "unsupported" not in text


# --- the commands, on a real scripted loop whose result builder cites (tests/citing_result.py) ---------------


@pytest.fixture
def cited_loop(tmp_path, monkeypatch):
    """The scripted loop YAML with citations (the second unsupported) and a store of the unit tests' documents."""
    monkeypatch.setenv("HAYSTACK_DESERIALIZATION_ALLOWLIST", f"{CITING_TYPE.rsplit('.', 1)[0]},{SCRIPTED_MODULE}")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.setenv("COLUMNS", "120")
    pipeline = tmp_path / "cited.yml"
    pipeline.write_text(yaml.safe_dump(with_citations(yaml.safe_load(SCRIPTED_YAML.read_text()), unsupported=[2])))
    store = InMemoryDocumentStore()
    store.write_documents(DOCS)
    store.save_to_disk(str(tmp_path / "store.json"))
    return ["--pipeline", str(pipeline), "--store", str(tmp_path / "store.json")]


def test_ask_prints_the_sources_and_json_has_the_citations(cited_loop, capsys):
    assert main(["ask", QUESTION, "--quiet", *cited_loop]) == 0
    lines = capsys.readouterr().out.splitlines()
    start = lines.index("Sources:")
    assert lines[start - 1] == f"Answer: Answer to: {QUESTION} [1][2]"
    assert lines[start + 1] == f'  [1] Adriana Trigiani: "{QUOTE_1}"'
    assert (
        lines[start + 2].startswith('  [2] (unsupported) Big Stone Gap (film): "Big Stone Gap is')
        and len(lines[start + 2]) == 120
        and lines[start + 2].endswith("…")
    )
    assert lines[start + 3].startswith("  The offline check found [2] unsupported")
    assert main(["ask", QUESTION, "--json", *cited_loop]) == 0
    result = json.loads(capsys.readouterr().out)
    assert [(c["n"], c["document_id"], c["quote"], c["supported"]) for c in result["citations"]] == [
        (1, "trigiani", QUOTE_1, True),
        (2, "bsg", QUOTE_2, False),
    ]


def test_chat_prints_the_sources_of_an_answer_that_has_citations_and_json_lines_have_them(cited_loop, capsys):
    args = build_parser().parse_args(["chat", "--quiet", *cited_loop])
    out = io.StringIO()
    questions = io.StringIO(f"{QUESTION}\nAnd since when?\n")
    assert cmd_chat(args, Console(file=out, width=200, soft_wrap=True), questions) == 0
    first, second = out.getvalue().split("Question: And since when?")
    assert f'Sources:\n  [1] Adriana Trigiani: "{QUOTE_1}"\n  [2] (unsupported) Big Stone Gap' in first
    # the follow-up answered without searching: no chunks, no citations, said so
    assert "Sources: none. No chunk of this run says this answer" in second
    args = build_parser().parse_args(["chat", "--json", *cited_loop])
    assert cmd_chat(args, Console(file=io.StringIO()), io.StringIO(f"{QUESTION}\n")) == 0
    result = json.loads(capsys.readouterr().out)
    assert [c["n"] for c in result["citations"]] == [1, 2] and result["answer"].endswith("[1][2]")


@pytest.mark.parametrize(
    ("error", "hinted"),
    [
        ("Controller LLM failed: APITimeoutError: Request timed out.", True),
        ("Answer LLM failed: RuntimeError: boom", False),
    ],
)
def test_an_llm_call_over_its_timeout_names_the_flag_that_moves_it(error, hinted):
    text = printed({**result_with([]), "answer": None, "terminated_by": "error", "error": error})
    assert error in text
    assert ("--timeout SECONDS" in text) is hinted
