# SPDX-License-Identifier: Apache-2.0
"""
Citations on the shared HotpotQA questions (issue 29): do they point at the gold supporting sentences, and does
their check flag the wrong answers?

    python benchmarks/citations.py --data /work/shared/data/hotpotqa_dev_sample.jsonl --limit 40 --out cite.jsonl
    python benchmarks/citations.py --rescore cite.jsonl      # the figures again from the recorded runs
    python benchmarks/citations.py --replay cite.jsonl       # the same, with the scripted router run again

Two answer paths, on the same questions, the store holding every paragraph of the file (`eval`'s store):
- **offline default**: `eval`'s `bridge-entity` configuration (the packaged embedded pipeline's policy and answerer,
  SmolLM2-135M, greedy, short answers); its citations come from where the short answer was taken.
- **scripted LLM router** (tools mode, `AgenticRouter` + `ScriptedChatGenerator`, no answer LLM): the script replays
  what a plausible LLM does on that question: the searches the offline run made (same queries and `top_k`), then
  `answer(text, sources)` with the offline run's answer and, as `sources`, the short ids of the best chunk of each
  search (one per hop, as a model citing its evidence chain would). Its citations come from the `sources` ids.

Per path: the share of answered questions (an answer, not a give-up) whose citations include a gold supporting
sentence (a citation's quote overlaps a `supporting_facts` sentence of its chunk), among all answered and among the
right ones (EM 1); and the share of the wrong answers (EM 0) that the citation check flags (no citation of the
answer is supported).
"""

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from haystack.components.retrievers.in_memory import InMemoryBM25Retriever  # noqa: E402

from haystack_agentic.components.generators.embedded_chat_generator import EmbeddedChatGenerator  # noqa: E402
from haystack_agentic.components.loop.loop_controller import LoopController  # noqa: E402
from haystack_agentic.components.routers.agentic_router import AgenticRouter  # noqa: E402
from haystack_agentic.datasets.hotpotqa import load_hotpotqa_questions  # noqa: E402
from haystack_agentic.evaluation.metrics import best_answer_scores, gold_answers  # noqa: E402
from haystack_agentic.evaluation.runner import bridge_entity_config, build_store  # noqa: E402
from haystack_agentic.grounding.citations import offline_support, strip_markers  # noqa: E402
from haystack_agentic.llm.result_digests import short_id  # noqa: E402
from haystack_agentic.pipelines.loop_pipeline import build_loop_pipeline  # noqa: E402
from haystack_agentic.testing import ScriptedChatGenerator  # noqa: E402

DEFAULT_DATA = Path(__file__).resolve().parents[1] / "examples" / "data" / "hotpotqa_dev_sample.jsonl"


def gold_spans(row: dict, contents: dict[str, str]) -> dict[str, list[tuple[int, int]]]:
    """For each gold title, the character spans of its supporting sentences in the stored chunk's content."""
    sentences = dict(row["context"])
    spans: dict[str, list[tuple[int, int]]] = {}
    for title, index in row["supporting_facts"]:
        content = contents.get(title)
        if content is None or index >= len(sentences.get(title, [])):
            continue
        sentence = sentences[title][index].strip()
        start = content.find(sentence)
        if start >= 0:
            spans.setdefault(title, []).append((start, start + len(sentence)))
    return spans


def scored(row: dict, result: dict, contents: dict[str, str], seconds: float) -> dict:
    """One run's record: answer, EM, citations, whether one cites a gold sentence, whether the check flags it."""
    answer = result.get("answer")
    answered = answer is not None and result.get("terminated_by") in ("answered", "max_iterations")
    em, f1 = best_answer_scores(strip_markers(answer) if answer else None, gold_answers(row))
    spans = gold_spans(row, contents)
    citations = result.get("citations") or []
    cites_gold = any(
        any(c["start"] < end and c["end"] > start for start, end in spans.get(c["title"], [])) for c in citations
    )
    return {
        "id": row["id"],
        "question": row["question"],
        "gold": row["answer"],
        "answer": answer,
        "answered": answered,
        "em": em,
        "f1": f1,
        "citations": citations,
        "cites_gold_sentence": cites_gold,
        "flagged": not any(c["supported"] for c in citations),
        "seconds": round(seconds, 2),
        "tool_history": result.get("tool_history") or [],
        "documents": [d["id"] for d in result.get("documents") or []],
    }


def replay_script(record: dict) -> list[dict]:
    """The scripted LLM's turns for a question: the offline run's searches, then its answer citing each hop."""
    turns, sources = [], []
    for step in record["tool_history"]:
        if step["action"] != "search" or not step.get("query"):
            continue
        top_k = max(1, len(step["returned_chunk_ids"]))
        turns.append({"tool_calls": [{"tool_name": "search", "arguments": {"query": step["query"], "top_k": top_k}}]})
        if step["returned_chunk_ids"]:
            sources.append(short_id(step["returned_chunk_ids"][0]))
    if not record["answered"]:  # the offline run gave up: so does the scripted model
        turns.append({"tool_calls": [{"tool_name": "give_up", "arguments": {"reason": "not in the documents"}}]})
        return turns
    text = strip_markers(record["answer"] or "") or "unknown"
    turns.append({"tool_calls": [{"tool_name": "answer", "arguments": {"text": text, "sources": sources}}]})
    return turns


