# SPDX-License-Identifier: Apache-2.0
"""
Citations on the shared HotpotQA questions (issue 29): do they point at the gold supporting sentences, and does
their check flag the wrong answers?

    python benchmarks/citations.py --data /work/shared/data/hotpotqa_dev_sample.jsonl --limit 40 --out cite.jsonl
    python benchmarks/citations.py --rescore cite.jsonl      # the figures again from the recorded runs
    python benchmarks/citations.py --replay cite.jsonl       # the same, with the scripted router run again
    python benchmarks/citations.py --recite cite.jsonl       # the offline citations chosen again by today's `cite`
    python benchmarks/citations.py --oracle                  # the choice rule alone, every question, no LLM

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

Each offline record keeps what its answerer passed to `cite` (the state, the text, the shown chunks, the location),
so `--recite` measures a change to how citations are chosen without running the LLM again (its answers are the
same: nothing before `cite` depends on it).

`--oracle` measures how the cited sentence is chosen, on every question of the file and without an LLM: a right
short answer (the gold answer) read from the first of the shown chunks that holds it (as the short-answer rule
reads it), the shown chunks being BM25's top 6 for the question plus the gold paragraphs (both hops found); an
option of the question ("A or B") has no location, as the rule gives none. Yes/no questions are left out.
"""

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]  # the checkout and its test doubles (the scripted LLM)

from haystack.components.retrievers.in_memory import InMemoryBM25Retriever  # noqa: E402
from scripted_chat_generator import ScriptedChatGenerator  # noqa: E402

from benchmarks.harness.metrics import best_answer_scores, gold_answers  # noqa: E402
from benchmarks.harness.runner import bridge_entity_config, build_store  # noqa: E402
from haystack_agentic.components.extractors import short_answer_extractor as extractor_module  # noqa: E402
from haystack_agentic.components.generators import answerer as answerer_module  # noqa: E402
from haystack_agentic.components.generators import fallback_synthesizer as fallback_module  # noqa: E402
from haystack_agentic.components.generators.embedded_chat_generator import EmbeddedChatGenerator  # noqa: E402
from haystack_agentic.components.loop.loop_controller import LoopController  # noqa: E402
from haystack_agentic.components.routers.agentic_router import AgenticRouter  # noqa: E402
from haystack_agentic.dataclasses.loop_state import LoopState  # noqa: E402
from haystack_agentic.grounding import citations as citations_module  # noqa: E402
from haystack_agentic.grounding.citations import offline_support, strip_markers  # noqa: E402
from haystack_agentic.indexing.hotpotqa import load_hotpotqa_questions  # noqa: E402
from haystack_agentic.llm.result_digests import short_id  # noqa: E402
from haystack_agentic.pipelines.loop_pipeline import build_loop_pipeline  # noqa: E402

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
        "documents": [d.id for d in result.get("documents") or []],
    }


class CiteRecorder:
    """
    Stands in for the answerer's, the short-answer extractor's and the fallback's `cite`.

    It keeps its last call's inputs and calls the real one.
    """

    def __init__(self) -> None:
        self.last: dict | None = None

    def __call__(self, state: LoopState, text: str, **kwargs) -> LoopState:
        self.last = {
            "state": state.to_dict(),
            "text": text,
            "shown": [doc.id for doc in kwargs.get("shown", ())],
            "cited_ids": list(kwargs.get("cited_ids", ())),
            "located": list(kwargs["located"]) if kwargs.get("located") is not None else None,
        }
        return citations_module.cite(state, text, **kwargs)


def recited(record: dict, row: dict, contents: dict[str, str]) -> dict:
    """A recorded offline run with its citations chosen again by today's `cite` from the recorded inputs."""
    inputs = record.get("cite_inputs")
    if inputs is None:  # no answer was cited (a give-up, an error): nothing to choose again
        return record
    state = LoopState.from_dict(inputs["state"])
    by_id = {doc.id: doc for doc in state.chunks}
    located = tuple(inputs["located"]) if inputs["located"] is not None else None
    cited = citations_module.cite(
        state,
        inputs["text"],
        shown=[by_id[i] for i in inputs["shown"]],
        cited_ids=inputs["cited_ids"],
        located=located,
    )
    result = {
        **record,
        "answer": cited.outcome.answer,
        "citations": [dict(c) for c in cited.outcome.citations],
        "documents": [{"id": chunk_id} for chunk_id in record["documents"]],
        "terminated_by": cited.outcome.terminated_by,
    }
    return {**scored(row, result, contents, record["seconds"]), "cite_inputs": inputs}


