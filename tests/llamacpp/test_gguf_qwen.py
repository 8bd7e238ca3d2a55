"""
`haystack-agentic ask --gguf` with a real tool-calling model: Qwen2.5-Coder-0.5B-Instruct (Q4_K_M), fetched by
`install-model --model qwen2.5-coder-0.5b` (kept in the environment, so a second run downloads nothing), run by
llama.cpp in the `ask` process, over the shipped HotpotQA sample. In tools mode the run must search the question, the
model's turns must be routed as tool calls (native, or recovered from its text), and the answer must have words of
its own, drawn from the chunks found. Without `--mode` (json mode, `--gguf`'s default) the README's question must go
through the search policy's searches and end with such an answer. Skipped, with the reason,
only when the model cannot be fetched. A few minutes on 2 cores.
"""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from haystack_agentic.components.routers.agentic_router import POLICY_SEARCH_REASON
from haystack_agentic.grounding.markers import has_own_words
from haystack_agentic.llm.gguf_models import installed_model
from haystack_agentic.llm.loop_tools import BUILTIN_TOOL_NAMES

pytestmark = [pytest.mark.integration]

MODEL = "qwen2.5-coder-0.5b"
HERE = Path(__file__).resolve().parent
#: Two questions the shipped sample (examples/data/hotpotqa_dev_sample.jsonl) answers: the README's, and another.
QUESTIONS = [
    'The director of the romantic comedy "Big Stone Gap" is based in what New York city?',
    "Who worked on the origins of Mickey Mouse and created Oswald the Lucky Rabbit?",
]
#: Bounds for 2 cores: 4 turns, replies long enough for a whole tool call (~40 tokens) and a short answer, a generous
#: per-call timeout.
LIMITS = ["--max-iterations", "4", "--max-tokens", "160", "--timeout", "600"]
#: Seconds one `ask` may take, and the download of the model (~490 MB).
ASK_DEADLINE = 900
INSTALL_DEADLINE = 1800
#: Words that say nothing about where an answer came from.
FILLER = frozenset("the a an of in on at to is was and or for by with from as that this it its be are".split())


def cli(*args: str, env: dict | None = None, timeout: float) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "haystack_agentic.cli.main", *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=timeout, check=False)


@pytest.fixture(scope="module")
def qwen_gguf() -> Path:
    """The 0.5B GGUF in this environment, fetched with `install-model` the first time."""
    path = installed_model(MODEL)
    if path is None:
        done = cli("install-model", "--model", MODEL, timeout=INSTALL_DEADLINE)
        path = installed_model(MODEL)
        if done.returncode != 0 or path is None:
            reason = ((done.stderr or done.stdout).strip().splitlines() or ["no output"])[-1]
            pytest.skip(f"cannot fetch {MODEL} with install-model: {reason}")
    return path


@pytest.fixture(scope="module")
def ask_env(tmp_path_factory) -> dict:
    """The environment of `ask`: this checkout's package, a fresh cache (the shipped sample is indexed into it on
    first use, as on a fresh clone), no OpenAI settings."""
    from serving.conftest import server_env

    env = server_env()
    env.pop("OPENAI_BASE_URL", None)
    env["HAYSTACK_AGENTIC_CACHE"] = str(tmp_path_factory.mktemp("gguf-cache"))
    return env


def words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in FILLER}


def assert_drawn_from_the_chunks(result: dict) -> None:
    """The answer's words (its markers left out) are all words of the run's chunks."""
    answer = words(re.sub(r"\[\d+\]", " ", result["answer"]))
    chunk_words = set().union(*(words(document["content"] or "") for document in result["documents"]))
    assert answer and answer <= chunk_words, (result["answer"], [d["content"][:200] for d in result["documents"]])


