# SPDX-License-Identifier: Apache-2.0
"""
A real LLM drives the loop (issue 38): one GGUF behind llama.cpp's own server, five systems, one pooled BM25 store.

For the first `--n` questions of a HotpotQA/MuSiQue-format JSONL file, with one store holding every paragraph of the
file (title + text, in memory, Haystack's BM25) and the same model for every system:
- `one-shot`: a plain Haystack pipeline: `InMemoryBM25Retriever` top 5 for the question -> `ChatPromptBuilder`
  (titles and chunk text, "answer with a short phrase") -> `OpenAIChatGenerator`;
- `agent`: Haystack's `Agent` with a `search` tool over the same retriever (top 5);
- `tools`, `json`: our loop through the public API (`build_loop(LoopOptions(llm="openai", base_url=..., mode=...))`),
  its retriever's in-memory store filled with the same paragraphs;
- `offline`: our offline default (`LoopOptions(llm="embedded")`: bridge policy + SmolLM2, no llama.cpp).
Grounding is left as the packaged YAML has it (`grounding="pipeline"`: HHEM, skipped without its local weights), so no
system spends LLM calls on grounding.

llama.cpp's server runs in this process (the library's `LlamaCppServer`: `xllamacpp`, 127.0.0.1, a free port, Jinja
chat template, `--threads` threads) and stops at the end. Questions run one after the other, every selected system on a
question before the next question, so the systems always have the same questions whenever the run is stopped. Per
system it prints exact match, F1 (SQuAD/HotpotQA normalisation, best over MuSiQue's aliases), all gold paragraphs seen
(the gold paragraphs of the supporting facts among the chunks retrieved during the run), how runs ended, LLM calls per
question (median, mean), seconds per question, and tool calls recovered from text (when the loop records them; `n/a`
otherwise).

`--json FILE` appends one record per (system, question) as it finishes; running again with the same file skips what
it holds (resume), and the figures cover the file's records for the selected questions.

    python benchmarks/real_llm.py --data /work/shared/data/hotpotqa_dev_sample.jsonl --n 40 \\
        --gguf /work/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf --json runs/hotpot.jsonl
"""

import argparse
import contextlib
import hashlib
import json
import os
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from haystack import Pipeline
from haystack.components.agents import Agent
from haystack.components.builders import ChatPromptBuilder
from haystack.components.generators.chat import OpenAIChatGenerator
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.dataclasses import ChatMessage
from haystack.document_stores.in_memory import InMemoryDocumentStore
from haystack.document_stores.types import DuplicatePolicy
from haystack.tools import Tool
from haystack.utils import Secret

from benchmarks.harness.gold import gold_document_ids
from benchmarks.harness.metrics import (
    best_answer_scores,
    gold_answers,
    normalize_answer,
    supporting_recall,
)
from haystack_agentic import LoopOptions, build_loop
from haystack_agentic.document_stores.sparse_bm25_document_store import SparseBM25DocumentStore
from haystack_agentic.grounding.markers import strip_markers
from haystack_agentic.indexing.hotpotqa import hotpotqa_documents, load_hotpotqa_questions
from haystack_agentic.llm.llamacpp_server import LlamaCppServer
from haystack_agentic.llm.text_tool_calls import RECOVERED_TOOL_CALLS
from haystack_agentic.loop_loading import retriever_store
from haystack_agentic.pipelines.loop_pipeline import loop_inputs

SYSTEMS = ("one-shot", "agent", "tools", "json", "offline")
#: Chunks per search of the one-shot pipeline and the Agent's tool (the loop keeps its own defaults).
TOP_K = 5
#: The Agent's most LLM turns (our loop's packaged `max_iterations` is of the same order).
AGENT_MAX_STEPS = 6
#: The keys of each recorded step (besides its returned chunk ids), for replays of the run.
STEP_KEYS = ("action", "query", "tool_name", "result", "reasoning")
#: What the last column says for systems whose runs cannot record recovered tool calls.
RECOVERY_NOT_RECORDED = {
    "one-shot": "- (no tools)",
    "offline": "- (no tools)",
    "agent": "none (Agent does not recover)",
}

ONE_SHOT_SYSTEM = "You answer questions from documents. Give the shortest possible answer, a few words, no explanation."
ONE_SHOT_PROMPT = """\
Documents:
{% for doc in documents %}[{{ loop.index }}] {{ doc.meta.title }}
{{ doc.content }}

{% endfor %}Question: {{ question }}
Answer with a short phrase (a name, place, date or number), nothing else."""

