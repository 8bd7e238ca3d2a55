# SPDX-License-Identifier: Apache-2.0
"""
Run loop configurations over a HotpotQA-format QA set and record, per question, what each run cost and found: full
loop pipelines over one store and chunk budget (`one-shot`, `bridge-entity`, `llm-router`); without an answer LLM a
`RetrievalOnlyAnswerer` ends each run (retrieval-only).
"""

import functools
import operator
import statistics
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from haystack import Document, Pipeline, logging
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.document_stores.in_memory import InMemoryDocumentStore
from haystack.document_stores.types import DuplicatePolicy

from benchmarks.harness.gold import gold_document_ids
from benchmarks.harness.metrics import best_answer_scores, gold_answers, supporting_recall
from benchmarks.harness.retrieval_only_answerer import RetrievalOnlyAnswerer
from haystack_agentic.components.evidence.evidence_checker import EvidenceChecker
from haystack_agentic.components.generators.answerer import Answerer
from haystack_agentic.components.loop.loop_controller import LoopController
from haystack_agentic.components.loop.loop_result_builder import result_to_dict
from haystack_agentic.components.routers.agentic_router import AgenticRouter
from haystack_agentic.components.routers.bridge_entity_router import BridgeEntityRouter
from haystack_agentic.dataclasses.loop_state import ROLES
from haystack_agentic.grounding.markers import strip_markers
from haystack_agentic.indexing.collections import COLLECTION_FIELD
from haystack_agentic.indexing.hotpotqa import hotpotqa_documents
from haystack_agentic.pipelines.default_pipelines import embedded_answer_stages, embedded_fallback
from haystack_agentic.pipelines.loop_pipeline import build_loop_pipeline

logger = logging.getLogger(__name__)

#: Chunks a configuration may keep (`haystack-agentic eval --budget`).
DEFAULT_BUDGET = 6
#: Most turns of the LLM router configuration (`haystack-agentic eval --router-max-iterations`).
DEFAULT_ROUTER_MAX_ITERATIONS = 6
#: Bridge-entity searches (1 chunk each) after the first search of the `bridge-entity` configuration.
MAX_FOLLOW_UPS = 2


@dataclass
class EvalConfig:
    """One configuration: a short `name`, a one-line `description`, the loop `pipeline` (results under `result`)."""

    name: str
    description: str
    pipeline: Pipeline