@pytest.mark.parametrize("question", QUESTIONS)
def test_ask_gguf_searches_and_answers_from_the_chunks(qwen_gguf, ask_env, question):
    done = cli(
        "ask",
        question,
        "--gguf",
        str(qwen_gguf),
        "--mode",
        "tools",
        "--json",
        *LIMITS,
        env=ask_env,
        timeout=ASK_DEADLINE,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    trace = json.dumps({k: result[k] for k in ("answer", "terminated_by", "tool_history")}, ensure_ascii=False)[:4000]
    searches = [step for step in result["tool_history"] if step["action"] == "search"]
    # One-shot RAG's retrieval at least: the question itself, searched first without an LLM call.
    assert searches and searches[0]["query"] == question and searches[0]["returned_chunk_ids"], trace
    # The model's own turns were routed as tool calls (native, or recovered from its text), not taken as text: the
    # failure of issue 38 was 24 of 24 replies writing calls as text that the loop took as the answer. (Searches of
    # its own beyond the first are not asserted: the 0.5B model repeats the question's search; see the note.)
    # (Steps the loop made without an LLM call, if any, are left out.)
    own_calls = [
        step
        for step in result["tool_history"]
        if step["tool_name"] in ("search", "answer", "give_up")
        and not (step["reasoning"] or "").startswith(POLICY_SEARCH_REASON)
    ]
    assert own_calls, trace
    assert result["terminated_by"] in ("answered", "max_iterations"), (result["terminated_by"], trace)
    assert has_own_words(result["answer"], BUILTIN_TOOL_NAMES), trace  # not empty, not only markers or tool-call text
    # Written from the chunks: its words are the chunks' words (the 0.5B's answer to the first question, "New York
    # city", is wrong but drawn from them; correctness is the benchmark's business, docs/benchmarks.md).
    assert_drawn_from_the_chunks(result)


def test_ask_gguf_without_mode_routes_in_json_mode_after_the_policy_searches(qwen_gguf, ask_env):
    question = QUESTIONS[0]  # the README's, typed as the README types it: no --mode, no limits (--gguf's 300 s timeout)
    done = cli("ask", question, "--gguf", str(qwen_gguf), "--json", env=ask_env, timeout=ASK_DEADLINE)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    steps = result["tool_history"]
    trace = json.dumps({k: result[k] for k in ("answer", "terminated_by", "tool_history")}, ensure_ascii=False)[:4000]
    # json mode: no step is a tool call; the policy searched the question first, without an LLM call
    assert steps and all(step["tool_name"] is None for step in steps), trace
    assert steps[0]["action"] == "search" and steps[0]["query"] == question, trace
    assert steps[0]["reasoning"].startswith(POLICY_SEARCH_REASON) and steps[0]["returned_chunk_ids"], trace
    assert result["terminated_by"] in ("answered", "max_iterations"), (result["terminated_by"], trace)
    assert has_own_words(result["answer"], BUILTIN_TOOL_NAMES), trace
    assert_drawn_from_the_chunks(result)


def test_chat_gguf_answers_a_follow_up_on_the_same_llama_cpp_server(qwen_gguf, ask_env):
    # Two questions in one session: the OpenAI client's pooled connections belong to the event loop of its first
    # request, so a session that ran each question on a new loop failed the second with "Event loop is closed".
    lines = f"{QUESTIONS[1]}\nWhen was he born?\n"
    command = [sys.executable, "-m", "haystack_agentic.cli.main", "chat", "--gguf", str(qwen_gguf), "--json", *LIMITS]
    done = subprocess.run(
        command, input=lines, capture_output=True, text=True, env=ask_env, timeout=2 * ASK_DEADLINE, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    results = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert len(results) == 2, (done.stdout[-2000:], done.stderr[-3000:])
    for result in results:
        assert result["error"] is None and result["terminated_by"] in ("answered", "max_iterations"), result
        assert has_own_words(result["answer"], BUILTIN_TOOL_NAMES), result["answer"]
    assert "Event loop is closed" not in done.stderr