AGENT_SYSTEM = (
    "You answer questions using the search tool, which searches Wikipedia paragraphs. Search for what you need, "
    "then answer with a short phrase (a name, place, date or number), nothing else."
)


def sha256_prefix(path: Path, chars: int = 12) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()[:chars]


def chat_generator(server: LlamaCppServer, max_tokens: int, timeout: float) -> OpenAIChatGenerator:
    return OpenAIChatGenerator(
        model=server.model_name,
        api_base_url=server.base_url,
        api_key=Secret.from_token("none"),
        max_retries=0,
        timeout=timeout,
        generation_kwargs={"max_tokens": max_tokens, "temperature": 0.0},
    )


def fill_loop_store(pipeline: Pipeline, documents: list, pooled: InMemoryDocumentStore) -> None:
    """Put the pooled paragraphs (same ids) in the loop pipeline's in-memory store, and check it ranks as the pool."""
    store = retriever_store(pipeline)
    if not isinstance(store, InMemoryDocumentStore):
        msg = f"the loop pipeline's retriever store is {type(store).__name__}, not an in-memory store"
        raise TypeError(msg)
    if store.count_documents() != len(documents):
        store.write_documents(documents, policy=DuplicatePolicy.OVERWRITE)
    probe = documents[0].content[:80]
    same = [d.id for d in store.bm25_retrieval(probe, top_k=TOP_K)] == [
        d.id for d in pooled.bm25_retrieval(probe, top_k=TOP_K)
    ]
    if store.count_documents() != len(documents) or not same:
        msg = "the loop pipeline's store does not hold or rank the pooled paragraphs as the pool does"
        raise RuntimeError(msg)


class System:
    """One system under test: `run(question)` -> a partial record (answer, ended, llm_calls, chunk ids, ...)."""

    def __init__(self, name: str, run) -> None:
        self.name, self.run = name, run


def one_shot_system(pooled: InMemoryDocumentStore, server: LlamaCppServer, max_tokens: int, timeout: float) -> System:
    pipeline = Pipeline()
    pipeline.add_component("retriever", InMemoryBM25Retriever(pooled, top_k=TOP_K))
    template = [ChatMessage.from_system(ONE_SHOT_SYSTEM), ChatMessage.from_user(ONE_SHOT_PROMPT)]
    pipeline.add_component("prompt_builder", ChatPromptBuilder(template=template, required_variables="*"))
    pipeline.add_component("llm", chat_generator(server, max_tokens, timeout))
    pipeline.connect("retriever.documents", "prompt_builder.documents")
    pipeline.connect("prompt_builder.prompt", "llm.messages")

    def run(question: str) -> dict[str, Any]:
        out = pipeline.run(
            {"retriever": {"query": question}, "prompt_builder": {"question": question}},
            include_outputs_from={"retriever"},
        )
        reply = out["llm"]["replies"][0]
        return {
            "answer": reply.text,
            "terminated_by": "answered",
            "llm_calls": 1,
            "queries": [question],
            "chunk_ids": [d.id for d in out["retriever"]["documents"]],
            "recovered": None,
        }

    return System("one-shot", run)


def agent_system(pooled: InMemoryDocumentStore, server: LlamaCppServer, max_tokens: int, timeout: float) -> System:
    retriever = InMemoryBM25Retriever(pooled, top_k=TOP_K)
    seen: list[str] = []
    queries: list[str] = []

    def search(query: str) -> str:
        documents = retriever.run(query=query)["documents"]
        queries.append(query)
        seen.extend(d.id for d in documents)
        return "\n\n".join(f"[{i}] {d.meta.get('title', '')}\n{d.content}" for i, d in enumerate(documents, 1))

    tool = Tool(
        name="search",
        description="Search Wikipedia paragraphs; returns the best 5 with their titles.",
        parameters={
            "type": "object",
            "properties": {"query": {"type": "string", "description": "What to search for."}},
            "required": ["query"],
        },
        function=search,
    )
    agent = Agent(
        chat_generator=chat_generator(server, max_tokens, timeout),
        tools=[tool],
        system_prompt=AGENT_SYSTEM,
        max_agent_steps=AGENT_MAX_STEPS,
    )
    agent.warm_up()

    def run(question: str) -> dict[str, Any]:
        seen.clear()
        queries.clear()
        out = agent.run(messages=[ChatMessage.from_user(question)])
        messages = out["messages"]
        last = out.get("last_message") or messages[-1]
        ended = "answered" if last.is_from("assistant") and not last.tool_calls else "max_steps"
        return {
            "answer": last.text if ended == "answered" else None,
            "terminated_by": ended,
            "llm_calls": sum(m.is_from("assistant") for m in messages),
            "queries": list(queries),
            "chunk_ids": list(seen),
            "recovered": None,
            "steps": [
                {"role": str(m.role.value), "text": str(m.text)[:300], "tool_calls": len(m.tool_calls)}
                for m in messages[1:]
            ],
        }

    return System("agent", run)


