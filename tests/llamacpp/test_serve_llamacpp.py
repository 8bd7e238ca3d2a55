"""
`haystack-agentic serve` and `ask` in front of a real llama.cpp server (the packaged SmolLM2-135M): the `openai`
client streamed and not, and `ask`'s one line when the server's template has no tools. One turn, few tokens: CI runs
these on 2 cores.
"""

import os
import subprocess
import sys

import pytest
from serving.conftest import serve_process, server_env, write_test_store

pytestmark = [pytest.mark.integration, pytest.mark.slow]

QUESTION = "Who directed Big Stone Gap?"
#: One turn, short replies (96 tokens: a whole JSON decision fits; the answerer and the evidence judge use the server
#: too).
LIMITS = ["--max-iterations", "1", "--max-tokens", "96", "--timeout", "120"]


@pytest.fixture(scope="module")
def served(llamacpp, tmp_path_factory):
    root = tmp_path_factory.mktemp("serve-llamacpp")
    store = write_test_store(root / "store.json")
    env = {**server_env(), "OPENAI_API_KEY": "none"}
    args = [
        "--llm",
        "openai",
        "--mode",
        "json",
        "--base-url",
        llamacpp.base_url,
        "--model",
        llamacpp.model_name,
        "--store",
        str(store),
        *LIMITS,
    ]
    with serve_process(root, args, env=env) as server:
        yield server


def test_serve_answers_the_openai_client_streamed_and_not_with_the_same_text(served):
    from openai import OpenAI

    client = OpenAI(base_url=f"{served.url}/v1", api_key="unused", timeout=600)
    messages = [{"role": "user", "content": QUESTION}]
    whole = client.chat.completions.create(model="agentic_rag", messages=messages)
    text = whole.choices[0].message.content
    assert isinstance(text, str) and text.strip()
    stream = client.chat.completions.create(model="agentic_rag", messages=messages, stream=True)
    streamed = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    # temperature 0: the same run, the same reply; the model's own `[n]` markers are left out as they stream, as the
    # final answer leaves them out before the loop's citations
    assert streamed == text


def test_ask_says_in_one_line_it_uses_json_mode_when_the_template_has_no_tools(llamacpp, tmp_path):
    store = write_test_store(tmp_path / "store.json")
    env = {**os.environ, "OPENAI_API_KEY": "none", "HAYSTACK_TELEMETRY_ENABLED": "False"}
    base = [
        sys.executable,
        "-m",
        "haystack_agentic.cli.main",
        "ask",
        QUESTION,
        "--llm",
        "openai",
        "--base-url",
        llamacpp.base_url,
        "--model",
        llamacpp.model_name,
        "--store",
        str(store),
        *LIMITS,
    ]
    done = subprocess.run(base, capture_output=True, text=True, env=env, timeout=900, check=False)
    notes = [line for line in done.stderr.splitlines() if "JSON mode" in line]
    assert done.returncode == 0 and len(notes) == 1 and "no tool support" in notes[0], done.stderr[-2000:]
    refused = subprocess.run(
        [*base, "--mode", "tools"], capture_output=True, text=True, env=env, timeout=300, check=False
    )
    assert refused.returncode == 2 and "--mode json" in refused.stderr


def test_serve_gguf_runs_llama_cpp_once_in_its_own_process_and_answers(tmp_path):
    import httpx

    from llamacpp.conftest import SMOLLM2_GGUF

    if not SMOLLM2_GGUF.is_file():
        pytest.skip(f"no SmolLM2 GGUF at {SMOLLM2_GGUF} (run `haystack-agentic install-model`)")
    store = write_test_store(tmp_path / "store.json")
    with serve_process(tmp_path, ["--gguf", str(SMOLLM2_GGUF), "--store", str(store), *LIMITS]) as server:
        reply = httpx.post(f"{server.url}/agentic_rag/run", json={"query": QUESTION}, timeout=600)
        assert reply.status_code == 200, reply.text[:2000]
        result = reply.json()["result"]["result"]  # hayhooks wraps the wrapper's {"result": ...}
        # not `error`: the pipeline chosen from /props (json mode: SmolLM2's template has no tools) ran on the server
        assert result["terminated_by"] in ("answered", "gave_up", "max_iterations"), result
        log = server.log.read_text()
    assert log.count("Starting llama.cpp on") == 1, log[-3000:]  # once, in the serve process