def oracle(data: Path) -> dict[str, list[dict]]:
    """Each question's gold answer cited by today's `cite` as the offline default would cite it (see above)."""
    rows = load_hotpotqa_questions(data)
    store = build_store(rows)
    contents = {d.meta["title"]: d.content for d in store.filter_documents()}
    by_title = {d.meta["title"]: d for d in store.filter_documents()}
    retriever = InMemoryBM25Retriever(store, top_k=6)
    records = []
    for row in rows:
        answer = row["answer"].strip()
        if answer.lower() in ("yes", "no"):
            continue
        shown = list(retriever.run(query=row["question"])["documents"])
        shown += [
            by_title[t]
            for t in dict.fromkeys(t for t, _ in row["supporting_facts"])
            if t in by_title and all(d.id != by_title[t].id for d in shown)
        ]
        located = None
        if answer.lower() not in row["question"].lower():
            found = [(i, (d.content or "").lower().find(answer.lower())) for i, d in enumerate(shown)]
            located = next(((i, at, at + len(answer)) for i, at in found if at >= 0), None)
        state = LoopState(question=row["question"], chunks=tuple(shown)).finish("answered", answer=answer)
        cited = citations_module.cite(state, answer, shown=shown, located=located)
        result = {
            "answer": cited.outcome.answer,
            "terminated_by": "answered",
            "citations": [dict(c) for c in cited.outcome.citations],
            "documents": list(shown),
            "tool_history": [],
        }
        records.append(scored(row, result, contents, 0.0))
    return {"oracle (gold answer, no LLM)": records}


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
        return f"{sum(r[key] for r in part)}/{len(part)}" + (
            f" ({sum(r[key] for r in part) / len(part):.0%})" if part else ""
        )

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
        router, InMemoryBM25Retriever(store, top_k=5), controller=LoopController(chunk_cap=6), check_evidence=False
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
    recorder = CiteRecorder()
    answerer_module.cite = fallback_module.cite = extractor_module.cite = recorder
    records: dict[str, list[dict]] = {"offline default": [], "scripted LLM router": []}
    with out.open("w", encoding="utf-8") as f:
        for done, row in enumerate(rows, start=1):
            began = time.perf_counter()
            recorder.last = None
            result = offline.run({"controller": {"query": row["question"]}})["result"]
            record = {**scored(row, result, contents, time.perf_counter() - began), "cite_inputs": recorder.last}
            records["offline default"].append(record)
            records["scripted LLM router"].append(replayed(record, row, store, contents))
            f.write(json.dumps({name: runs[-1] for name, runs in records.items()}) + "\n")
            f.flush()
            print(f"{done}/{len(rows)} {record['seconds']:.1f}s em={record['em']} {record['answer']!r}", flush=True)
    return records


def replay(data: Path, recorded: Path, recite: bool = False) -> dict[str, list[dict]]:
    """The recorded offline runs (rechecked, or with `recite` cited again) and the scripted router run again."""
    all_rows = load_hotpotqa_questions(data)
    by_id = {row["id"]: row for row in all_rows}
    store = build_store(all_rows)
    contents = {d.meta["title"]: d.content for d in store.filter_documents()}
    lines = [json.loads(line) for line in recorded.read_text(encoding="utf-8").splitlines() if line.strip()]
    offline = [
        recited(line["offline default"], by_id[line["offline default"]["id"]], contents)
        if recite
        else rechecked(line["offline default"])
        for line in lines
    ]
    return {
        "offline default": offline,
        "scripted LLM router": [replayed(record, by_id[record["id"]], store, contents) for record in offline],
    }


def rechecked(record: dict) -> dict:
    """A recorded run with its citations' offline verdicts recomputed."""
    for citation in record["citations"]:
        if citation["check"] == "offline":
            citation["supported"] = offline_support(
                citation["claim"], citation["quote"], record["question"], citation["title"]
            )
    return {**record, "flagged": not any(c["supported"] for c in record["citations"])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--limit", type=int, default=40)
    parser.add_argument("--out", type=Path, default=Path("citations.jsonl"))
    parser.add_argument("--rescore", type=Path, help="print the figures of a recorded --out file")
    parser.add_argument("--replay", type=Path, help="a recorded --out file: rescore it, run the scripted router again")
    parser.add_argument("--recite", type=Path, help="as --replay, the offline runs' citations chosen again")
    parser.add_argument("--oracle", action="store_true", help="the choice rule alone on every question, no LLM")
    args = parser.parse_args()
    if args.oracle:
        records = oracle(args.data)
    elif args.recite:
        records = replay(args.data, args.recite, recite=True)
    elif args.replay:
        records = replay(args.data, args.replay)
    elif args.rescore:  # the offline verdicts again, with the check as it is now (quotes as recorded)
        lines = [json.loads(line) for line in args.rescore.read_text(encoding="utf-8").splitlines() if line.strip()]
        records = {
            name: [rechecked(line[name]) for line in lines] for name in ("offline default", "scripted LLM router")
        }
    else:
        records = run(args.data, args.start, args.limit, args.out)
    for name, runs in records.items():
        print(f"\n{name}")
        for key, value in summary(runs).items():
            print(f"  {key}: {value}")


if __name__ == "__main__":
    main()