def eval_documents(rows: Sequence[dict[str, Any]]) -> list[Document]:
    """Every paragraph of `rows` (title line in the content, as `index` does), in its row's `collection` if any."""
    groups: dict[str | None, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(row.get("collection"), []).append(row)
    documents: dict[str, Document] = {}
    for collection, group in groups.items():
        for doc in hotpotqa_documents(group, title_in_content=True):
            scoped = doc if collection is None else replace(doc, meta={**doc.meta, COLLECTION_FIELD: collection})
            documents.pop(scoped.id, None)  # a paragraph of two collections: the last one, as written last
            documents[scoped.id] = scoped
    return list(documents.values())


def build_store(rows: Sequence[dict[str, Any]]) -> InMemoryDocumentStore:
    """
    One in-memory store (its own index) with `eval_documents(rows)`; ids stay the gold ids, and a row with a
    `collection` has its run scoped to it (reported per collection).
    """
    store = InMemoryDocumentStore(index=f"eval-{uuid.uuid4().hex}")
    store.write_documents(eval_documents(rows), policy=DuplicatePolicy.OVERWRITE)
    return store


def _answerer(answer_generator: Any, budget: int, chunks_per_search: int | None = None) -> dict[str, Any]:
    # The answer stages of the packaged embedded pipeline; retrieval-only without an answer LLM.
    if answer_generator is None:
        return {"answerer": RetrievalOnlyAnswerer()}
    return embedded_answer_stages(answer_generator, budget, chunks_per_search)


def _loop(
    router: Any, store: Any, budget: int, iterations: int, generator: Any, evidence_checker: Any, **answer: Any
) -> Pipeline:
    return build_loop_pipeline(
        router,
        InMemoryBM25Retriever(document_store=store),
        controller=LoopController(max_iterations=iterations, chunk_cap=budget),
        **answer,
        fallback=embedded_fallback(generator, budget),
        evidence_checker=evidence_checker,
    )


def one_shot_config(store: Any, budget: int = DEFAULT_BUDGET, answer_generator: Any = None) -> EvalConfig:
    """Retrieve once (`budget` chunks), then answer with `answer_generator` (`None`: retrieval-only)."""
    router = BridgeEntityRouter(document_store=store, first_top_k=budget, max_follow_ups=0)
    pipeline = _loop(router, store, budget, 2, answer_generator, None, **_answerer(answer_generator, budget))
    return EvalConfig("one-shot", f"one BM25 search of {budget} chunks, then answer", pipeline)


def bridge_entity_config(
    store: Any,
    budget: int = DEFAULT_BUDGET,
    answer_generator: Any = None,
    evidence_checker: Any = None,
) -> EvalConfig:
    """
    The deterministic multi-hop policy: the question (`budget - MAX_FOLLOW_UPS` chunks), then bridge entities.

    :param budget: The run's chunk cap.
    :param answer_generator: The answer LLM, or `None` for retrieval-only.
    :param evidence_checker: The loop's evidence check (default: the offline `EvidenceChecker()`).
    :raises ValueError: If `budget <= MAX_FOLLOW_UPS`.
    """
    if budget <= MAX_FOLLOW_UPS:
        msg = f"budget ({budget}) must exceed max_follow_ups ({MAX_FOLLOW_UPS})."
        raise ValueError(msg)
    first = budget - MAX_FOLLOW_UPS
    router = BridgeEntityRouter(
        document_store=store, first_top_k=first, follow_up_top_k=1, max_follow_ups=MAX_FOLLOW_UPS
    )
    answer = _answerer(answer_generator, budget, chunks_per_search=2)
    pipeline = _loop(router, store, budget, MAX_FOLLOW_UPS + 3, answer_generator, evidence_checker, **answer)
    description = f"bridge entities: question {first} chunks + up to {MAX_FOLLOW_UPS} x 1"
    return EvalConfig("bridge-entity", description, pipeline)


def llm_router_config(
    store: Any,
    chat_generator: Any,
    budget: int = DEFAULT_BUDGET,
    mode: str = "tools",
    max_iterations: int = DEFAULT_ROUTER_MAX_ITERATIONS,
) -> EvalConfig:
    """
    `AgenticRouter` driven by `chat_generator` (also the fallback's and the evidence check's judge, as in the
    packaged LLM pipelines); a search returns at most `budget` chunks.

    :param mode: `"tools"` (the controller's answer is final) or `"json"`.
    :param max_iterations: Most router turns.
    """
    router = AgenticRouter(
        chat_generator=chat_generator, mode=mode, temperature=0.0, default_top_k=min(5, budget), max_top_k=budget
    )
    answerer = Answerer(chat_generator=chat_generator if mode == "json" else None, temperature=0.0)
    checker = EvidenceChecker(chat_generator=chat_generator)
    pipeline = _loop(router, store, budget, max_iterations, chat_generator, checker, answerer=answerer)
    return EvalConfig("llm-router", f"AgenticRouter ({mode} mode), up to {max_iterations} turns", pipeline)


_PARTS = ("prompt", "completion")


def _usage(usage: dict[str, Any], role: str, key: str) -> int:
    return int(usage.get(role, {}).get(key, 0))


def score_result(row: dict[str, Any], result: dict[str, Any], latency: float, with_answer: bool) -> dict[str, Any]:
    """
    One question's record (JSON-serialisable): answer quality, recall of the chunks kept, cost and termination.

    :param latency: Wall time of the run, seconds.
    :param with_answer: Score the answer (`False`: `em` and `f1` are `None`).
    """
    documents = result.get("documents") or []
    searches = [step for step in result.get("tool_history") or [] if step["action"] == "search"]
    recall = supporting_recall([d["id"] for d in documents], gold_document_ids(row))
    answer = result.get("answer")
    # Scored without the citation markers ("Adriana Trigiani [1]" is "Adriana Trigiani").
    em, f1 = best_answer_scores(answer and strip_markers(answer), gold_answers(row)) if with_answer else (None, None)
    usage = result.get("usage") or {}
    grounding = result.get("grounding")
    return {
        "id": row["id"],
        "question": row["question"],
        "type": row.get("type"),
        "gold_answer": row["answer"],
        "answer": answer,
        "em": em,
        "f1": f1,
        "gold_found": recall["found"],
        "gold_total": recall["total"],
        "gold_recall": recall["recall"],
        "all_gold_found": recall["all_found"],
        "searches": len(searches),
        "queries": [step["query"] for step in searches],
        "iterations": result.get("iterations", 0),
        "llm_calls": {role: _usage(usage, role, "calls") for role in ROLES},
        "tokens": {role: {part: _usage(usage, role, f"{part}_tokens") for part in _PARTS} for role in ROLES},
        "llm_calls_total": _usage(usage, "total", "calls"),
        "prompt_tokens_total": _usage(usage, "total", "prompt_tokens"),
        "completion_tokens_total": _usage(usage, "total", "completion_tokens"),
        "latency_s": latency,
        "terminated_by": result.get("terminated_by"),
        "grounding_score": grounding.get("score") if isinstance(grounding, dict) else None,
        "error": result.get("error"),
        "citations": result.get("citations") or [],
        "collection": row.get("collection"),
        "chunk_collections": dict(Counter(str((d.get("meta") or {}).get(COLLECTION_FIELD)) for d in documents)),
    }


def _mean(values: Sequence[float]) -> float | None:
    return statistics.fmean(values) if values else None


def _mean_of(records: Sequence[dict[str, Any]], get: Callable[[dict[str, Any]], Any]) -> float | None:
    """The mean of `get(record)` over the records where it is not `None`."""
    return _mean([value for value in map(get, records) if value is not None])


def _group(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    return {
        "questions": len(records),
        "all_gold_recall": _mean_of(records, lambda r: float(r["all_gold_found"])),
        "f1": _mean_of(records, lambda r: r["f1"]),
    }


def summarise(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """
    Totals of one configuration over its `score_result` records: means per question (`None` when nothing to
    average), latency mean/median/p90, `terminated_by` counts, and totals per question type and per collection.
    """
    n = len(records)
    latencies = sorted(r["latency_s"] for r in records)
    kinds = sorted({str(r["type"]) for r in records})

    def mean(*path: str) -> float | None:
        """The mean of the values at `path` (keys, outermost first) in the records."""
        return _mean_of(records, lambda r: functools.reduce(operator.getitem, path, r))

    return {
        "questions": n,
        "em": mean("em"),
        "f1": mean("f1"),
        "all_gold_recall": _mean_of(records, lambda r: float(r["all_gold_found"])),
        "gold_recall": mean("gold_recall"),
        "searches_mean": mean("searches"),
        "searches_max": max((r["searches"] for r in records), default=0),
        "iterations_mean": mean("iterations"),
        "llm_calls_mean": mean("llm_calls_total"),
        "llm_calls_per_role_mean": {role: mean("llm_calls", role) for role in ROLES},
        "prompt_tokens_mean": mean("prompt_tokens_total"),
        "completion_tokens_mean": mean("completion_tokens_total"),
        "tokens_per_role_mean": {role: {part: mean("tokens", role, part) for part in _PARTS} for role in ROLES},
        "latency_mean_s": _mean(latencies),
        "latency_median_s": statistics.median(latencies) if latencies else None,
        "latency_p90_s": latencies[min(n - 1, int(0.9 * n))] if latencies else None,
        "terminated_by": dict(Counter(str(r["terminated_by"]) for r in records)),
        "grounding_mean": mean("grounding_score"),
        "by_type": {kind: _group([r for r in records if str(r["type"]) == kind]) for kind in kinds},
        "by_collection": by_collection(records),
    }


def by_collection(records: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """
    Totals per collection named by rows: `questions`, `all_gold_recall`, `f1`, and `foreign_chunk_rate` (share of
    the chunks found that came from another collection: 0 when scoping works).
    """
    result: dict[str, dict[str, Any]] = {}
    for name in sorted({r["collection"] for r in records if r.get("collection")}):
        group = [r for r in records if r.get("collection") == name]
        chunks = sum(sum(r["chunk_collections"].values()) for r in group)
        foreign = sum(n for r in group for c, n in r["chunk_collections"].items() if c != name)
        result[name] = {**_group(group), "foreign_chunk_rate": foreign / chunks if chunks else None}
    return result


def run_question(config: EvalConfig, row: dict[str, Any], inputs: dict[str, Any]) -> tuple[dict[str, Any], float]:
    """
    Run one question through a configuration: `(result, seconds)`. A run that raises is recorded as
    `terminated_by="exception"` with the error, so the evaluation goes on.
    """
    start = time.perf_counter()
    try:
        result = result_to_dict(config.pipeline.run({"controller": inputs})["result"])
    except Exception as exc:
        logger.warning("{config} failed on {id}: {error}", config=config.name, id=row["id"], error=exc)
        result = {"terminated_by": "exception", "error": f"{type(exc).__name__}: {exc}"}
    return result, time.perf_counter() - start


def run_eval(
    rows: Sequence[dict[str, Any]],
    configs: Sequence[EvalConfig],
    with_answer: bool = True,
    on_question: Callable[[str, int], None] | None = None,
) -> dict[str, Any]:
    """
    Run every configuration over every question (warmed up first, timed as `warm_up_s`) and score each run
    (`run_question`); a row's `collection` scopes its run.

    :param rows: HotpotQA/MuSiQue rows.
    :param with_answer: Score answers (EM/F1); `False` for retrieval-only runs.
    :param on_question: Called after each question with `(config name, questions done)` (e.g. a progress bar).
    :returns: `{"configs": {name: {"description", "warm_up_s", "summary", "questions": [records]}}}`.
    """
    report: dict[str, Any] = {"configs": {}}
    for config in configs:
        started = time.perf_counter()
        config.pipeline.warm_up()
        warm_up = time.perf_counter() - started
        records = []
        for done, row in enumerate(rows, start=1):
            scope = {"collections": row["collection"]} if row.get("collection") is not None else {}
            result, seconds = run_question(config, row, {"query": row["question"], **scope})
            records.append(score_result(row, result, seconds, with_answer))
            if on_question is not None:
                on_question(config.name, done)
        report["configs"][config.name] = {
            "description": config.description,
            "warm_up_s": warm_up,
            "summary": summarise(records),
            "questions": records,
        }
    return report
