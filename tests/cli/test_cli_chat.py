# SPDX-License-Identifier: Apache-2.0
"""`haystack-agentic chat`: one loaded loop, question after question, follow-ups with the conversation so far."""

import io
import json
from pathlib import Path

import pytest
from conftest import SCRIPTED_MODULE
from rich.console import Console

from haystack_agentic.cli.chat import cmd_chat
from haystack_agentic.cli.main import build_parser, main
from haystack_agentic.grounding.citations import strip_markers

SCRIPTED_YAML = Path(__file__).parents[1] / "serving" / "scripted_loop.yml"


@pytest.fixture
def sample_store(tmp_path, monkeypatch):
    store = tmp_path / "store.json"
    monkeypatch.setenv("HAYSTACK_AGENTIC_STORE", str(store))
    monkeypatch.setenv("HAYSTACK_DESERIALIZATION_ALLOWLIST", SCRIPTED_MODULE)  # SCRIPTED_YAML's LLM: the user's trust
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    assert main(["index", "--quiet"]) == 0
    return store


def _chat(lines: str, *flags: str) -> tuple[int, str]:
    """Run `chat --json` on the scripted loop with `lines` as standard input: (exit code, what the console printed)."""
    args = build_parser().parse_args(["chat", "--json", "--pipeline", str(SCRIPTED_YAML), *flags])
    out = io.StringIO()
    console = Console(file=out, width=120)
    code = cmd_chat(args, console, io.StringIO(lines))
    return code, out.getvalue()


def test_each_line_is_answered_by_one_loaded_loop_and_follow_ups_carry_the_conversation(sample_store, capsys):
    code, printed = _chat("Where is Adriana Trigiani based?\n\nAnd where was she born?\n")
    results = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert code == 0 and printed == ""
    assert [r["question"] for r in results] == ["Where is Adriana Trigiani based?", "And where was she born?"]
    assert all(r["terminated_by"] == "answered" for r in results)
    # The follow-up ran with the first exchange before it: user, assistant, user, assistant.
    assert [m["role"] for m in results[1]["messages"]] == ["user", "assistant", "user", "assistant"]
    assert results[1]["messages"][1]["content"][0]["text"] == strip_markers(results[0]["answer"])
    assert results[1]["messages"][2]["content"][0]["text"] == "And where was she born?"


def test_new_starts_a_new_conversation_and_exit_ends_the_session(sample_store, capsys):
    code, _ = _chat("First question?\n/new\nSecond question?\n/exit\nNever asked?\n")
    results = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert code == 0
    assert [r["question"] for r in results] == ["First question?", "Second question?"]
    assert [m["role"] for m in results[1]["messages"]] == ["user", "assistant"]


def test_a_refused_question_says_why_and_the_session_goes_on(sample_store, capsys):
    code, _ = _chat("x" * 20_000 + "\nWhere is Adriana Trigiani based?\n")
    captured = capsys.readouterr()
    results = [json.loads(line) for line in captured.out.splitlines()]  # stdout: only the answers' JSON lines
    assert code == 0
    assert "error:" in captured.err and "4000" in captured.err
    assert [r["question"] for r in results] == ["Where is Adriana Trigiani based?"]


def test_bad_options_fail_before_any_question_is_read(sample_store, capsys):
    assert main(["chat", "--filters", "[1]"]) == 2
    assert "--filters" in capsys.readouterr().err
