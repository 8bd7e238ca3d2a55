# SPDX-License-Identifier: Apache-2.0
"""
Time to the first streamed answer token through `haystack-agentic serve`, against the whole answer's time.

Starts `python -m haystack_agentic.cli.serve` on 127.0.0.1 (a free port, one worker, no MCP) and asks it questions
one at a time with the `openai` client (`stream=True`) on `/v1/chat/completions`, timing from the request to
- the first chunk of any kind (the first step line, `delta.reasoning_content`),
- the first token an LLM streams (`delta.content`, or model text streamed as `delta.reasoning_content`: the
  embedded default's answer model streams its tokens there and sends its short answer span as content at the end),
- the first `delta.content` (the answer's first token),
- the end of the stream (the whole answer);
median and p95 over `--questions` questions of the shipped HotpotQA sample.

Two set-ups:
- `scripted` (default): the package's loop graph (`build_loop_pipeline`, AgenticRouter in tools mode, SafeRetriever +
  BM25 over every shipped paragraph, no evidence check) with a scripted controller (search the question, then
  answer a draft; `--latency` s a call) and an answer LLM that rewrites the draft and streams like a served model
  (`PacedChatGenerator`: the first token after `--first-token` s, then one word every `--token-interval` s).
  The ideal: controller calls x latency + first token (first content), + the answer's words x interval (end).
- `embedded` (`--embedded`): the packaged offline default (`serve` without `--pipeline`: bridge-entity router,
  evidence check, SmolLM2-135M answering), its cache in `--cache` (the default store is indexed and the model
  converted there on first use; a first untimed question warms it up).

    python benchmarks/serve_first_token.py [--questions 10] [--latency 0.2] [--first-token 0.2] [--embedded]
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import corpus_store
from _paced_llm import PacedChatGenerator
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.dataclasses import ChatMessage
from openai import OpenAI
from scripted_chat_generator import (
    ScriptedChatGenerator,
    stream_chunks,
)
from serve_throughput import SERVER_ENV, free_port, stop, wait_until_up

from haystack_agentic import AgenticRouter, LoopController, build_loop_pipeline
from haystack_agentic.components.generators.answerer import Answerer
from haystack_agentic.components.retrievers.safe_retriever import SafeRetriever
from haystack_agentic.document_stores.sparse_bm25_document_store import SparseBM25DocumentStore

CONTROLLER_CALLS = 2  # search, answer (the draft)
#: The answer LLM's reply: 24 words, streamed one by one.
ANSWER = " ".join(f"word{i}" for i in range(24))
BENCHMARKS = Path(__file__).resolve().parent


def scripted_yaml(latency: float, first_token: float, token_interval: float) -> str:
    """The loop graph with a scripted controller and a paced, streaming answer LLM."""
    controller_llm = ScriptedChatGenerator(
        [
            {"template": True, "tool_calls": [{"tool_name": "search", "arguments": {"query": "{{ question }}"}}]},
            {"tool_calls": [{"tool_name": "answer", "arguments": {"text": "a draft"}}]},
        ],
        latency=latency,
    )
    answer_llm = PacedChatGenerator([{"text": ANSWER}], first_token=first_token, token_interval=token_interval)
    retriever = SafeRetriever(InMemoryBM25Retriever(SparseBM25DocumentStore(index="ttft-bench"), top_k=5))
    pipeline = build_loop_pipeline(
        AgenticRouter(chat_generator=controller_llm),
        retriever,
        controller=LoopController(max_iterations=4),
        answerer=Answerer(chat_generator=answer_llm),
        check_evidence=False,
    )
    return pipeline.dumps()


def start_server(workdir: Path, args: argparse.Namespace, store) -> tuple[subprocess.Popen, str, str]:
    """Start `serve`; returns the process, its base URL and the model name to ask."""
    port = free_port()
    env = {**os.environ, **SERVER_ENV}
    env["PYTHONPATH"] = os.pathsep.join([str(BENCHMARKS), SERVER_ENV["PYTHONPATH"]])  # `_paced_llm`
    # the paced and scripted LLMs: ours to trust (serve trusts no module the package does not ship)
    env["HAYSTACK_DESERIALIZATION_ALLOWLIST"] = f"_paced_llm.*,{ScriptedChatGenerator.__module__}"
    command = [sys.executable, "-m", "haystack_agentic.cli.serve", "--port", str(port), "--mcp-port", "0"]
    if args.embedded:
        env["HAYSTACK_AGENTIC_CACHE"] = str(Path(args.cache).resolve())
        name = "agentic_rag"
    else:
        store.save_to_disk(str(workdir / "store.json"))
        (workdir / "ttft.yml").write_text(scripted_yaml(args.latency, args.first_token, args.token_interval))
        command += ["--pipeline", f"ttft={workdir / 'ttft.yml'}", "--store", str(workdir / "store.json")]
        name = "ttft"
    log = workdir / "server.log"
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=log.open("w"), stderr=subprocess.STDOUT, env=env, cwd=workdir)
    wait_until_up(process, f"http://127.0.0.1:{port}", log, timeout=600)
    print(f"server up in {time.perf_counter() - started:.1f} s", flush=True)
    return process, f"http://127.0.0.1:{port}", name


def ask(client: OpenAI, model: str, question: str) -> dict:
    """One streamed question: seconds to the first chunk, the first content token and the end; the answer."""
    start = time.perf_counter()
    first_chunk = first_content = first_llm = None
    parts = []
    stream = client.chat.completions.create(model=model, messages=[{"role": "user", "content": question}], stream=True)
    for chunk in stream:
        now = time.perf_counter() - start
        if first_chunk is None:
            first_chunk = now
        for choice in chunk.choices:
            extra = choice.delta.model_extra or {}
            if (
                first_llm is None
                and (choice.delta.content or extra.get("reasoning_content"))
                and not extra.get("agentic_step")
            ):
                first_llm = now  # an LLM's own token (answer content, or model text streamed as reasoning)
            if choice.delta.content:
                if first_content is None:
                    first_content = now
                parts.append(choice.delta.content)
    total = time.perf_counter() - start
    return {
        "first_chunk": first_chunk,
        "first_content": first_content,
        "first_llm": first_llm,
        "total": total,
        "answer": "".join(parts),
    }


def _p95(values: list[float]) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(0.95 * len(values)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=int, default=10, help="Timed questions (default 10).")
    parser.add_argument("--latency", type=float, default=0.2, help="Seconds per scripted controller call.")
    parser.add_argument("--first-token", type=float, default=0.2, help="Seconds to the answer LLM's first token.")
    parser.add_argument("--token-interval", type=float, default=0.02, help="Seconds per further answer token.")
    parser.add_argument("--embedded", action="store_true", help="Serve the packaged offline default instead.")
    cache = Path(tempfile.gettempdir()) / "haystack-agentic-bench-cache"
    parser.add_argument("--cache", default=str(cache), help="Cache dir for --embedded.")
    args = parser.parse_args()
    store, _, rows = corpus_store(questions=100_000)
    questions = [row["question"] for row in rows]
    print(f"machine: {os.cpu_count()} CPUs, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} at start")
    with tempfile.TemporaryDirectory() as tmp:
        process, url, model = start_server(Path(tmp), args, store)
        try:
            client = OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=600)
            warm = ask(client, model, questions[-1])  # untimed: first-call caches, BM25 matrix, model warm-up
            print(f"warm-up question: {warm['total']:.2f} s, answer {warm['answer'][:80]!r}", flush=True)
            runs = [ask(client, model, q) for q in questions[: args.questions]]
        finally:
            stop(process)
    missing = sum(r["first_content"] is None for r in runs)
    timed = [r for r in runs if r["first_content"] is not None]
    print(
        f"{'set-up':<10} {'questions':>9} {'first chunk s':>13} {'first LLM token s':>17} "
        f"{'first content token s (median / p95)':>37} {'whole answer s (median / p95)':>30} "
        f"{'first content / whole':>21}"
    )
    first = [r["first_content"] for r in timed]
    total = [r["total"] for r in timed]
    chunk = [r["first_chunk"] for r in runs]
    llm = [r["first_llm"] for r in runs if r["first_llm"] is not None]
    setup = "embedded" if args.embedded else "scripted"
    print(
        f"{setup:<10} {len(runs):>9} {statistics.median(chunk):>13.3f} "
        f"{statistics.median(llm) if llm else float('nan'):>17.3f} "
        f"{statistics.median(first):>27.3f} / {_p95(first):.3f} {statistics.median(total):>20.3f} / {_p95(total):.3f} "
        f"{statistics.median(first) / statistics.median(total):>21.2f}"
    )
    if missing:
        print(f"{missing} answers streamed no content token (their answer came whole at the end)")
    if not args.embedded:
        ideal_first = CONTROLLER_CALLS * args.latency + args.first_token
        pieces = sum(1 for c in stream_chunks(ChatMessage.from_assistant(ANSWER)) if c.content)
        ideal_total = ideal_first + (pieces - 1) * args.token_interval
        print(
            f"ideal: first token {ideal_first:.3f} s, whole answer {ideal_total:.3f} s; overhead (median): "
            f"{1000 * (statistics.median(first) - ideal_first):.1f} ms to the first token, "
            f"{1000 * (statistics.median(total) - ideal_total):.1f} ms to the end"
        )
        # The served chat adds what follows the answer (its sources, or a note naming an uncited sentence).
        scripted = all(r["answer"].startswith(ANSWER) for r in runs)
        print(
            f"answers {'as scripted' if scripted else 'DIFFER from the script'}; after the answer: "
            f"{runs[0]['answer'][len(ANSWER) :][:160]!r}"
        )
    else:
        print(f"sample answer: {runs[0]['answer'][:120]!r}")
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} at end")


if __name__ == "__main__":
    main()
