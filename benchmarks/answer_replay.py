# SPDX-License-Identifier: Apache-2.0
"""
The answer step alone, replayed on recorded loop runs (issue 38): one LLM call per question and answer prompt.

`benchmarks/real_llm.py --json FILE` records each run's searches. This script repeats those searches on the same
pooled BM25 store (top 5 each, merged as the loop merges them), then writes the answer from the resulting chunks with
`Answerer` under each prompt variant, so answer prompts can be compared on the same evidence at one call per question
instead of a whole loop run each:

- `current`: `Answerer`'s defaults (chunks as blocks, the short-answer instruction after the question);
- `lines`: the answer prompt before issue 38's third session (one line per chunk, no system message);
- `one-shot`: `real_llm.py`'s one-shot prompt over the same chunks (no citations).

It prints, per variant, exact match, F1 and how many prompts held every gold paragraph, with the recorded loop's F1
on the same questions. Usage (a llama.cpp server starts in-process and stops at the end):

    python benchmarks/answer_replay.py --records runs/hotpot.jsonl \\
        --data /work/shared/data/hotpotqa_dev_sample.jsonl --gguf qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
"""

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from haystack.components.builders import ChatPromptBuilder
from haystack.dataclasses import ChatMessage

from benchmarks.harness.gold import gold_document_ids
from benchmarks.harness.metrics import best_answer_scores, gold_answers
from benchmarks.real_llm import ONE_SHOT_PROMPT, ONE_SHOT_SYSTEM, TOP_K, chat_generator
from haystack_agentic import Answerer, LoopState, ToolStep
from haystack_agentic.components.generators.answerer import prompt_chunks
from haystack_agentic.dataclasses.loop_state import merge_chunks
from haystack_agentic.document_stores.sparse_bm25_document_store import SparseBM25DocumentStore
from haystack_agentic.grounding.markers import strip_markers
from haystack_agentic.indexing.hotpotqa import hotpotqa_documents, load_hotpotqa_questions
from haystack_agentic.llm.llamacpp_server import LlamaCppServer

#: The answer prompt before issue 38's third session, kept here as the baseline of the comparison.
LINES_PROMPT = """\
Answer the question using only the context. Reply with the answer only, in words: a name, place, date or short
phrase, not a sentence about the context.

Context:
{{ chunks }}

Question: {{ question }}
Answer:"""
VARIANTS = ("current", "lines", "one-shot")
#: Chunks the answer prompt shows (`Answerer`'s default `max_chunks`).
MAX_CHUNKS = 6


def replayed_state(record: dict[str, Any], store: SparseBM25DocumentStore) -> LoopState:
    """The loop state after the record's searches (each searched once, in order), waiting for its answer."""
    chunks: tuple = ()
    steps = []
    for number, query in enumerate(dict.fromkeys(record["queries"]), start=1):
        found = store.bm25_retrieval(query, top_k=TOP_K)
        chunks = merge_chunks(chunks, found, chunk_cap=10_000)
        steps.append(ToolStep(number, "search", query=query, returned_chunk_ids=tuple(d.id for d in found)))
    return LoopState(question=record["question"], chunks=chunks, tool_history=tuple(steps), pending_action="answer")


def answer(variant: str, state: LoopState, generator: Any) -> str:
    """The answer of one prompt variant from the state's chunks."""
    if variant == "one-shot":
        builder = ChatPromptBuilder(
            template=[ChatMessage.from_system(ONE_SHOT_SYSTEM), ChatMessage.from_user(ONE_SHOT_PROMPT)],
            required_variables="*",
        )
        documents = prompt_chunks(state, MAX_CHUNKS)
        messages = builder.run(documents=documents, question=state.question)["prompt"]
        return generator.run(messages=messages)["replies"][0].text or ""
    options = {"generate_prompt": LINES_PROMPT, "system_prompt": ""} if variant == "lines" else {}
    answerer = Answerer(chat_generator=generator, temperature=0.0, max_chunks=MAX_CHUNKS, **options)
    return answerer.run(state=state)["finished"].outcome.answer or ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=Path, required=True, help="Records written by real_llm.py --json.")
    parser.add_argument("--data", type=Path, required=True, help="The HotpotQA/MuSiQue-format file of the records.")
    parser.add_argument("--gguf", type=Path, required=True, help="The GGUF model that writes the answers.")
    parser.add_argument("--system", default="json", help="Whose recorded searches to replay (default json).")
    parser.add_argument("--variants", default=",".join(VARIANTS), help=f"Comma-separated subset of {VARIANTS}.")
    parser.add_argument("--n", type=int, default=None, help="Replay only the first N records.")
    args = parser.parse_args()
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    if not variants or set(variants) - set(VARIANTS):
        parser.error(f"--variants: choose from {', '.join(VARIANTS)}")

    rows = load_hotpotqa_questions(args.data)
    by_id = {row["id"]: row for row in rows}
    store = SparseBM25DocumentStore(index="answer-replay")
    store.write_documents(hotpotqa_documents(rows, title_in_content=True))
    lines = args.records.read_text(encoding="utf-8").splitlines()
    records = [r for r in map(json.loads, lines) if r["system"] == args.system and r["id"] in by_id][: args.n]
    if not records:
        parser.error(f"--records: no {args.system!r} record of a question in {args.data.name}")

    scores: dict[str, list[tuple[float, float, bool]]] = {v: [] for v in variants}
    with LlamaCppServer(args.gguf, n_ctx=8192, threads=2) as server:
        generator = chat_generator(server, 256, 600.0)
        for record in records:
            row = by_id[record["id"]]
            state = replayed_state(record, store)
            gold = set(gold_document_ids(row))
            shown = {doc.id for doc in prompt_chunks(state, MAX_CHUNKS)}
            for variant in variants:
                text = answer(variant, state, generator)
                em, f1 = best_answer_scores(strip_markers(text), gold_answers(row))
                scores[variant].append((em, f1, gold <= shown))
                print(f"{variant}\t{f1:.2f}\t{text[:60]!r}\t(gold: {row['answer'][:40]!r})", flush=True)

    loop_f1 = statistics.fmean(r["f1"] for r in records)
    print(f"\n{len(records)} recorded {args.system} runs of {args.data.name}; the loop's own F1 {loop_f1:.3f}")
    print("| answer prompt | N | exact match | F1 | prompts holding all gold |")
    print("|---|---|---|---|---|")
    for variant, got in scores.items():
        em = sum(e for e, _, _ in got)
        f1 = statistics.fmean(f for _, f, _ in got)
        print(f"| {variant} | {len(got)} | {em:.0f}/{len(got)} | {f1:.3f} | {sum(g for _, _, g in got)}/{len(got)} |")


if __name__ == "__main__":
    main()