def summary(records: list[dict]) -> dict:
    answered = [r for r in records if r["answered"]]
    right = [r for r in answered if r["em"] == 1.0]
    wrong = [r for r in answered if r["em"] == 0.0]

    def share(part: list[dict], key: str) -> str:
        return f"{sum(r[key] for r in part)}/{len(part)}" + (f" ({sum(r[key] for r in part) / len(part):.0%})"
                                                             if part else "")

    return {
        "questions": len(records),
        "answered": len(answered),
        "right (EM 1)": len(right),
        "cite a gold sentence, answered": share(answered, "cites_gold_sentence"),
        "cite a gold sentence, right": share(right, "cites_gold_sentence"),
        "wrong answers flagged": share(wrong, "flagged"),
        "right answers flagged": share(right, "flagged"),
    }


def replayed(record: dict, row: dict, store, contents: dict[str, str]) -> dict:
    """The scripted LLM router's run on a question, replaying the offline run's record."""
    router = AgenticRouter(chat_generator=ScriptedChatGenerator(replay_script(record)))
    scripted = build_loop_pipeline(
        router, InMemoryBM25Retriever(store), controller=LoopController(chunk_cap=6), check_evidence=False
    )
    began = time.perf_counter()
    result = scripted.run({"controller": {"query": row["question"]}})["result"]
    return scored(row, result, contents, time.perf_counter() - began)


def run(data: Path, start: int, limit: int, out: Path) -> dict[str, list[dict]]:
    all_rows = load_hotpotqa_questions(data)
    rows = all_rows[start : start + limit]
    store = build_store(all_rows)
    contents = {d.meta["title"]: d.content for d in store.filter_documents()}
    offline = bridge_entity_config(store, 6, EmbeddedChatGenerator()).pipeline
    offline.warm_up()
    records: dict[str, list[dict]] = {"offline default": [], "scripted LLM router": []}
    with out.open("w", encoding="utf-8") as f:
        for done, row in enumerate(rows, start=1):
            began = time.perf_counter()
            result = offline.run({"controller": {"query": row["question"]}})["result"]
            record = scored(row, result, contents, time.perf_counter() - began)
            records["offline default"].append(record)
            records["scripted LLM router"].append(replayed(record, row, store, contents))
            f.write(json.dumps({name: runs[-1] for name, runs in records.items()}) + "\n")
            f.flush()
            print(f"{done}/{len(rows)} {record['seconds']:.1f}s em={record['em']} {record['answer']!r}", flush=True)
    return records


def replay(data: Path, recorded: Path) -> dict[str, list[dict]]:
    """The recorded offline runs (rechecked) and the scripted router run again on them."""
    all_rows = load_hotpotqa_questions(data)
    by_id = {row["id"]: row for row in all_rows}
    store = build_store(all_rows)
    contents = {d.meta["title"]: d.content for d in store.filter_documents()}
    lines = [json.loads(line) for line in recorded.read_text(encoding="utf-8").splitlines() if line.strip()]
    offline = [rechecked(line["offline default"]) for line in lines]
    return {
        "offline default": offline,
        "scripted LLM router": [replayed(record, by_id[record["id"]], store, contents) for record in offline],
    }


def rechecked(record: dict) -> dict:
    """A recorded run with its citations' offline verdicts recomputed."""
    for citation in record["citations"]:
        if citation["check"] == "offline":
            citation["supported"] = offline_support(citation["claim"], citation["quote"], record["question"],
                                                    citation["title"])
    return {**record, "flagged": not any(c["supported"] for c in record["citations"])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--limit", type=int, default=40)
    parser.add_argument("--out", type=Path, default=Path("citations.jsonl"))
    parser.add_argument("--rescore", type=Path, help="print the figures of a recorded --out file")
    parser.add_argument("--replay", type=Path, help="a recorded --out file: rescore it, run the scripted router again")
    args = parser.parse_args()
    if args.replay:
        records = replay(args.data, args.replay)
    elif args.rescore:  # the offline verdicts again, with the check as it is now (quotes as recorded)
        lines = [json.loads(line) for line in args.rescore.read_text(encoding="utf-8").splitlines() if line.strip()]
        records = {name: [rechecked(line[name]) for line in lines] for name in ("offline default", "scripted LLM router")}
    else:
        records = run(args.data, args.start, args.limit, args.out)
    for name, runs in records.items():
        print(f"\n{name}")
        for key, value in summary(runs).items():
            print(f"  {key}: {value}")


if __name__ == "__main__":
    main()
