# SPDX-License-Identifier: Apache-2.0
"""
The answer step alone, replayed on recorded loop runs (issue 38): one LLM call per question and answer prompt.

`benchmarks/real_llm.py --json FILE` records each run's searches and the chunks each returned. This script rebuilds
those chunks on the same pooled BM25 store (each search's returned chunks, scored by its query, merged as the loop
merges them; records without returned chunk ids repeat each search at top 5), then writes the answer from them with
`Answerer` under each variant, so answer steps can be compared on the same evidence at one call per question instead
of a whole loop run each:

- `current`: the packaged json loop's answer step (`Answerer`'s prompts, the best `JSON_ANSWER_CHUNKS_PER_SEARCH`
  chunks of each search in search order, at most `JSON_ANSWER_CHUNKS`);
- `by-score`: the same prompts over the run's best `JSON_ANSWER_CHUNKS` chunks by score (before issue 38's sixth
  session);
- `lines`: the answer prompt before issue 38's third session (one line per chunk, no system message);
- `one-shot`: `real_llm.py`'s one-shot prompt over the same chunks as `current` (no citations).

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
from haystack.document_stores.in_memory import InMemoryDocumentStore

from benchmarks.harness.gold import gold_document_ids
from benchmarks.harness.metrics import best_answer_scores, gold_answers
from benchmarks.real_llm import ONE_SHOT_PROMPT, ONE_SHOT_SYSTEM, TOP_K, chat_generator
from haystack_agentic import Answerer, LoopState, ToolStep
from haystack_agentic.components.generators.answerer import prompt_chunks
from haystack_agentic.dataclasses.loop_state import merge_chunks
from haystack_agentic.grounding.markers import strip_markers
from haystack_agentic.indexing.hotpotqa import hotpotqa_documents, load_hotpotqa_questions
from haystack_agentic.llm.llamacpp_server import LlamaCppServer
from haystack_agentic.pipelines.default_pipelines import JSON_ANSWER_CHUNKS, JSON_ANSWER_CHUNKS_PER_SEARCH

#: The answer prompt before issue 38's third session, kept here as the baseline of the comparison.
LINES_PROMPT = """\
Answer the question using only the context. Reply with the answer only, in words: a name, place, date or short
phrase, not a sentence about the context.

Context:
{{ chunks }}

Question: {{ question }}
Answer:"""
VARIANTS = ("current", "by-score", "lines", "one-shot")
#: What each variant's prompt shows: `(max_chunks, chunks_per_search)` for `prompt_chunks` (the others: `current`'s).
SHOWN = {"current": (JSON_ANSWER_CHUNKS, JSON_ANSWER_CHUNKS_PER_SEARCH), "by-score": (JSON_ANSWER_CHUNKS, None)}


def shown(variant: str) -> tuple[int, int | None]:
    """`(max_chunks, chunks_per_search)` of a variant's prompt."""
    return SHOWN.get(variant, SHOWN["current"])


def replayed_state(record: dict[str, Any], store: InMemoryDocumentStore) -> LoopState:
    """
    The loop state after the record's searches, waiting for its answer.

    Each recorded search step's returned chunks, scored by its query over the whole store (a page search narrowed by
    a filter returned chunks the unfiltered ranking scores the same); a record without returned chunk ids (written
    before they were recorded) repeats each distinct query at top 5.
    """
    searches = [s for s in record.get("steps") or [] if s.get("action") == "search" and "returned_chunk_ids" in s]
    if not searches:
        searches = [{"query": q, "returned_chunk_ids": None} for q in dict.fromkeys(record["queries"])]
    chunks: tuple = ()
    steps = []
    for number, search in enumerate(searches, start=1):
        wanted = search["returned_chunk_ids"]
        if wanted is None:
            found = store.bm25_retrieval(search["query"], top_k=TOP_K)
        else:
            scored = {d.id: d for d in store.bm25_retrieval(search["query"], top_k=store.count_documents())}
            found = [scored[i] for i in wanted if i in scored]
        chunks = merge_chunks(chunks, found, chunk_cap=10_000)
        steps.append(ToolStep(number, "search", query=search["query"], returned_chunk_ids=tuple(d.id for d in found)))
    return LoopState(question=record["question"], chunks=chunks, tool_history=tuple(steps), pending_action="answer")


def answer(variant: str, state: LoopState, generator: Any) -> str:
    """The answer of one prompt variant from the state's chunks."""
    if variant == "one-shot":
        builder = ChatPromptBuilder(
            template=[ChatMessage.from_system(ONE_SHOT_SYSTEM), ChatMessage.from_user(ONE_SHOT_PROMPT)],
            required_variables="*",
        )
        documents = prompt_chunks(state, *shown(variant))
        messages = builder.run(documents=documents, question=state.question)["prompt"]
        return generator.run(messages=messages)["replies"][0].text or ""
    options = {"generate_prompt": LINES_PROMPT, "system_prompt": ""} if variant == "lines" else {}
    max_chunks, per_search = shown(variant)
    answerer = Answerer(
        chat_generator=generator, temperature=0.0, max_chunks=max_chunks, chunks_per_search=per_search, **options
    )
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
    store = InMemoryDocumentStore()  # the pooled store of real_llm.py
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
            for variant in variants:
                in_prompt = {doc.id for doc in prompt_chunks(state, *shown(variant))}
                text = answer(variant, state, generator)
                em, f1 = best_answer_scores(strip_markers(text), gold_answers(row))
                scores[variant].append((em, f1, gold <= in_prompt))
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