def recovered_calls(result: dict[str, Any]) -> int:
    """Tool calls the router recovered from reply text (`metadata["recovered_tool_calls"]`, absent: none)."""
    return int((result.get("metadata") or {}).get(RECOVERED_TOOL_CALLS, 0))


def unreached_limits(pipeline: Pipeline, timeout: float | None) -> list[str]:
    """The loop's chat generators whose `timeout` is not `timeout` (what `LoopOptions.timeout` did not reach)."""
    if timeout is None:
        return []
    found = []
    for name, component in pipeline.walk():
        generator = getattr(component, "chat_generator", None)
        seconds = getattr(generator, "timeout", None)
        if seconds is not None and seconds != timeout:
            found.append(f"{name} ({seconds:g} s)")
    return found


def loop_system(name: str, options: LoopOptions, documents: list, pooled: InMemoryDocumentStore) -> System:
    count_recovered = options.llm == "openai"  # the embedded default's router calls no tools
    pipeline = build_loop(options)
    unreached = unreached_limits(pipeline, options.timeout)
    if unreached:
        print(f"note: {name}: the timeout of {options.timeout:g} s did not reach {', '.join(unreached)}", flush=True)
    fill_loop_store(pipeline, documents, pooled)
    pipeline.warm_up()

    def run(question: str) -> dict[str, Any]:
        result = pipeline.run(loop_inputs(pipeline, question))["result"]
        steps = result.get("tool_history") or []
        chunk_ids = [d.id for d in result.get("documents") or []]
        chunk_ids += [cid for step in steps for cid in step.get("returned_chunk_ids") or []]
        return {
            "answer": result.get("answer"),
            "terminated_by": result.get("terminated_by"),
            "llm_calls": int((result.get("usage") or {}).get("total", {}).get("calls", 0)),
            "queries": [step.get("query") for step in steps if step.get("action") == "search"],
            "chunk_ids": chunk_ids,
            "recovered": recovered_calls(result) if count_recovered else None,
            "error": result.get("error"),
            "steps": [
                {
                    **{key: str(step.get(key))[:300] for key in STEP_KEYS},
                    "returned_chunk_ids": list(step.get("returned_chunk_ids") or []),
                }
                for step in steps
            ],
        }

    return System(name, run)


def score(row: dict[str, Any], partial: dict[str, Any], seconds: float) -> dict[str, Any]:
    answer = strip_markers(partial.get("answer"))
    em, f1 = best_answer_scores(answer, gold_answers(row))
    gold = supporting_recall(partial.get("chunk_ids") or [], gold_document_ids(row))
    record = {
        "id": row["id"],
        "question": row["question"],
        "gold": row["answer"],
        "answer": partial.get("answer"),
        "em": em,
        "f1": f1,
        "all_gold_seen": gold["all_found"],
        "gold_found": gold["found"],
        "gold_total": gold["total"],
        "terminated_by": partial.get("terminated_by"),
        "llm_calls": partial.get("llm_calls"),
        "seconds": seconds,
        "queries": partial.get("queries") or [],
        "recovered": partial.get("recovered"),
    }
    for key in ("error", "steps"):
        if partial.get(key):
            record[key] = partial[key]
    return record


def run_one(system: System, row: dict[str, Any]) -> dict[str, Any]:
    start = time.perf_counter()
    try:
        partial = system.run(row["question"])
    except Exception as exc:
        partial = {"terminated_by": "exception", "llm_calls": None, "error": f"{type(exc).__name__}: {exc}"[:500]}
    return score(row, partial, time.perf_counter() - start)


def without_words(record: dict[str, Any]) -> bool:
    """An `answered` run whose answer has no words of its own: nothing left after removing `[n]` markers,
    punctuation and articles, or a tool call written as text (a JSON object, a fence or a `<tool...>` tag)."""
    if record["terminated_by"] != "answered":
        return False
    text = (strip_markers(record.get("answer")) or "").strip()
    return not normalize_answer(text) or text.startswith(("{", "```", "<tool"))


def summary_rows(records: list[dict[str, Any]], systems: list[str]) -> list[str]:
    lines = [
        (
            "| system | N | exact match | F1 | all gold paragraphs seen | how runs ended | answered without words "
            "| LLM calls / question (median, mean) | seconds / question | tool calls recovered from text |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name in systems:
        group = [r for r in records if r["system"] == name]
        if not group:
            continue
        n = len(group)
        em = sum(r["em"] for r in group)
        f1 = statistics.fmean(r["f1"] for r in group)
        seen = sum(bool(r["all_gold_seen"]) for r in group)
        ended = ", ".join(f"{count} {how}" for how, count in Counter(r["terminated_by"] for r in group).most_common())
        calls = [r["llm_calls"] for r in group if r["llm_calls"] is not None]
        calls_text = f"{statistics.median(calls):g}, {statistics.fmean(calls):.1f}" if calls else "n/a"
        seconds = statistics.fmean(r["seconds"] for r in group)
        recovered = [r["recovered"] for r in group if r.get("recovered") is not None]
        recovered_text = str(sum(recovered)) if recovered else RECOVERY_NOT_RECORDED.get(name, "n/a (not recorded)")
        lines.append(
            f"| {name} | {n} | {em:.0f}/{n} | {f1:.3f} | {seen}/{n} | {ended} | {sum(map(without_words, group))} | "
            f"{calls_text} | {seconds:.1f} | {recovered_text} |"
        )
    return lines


def goal_lines(records: list[dict[str, Any]]) -> list[str]:
    """Issue 38's goal, checked on these records (the best of `tools` and `json` by F1 against the others)."""
    by_system: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        by_system.setdefault(record["system"], []).append(record)
    f1 = {name: statistics.fmean(r["f1"] for r in group) for name, group in by_system.items()}
    ours = [name for name in ("tools", "json") if name in f1]
    if not ours:
        return []
    best = max(ours, key=f1.__getitem__)
    group = by_system[best]
    calls = [r["llm_calls"] for r in group if r["llm_calls"] is not None]
    lines = [f"goal, best LLM-driven mode = {best} (F1 {f1[best]:.3f}):"]
    for other, margin in (("one-shot", 0.10), ("agent", 0.10), ("offline", 0.0)):
        if other in f1:
            ok = f1[best] >= f1[other] + margin - 1e-9
            lines.append(f"  F1 >= {other} ({f1[other]:.3f}) + {margin:.2f}: {'yes' if ok else 'no'}")
    if "offline" in by_system:
        seen = sum(bool(r["all_gold_seen"]) for r in group)
        policy = sum(bool(r["all_gold_seen"]) for r in by_system["offline"])
        lines.append(f"  all gold seen >= offline policy: {seen} vs {policy}: {'yes' if seen >= policy else 'no'}")
    lines.append(f"  answered without words: {sum(map(without_words, group))} (goal 0)")
    if calls:
        lines.append(f"  median LLM calls {statistics.median(calls):g} (goal <= 5)")
    return lines


def load_records(path: Path | None, meta: dict[str, Any]) -> list[dict[str, Any]]:
    """The records already in `--json` (same data file and model), for a resumed run."""
    if path is None or not path.exists():
        return []
    records = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        record = json.loads(line)
        if record.get("data") != meta["data"] or record.get("model_sha256") != meta["model_sha256"]:
            msg = (
                f"{path}:{number} holds a run of another data file or model ({record.get('data')}, "
                f"{record.get('model_sha256')}); pass a new --json file."
            )
            raise SystemExit(msg)
        records.append(record)
    return records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True, help="HotpotQA/MuSiQue-format JSONL file.")
    parser.add_argument("--n", type=int, default=40, help="Questions from the start of the file (default 40).")
    parser.add_argument("--gguf", type=Path, required=True, help="The GGUF model every LLM system uses.")
    parser.add_argument("--systems", default=",".join(SYSTEMS), help=f"Comma-separated subset of {','.join(SYSTEMS)}.")
    parser.add_argument(
        "--max-tokens",
        type=int,
        default=None,
        help="Most tokens per reply of every LLM call (default: 256 for one-shot and agent, the "
        "packaged per-role limits for our loop).",
    )
    parser.add_argument(
        "--max-iterations", type=int, default=None, help="Turns of our LLM loops (default: the packaged pipeline's)."
    )
    parser.add_argument("--timeout", type=float, default=600.0, help="Seconds one LLM call may take (default 600).")
    parser.add_argument("--ctx", type=int, default=8192, help="llama.cpp context size in tokens (default 8192).")
    parser.add_argument("--threads", type=int, default=2, help="llama.cpp CPU threads (default 2).")
    parser.add_argument("--json", type=Path, default=None, help="Append per-question records here; resume from it.")
    args = parser.parse_args()

    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    unknown = [s for s in systems if s not in SYSTEMS]
    if unknown or not systems:
        parser.error(f"--systems: unknown {unknown}; choose from {', '.join(SYSTEMS)}")
    if args.n < 1:
        parser.error("--n must be at least 1")
    if args.max_tokens is not None and args.max_tokens < 1:
        parser.error("--max-tokens must be at least 1")
    try:
        server = LlamaCppServer(args.gguf, n_ctx=args.ctx, threads=args.threads)
    except (OSError, ValueError) as exc:
        parser.error(f"--gguf {args.gguf}: {exc}")

    rows = load_hotpotqa_questions(args.data)
    selected = rows[: args.n]
    documents = hotpotqa_documents(rows, title_in_content=True)
    pooled = SparseBM25DocumentStore(index=f"real-llm-{os.getpid()}")
    pooled.write_documents(documents)
    meta = {"data": args.data.name, "model": args.gguf.name, "model_sha256": sha256_prefix(args.gguf)}
    records = load_records(args.json, meta)
    done = {(r["system"], r["id"]) for r in records}
    load_start = os.getloadavg()
    print(
        f"{meta['data']}: {len(selected)} of {len(rows)} questions, pooled store {len(documents)} paragraphs; "
        f"model {meta['model']} (sha256 {meta['model_sha256']}...); systems {', '.join(systems)}; "
        f"{len(done)} records resumed; load average {load_start[0]:.2f}",
        flush=True,
    )

    llm_tokens = args.max_tokens or 256
    todo = [
        (number, row, name)
        for number, row in enumerate(selected, 1)
        for name in systems
        if (name, row["id"]) not in done
    ]
    needs_server = any(name != "offline" for _, _, name in todo)
    wall = time.perf_counter()
    with contextlib.ExitStack() as stack:
        if needs_server:
            stack.enter_context(server)
        built: dict[str, System] = {}
        for name in dict.fromkeys(name for _, _, name in todo):
            if name == "one-shot":
                built[name] = one_shot_system(pooled, server, llm_tokens, args.timeout)
            elif name == "agent":
                built[name] = agent_system(pooled, server, llm_tokens, args.timeout)
            elif name in ("tools", "json"):
                options = LoopOptions(
                    llm="openai",
                    mode=name,
                    model=server.model_name,
                    base_url=server.base_url,
                    timeout=args.timeout,
                    max_tokens=args.max_tokens,
                    max_iterations=args.max_iterations,
                    context_tokens=args.ctx,
                    grounding="pipeline",
                )
                built[name] = loop_system(name, options, documents, pooled)
            else:
                built[name] = loop_system(name, LoopOptions(llm="embedded", grounding="pipeline"), documents, pooled)
        out = stack.enter_context(args.json.open("a", encoding="utf-8")) if args.json else None
        for number, row, name in todo:
            record = {"system": name, **meta, **run_one(built[name], row)}
            records.append(record)
            if out:
                out.write(json.dumps(record, ensure_ascii=False) + "\n")
                out.flush()
            print(
                f"{number:3d}/{len(selected)} {name:<8} {record['terminated_by']:<14} "
                f"F1 {record['f1']:.2f} gold {record['gold_found']}/{record['gold_total']} "
                f"calls {record['llm_calls']} {record['seconds']:.1f}s  {str(record['answer'])[:60]!r}",
                flush=True,
            )
    # The figures cover the questions every selected system has finished, so the rows compare the same questions.
    finished: dict[str, set[str]] = {}
    for record in records:
        finished.setdefault(record["id"], set()).add(record["system"])
    complete = [row["id"] for row in selected if set(systems) <= finished.get(row["id"], set())]
    shown = [r for r in records if r["id"] in set(complete) and r["system"] in systems]
    load_end = os.getloadavg()
    print(
        f"\n{meta['data']}, model {meta['model']} (sha256 {meta['model_sha256']}...), top {TOP_K}: "
        f"{len(complete)} of {len(selected)} questions finished by every system; "
        f"{time.perf_counter() - wall:.0f} s this run; load average {load_start[0]:.2f} at start, "
        f"{load_end[0]:.2f} at end"
    )
    print("\n".join(summary_rows(shown, systems) + goal_lines(shown)))


if __name__ == "__main__":
    main()
