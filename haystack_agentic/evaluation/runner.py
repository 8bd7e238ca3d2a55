# SPDX-License-Identifier: Apache-2.0
"""
Run loop configurations over a HotpotQA-format QA set and record, per question, what each run cost and found.

Every configuration is a full loop pipeline (`build_loop_pipeline`) over the same document store and the same
chunk budget, so answers, recall, LLM calls, tokens and latency are counted by the same machinery:

- `one-shot`: retrieve once (`budget` chunks), then answer: a `BridgeEntityRouter` with `max_follow_ups=0`.
- `bridge-entity`: the deterministic multi-hop policy: search the question (`budget - 2` chunks), then up to two
  bridge entities (1 chunk each).
- `llm-router`: `AgenticRouter` driven by a chat generator (tools mode by default), chunk cap `budget`.

The answer LLM (for `one-shot` and `bridge-entity`) is any chat generator (the CLI uses the packaged SmolLM2);
`answer_generator=None` means retrieval-only: a `RetrievalOnlyAnswerer` ends the run without an LLM call.

Usage example:
```python
from haystack_agentic.evaluation.runner import build_store, run_eval, standard_configs
from haystack_agentic.datasets.hotpotqa import load_hotpotqa_questions

rows = load_hotpotqa_questions("examples/data/hotpotqa_dev_sample.jsonl")[:20]
store = build_store(rows)
report = run_eval(rows, standard_configs(store, budget=6))  # retrieval-only: no LLM
print(report["configs"]["bridge-entity"]["summary"]["all_gold_recall"])
```
"""

import statistics
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from haystack import Pipeline, logging
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.document_stores.in_memory import InMemoryDocumentStore
from haystack.document_stores.types import DuplicatePolicy

from haystack_agentic.components.routers.agentic_router import AgenticRouter
from haystack_agentic.grounding.citations import strip_markers
from haystack_agentic.components.evidence.evidence_checker import EvidenceChecker
from haystack_agentic.components.generators.answerer import Answerer
from haystack_agentic.components.routers.bridge_entity_router import BridgeEntityRouter
from haystack_agentic.pipelines.default_pipelines import embedded_answer_stages, embedded_fallback
from haystack_agentic.evaluation.metrics import best_answer_scores, gold_answers, supporting_recall
from haystack_agentic.evaluation.retrieval_only_answerer import RetrievalOnlyAnswerer
from haystack_agentic.datasets.hotpotqa import gold_document_ids, hotpotqa_documents
from haystack_agentic.components.loop.loop_controller import LoopController
from haystack_agentic.pipelines.loop_pipeline import build_loop_pipeline
from haystack_agentic.indexing.collections import COLLECTION_FIELD
from haystack_agentic.dataclasses.loop_state import ROLES

logger = logging.getLogger(__name__)

#: Chunks a configuration may keep (`haystack-agentic eval --budget`).
DEFAULT_BUDGET = 6
#: Most turns of the LLM router configuration (`haystack-agentic eval --router-max-iterations`).
DEFAULT_ROUTER_MAX_ITERATIONS = 6


@dataclass
class EvalConfig:
    """
    One configuration to evaluate.

    :param name: Short name (a table row, a JSON key, a plot label).
    :param description: What runs, in one line.
    :param pipeline: The loop pipeline (input `controller.query`, outputs under `result`).
    """

    name: str
    description: str
    pipeline: Pipeline


def build_store(rows: Sequence[dict[str, Any]]) -> InMemoryDocumentStore:
    """
    One in-memory store holding every paragraph of every question (title line in the content, as `index` does).

    A row with a `collection` puts its paragraphs into that collection (`meta.collection`; ids unchanged, so gold
    paragraphs are still found by id); `run_eval` then scopes the row's run to it and reports per collection.

    :param rows: HotpotQA or MuSiQue rows.
    :returns: The store (its own index, so stores of different runs do not share storage).
    """
    store = InMemoryDocumentStore(index=f"eval-{uuid.uuid4().hex}")
    groups: dict[str | None, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(row.get("collection"), []).append(row)
    for collection, group in groups.items():
        documents = hotpotqa_documents(group, title_in_content=True)
        if collection is not None:
            documents = [replace(d, meta={**(d.meta or {}), COLLECTION_FIELD: collection}) for d in documents]
        store.write_documents(documents, policy=DuplicatePolicy.OVERWRITE)
    return store


def _answerer(answer_generator: Any, budget: int, chunks_per_search: int | None = None) -> dict[str, Any]:
    # The same answer stages as the packaged embedded pipeline (system message, prompt, chunk selection, short answer).
    if answer_generator is None:
        return {"answerer": RetrievalOnlyAnswerer()}
    return embedded_answer_stages(answer_generator, budget, chunks_per_search)


def one_shot_config(
    store: InMemoryDocumentStore,
    budget: int = DEFAULT_BUDGET,
    answer_generator: Any = None,
    evidence_checker: Any = None,
) -> EvalConfig:
    """
    Retrieve once (`budget` chunks), then answer.

    :param store: The document store.
    :param budget: Chunks retrieved (and kept).
    :param answer_generator: The answer LLM, or `None` for retrieval-only.
    :param evidence_checker: The loop's evidence check (default: the offline `EvidenceChecker()`).
    :returns: The configuration.
    """
    router = BridgeEntityRouter(document_store=store, first_top_k=budget, max_follow_ups=0)
    pipeline = build_loop_pipeline(
        router,
        InMemoryBM25Retriever(document_store=store),
        controller=LoopController(max_iterations=2, chunk_cap=budget),
        **_answerer(answer_generator, budget),
        fallback=embedded_fallback(answer_generator, budget),
        evidence_checker=evidence_checker,
    )
    return EvalConfig("one-shot", f"one BM25 search of {budget} chunks, then answer", pipeline)


def bridge_entity_config(
    store: InMemoryDocumentStore,
    budget: int = DEFAULT_BUDGET,
    answer_generator: Any = None,
    max_follow_ups: int = 2,
    evidence_checker: Any = None,
) -> EvalConfig:
    """
    The deterministic multi-hop policy: the question (`budget - max_follow_ups` chunks), then bridge entities.

    :param store: The document store.
    :param budget: Chunk cap of the run (the policy never retrieves more).
    :param answer_generator: The answer LLM, or `None` for retrieval-only.
    :param max_follow_ups: Bridge-entity searches (1 chunk each) after the first search.
    :param evidence_checker: The loop's evidence check (default: the offline `EvidenceChecker()`).
    :returns: The configuration.
    :raises ValueError: If `budget <= max_follow_ups`.
    """
    if budget <= max_follow_ups:
        raise ValueError(f"budget ({budget}) must exceed max_follow_ups ({max_follow_ups}).")
    router = BridgeEntityRouter(
        document_store=store, first_top_k=budget - max_follow_ups, follow_up_top_k=1, max_follow_ups=max_follow_ups
    )
    pipeline = build_loop_pipeline(
        router,
        InMemoryBM25Retriever(document_store=store),
        controller=LoopController(max_iterations=max_follow_ups + 3, chunk_cap=budget),
        **_answerer(answer_generator, budget, chunks_per_search=2),
        fallback=embedded_fallback(answer_generator, budget),
        evidence_checker=evidence_checker,
    )
    description = f"bridge entities: question {budget - max_follow_ups} chunks + up to {max_follow_ups} x 1"
    return EvalConfig("bridge-entity", description, pipeline)


def llm_router_config(
    store: InMemoryDocumentStore,
    chat_generator: Any,
    budget: int = DEFAULT_BUDGET,
    mode: str = "tools",
    max_iterations: int = DEFAULT_ROUTER_MAX_ITERATIONS,
    name: str = "llm-router",
    evidence_checker: Any = None,
) -> EvalConfig:
    """
    `AgenticRouter` driven by `chat_generator`; the controller's answer is final (tools mode).

    :param store: The document store.
    :param chat_generator: The controller LLM (also the fallback's).
    :param budget: Chunk cap of the run; a search returns at most `budget` chunks.
    :param mode: `"tools"` or `"json"`.
    :param max_iterations: Most router turns.
    :param name: The configuration's name.
    :param evidence_checker: The loop's evidence check (default: `EvidenceChecker` with `chat_generator` as its
        judge, as in the packaged LLM pipelines).
    :returns: The configuration.
    """
    router = AgenticRouter(
        chat_generator=chat_generator, mode=mode, temperature=0.0, default_top_k=min(5, budget), max_top_k=budget
    )
    pipeline = build_loop_pipeline(
        router,
        InMemoryBM25Retriever(document_store=store),
        controller=LoopController(max_iterations=max_iterations, chunk_cap=budget),
        answerer=Answerer(chat_generator=chat_generator if mode == "json" else None, temperature=0.0),
        fallback=embedded_fallback(chat_generator, budget),
        evidence_checker=evidence_checker or EvidenceChecker(chat_generator=chat_generator),
    )
    return EvalConfig(name, f"AgenticRouter ({mode} mode), up to {max_iterations} turns", pipeline)


def standard_configs(
    store: InMemoryDocumentStore,
    budget: int = DEFAULT_BUDGET,
    answer_generator: Any = None,
    router_generator: Any = None,
    router_mode: str = "tools",
    router_max_iterations: int = DEFAULT_ROUTER_MAX_ITERATIONS,
) -> list[EvalConfig]:
    """
    The configurations compared by `haystack-agentic eval`, at one chunk budget.

    :param store: The document store.
    :param budget: Chunk budget of every configuration.
    :param answer_generator: Answer LLM of the one-shot and bridge-entity configurations (`None`: retrieval-only).
    :param router_generator: Controller LLM of the `llm-router` configuration (`None`: that configuration is left out).
    :param router_mode: `"tools"` or `"json"`.
    :param router_max_iterations: Most router turns of the LLM router.
    :returns: The configurations, cheapest first.
    """
    configs = [
        one_shot_config(store, budget, answer_generator),
        bridge_entity_config(store, budget, answer_generator),
    ]
    if router_generator is not None:
        configs.append(llm_router_config(store, router_generator, budget, router_mode, router_max_iterations))
    return configs


def score_result(row: dict[str, Any], result: dict[str, Any], latency: float, with_answer: bool) -> dict[str, Any]:
    """
    One question's record: answer quality, recall of the accumulated chunks, cost and termination.

    :param row: The HotpotQA/MuSiQue row.
    :param result: The loop's result dict.
    :param latency: Wall time of the run, seconds.
    :param with_answer: Score the answer (`False` in retrieval-only runs: `em` and `f1` are `None`).
    :returns: The record (JSON-serialisable).
    """
    recall = supporting_recall([d["id"] for d in result.get("documents") or []], gold_document_ids(row))
    answer = result.get("answer")
    # Scored without the citation markers ("Adriana Trigiani [1]" is "Adriana Trigiani").
    em, f1 = best_answer_scores(strip_markers(answer) if answer else answer, gold_answers(row)) if with_answer else (None, None)
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
        "searches": sum(step["action"] == "search" for step in result.get("tool_history") or []),
        "queries": [s["query"] for s in result.get("tool_history") or [] if s["action"] == "search"],
        "iterations": result.get("iterations", 0),
        "llm_calls": {role: int(usage.get(role, {}).get("calls", 0)) for role in ROLES},
        "tokens": {
            role: {
                "prompt": int(usage.get(role, {}).get("prompt_tokens", 0)),
                "completion": int(usage.get(role, {}).get("completion_tokens", 0)),
            }
            for role in ROLES
        },
        "llm_calls_total": int(usage.get("total", {}).get("calls", 0)),
        "prompt_tokens_total": int(usage.get("total", {}).get("prompt_tokens", 0)),
        "completion_tokens_total": int(usage.get("total", {}).get("completion_tokens", 0)),
        "latency_s": latency,
        "terminated_by": result.get("terminated_by"),
        "grounding_score": grounding.get("score") if isinstance(grounding, dict) else None,
        "error": result.get("error"),
        "citations": result.get("citations") or [],
        "collection": row.get("collection"),
        "chunk_collections": dict(
            Counter(str((d.get("meta") or {}).get(COLLECTION_FIELD)) for d in result.get("documents") or [])
        ),
    }


def _mean(values: Sequence[float]) -> float | None:
    return statistics.fmean(values) if values else None


def summarise(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """
    Totals of one configuration over its questions.

    :param records: Records from `score_result`.
    :returns: Means (per question) of EM, F1 (`None` when not scored), recall, searches, iterations, LLM calls and
        tokens per role; latency mean/median/p90; `terminated_by` counts; mean grounding score (`None` if never
        present); and recall/F1 per question type.
    """
    n = len(records)
    scored = [r for r in records if r["em"] is not None]
    latencies = sorted(r["latency_s"] for r in records)
    grounding = [r["grounding_score"] for r in records if r["grounding_score"] is not None]
    by_type: dict[str, dict[str, Any]] = {}
    for kind in sorted({str(r["type"]) for r in records}):
        group = [r for r in records if str(r["type"]) == kind]
        group_scored = [r["f1"] for r in group if r["f1"] is not None]
        by_type[kind] = {
            "questions": len(group),
            "all_gold_recall": _mean([float(r["all_gold_found"]) for r in group]),
            "f1": _mean(group_scored),
        }
    return {
        "questions": n,
        "em": _mean([r["em"] for r in scored]),
        "f1": _mean([r["f1"] for r in scored]),
        "all_gold_recall": _mean([float(r["all_gold_found"]) for r in records]),
        "gold_recall": _mean([r["gold_recall"] for r in records]),
        "searches_mean": _mean([r["searches"] for r in records]),
        "searches_max": max((r["searches"] for r in records), default=0),
        "iterations_mean": _mean([r["iterations"] for r in records]),
        "llm_calls_mean": _mean([r["llm_calls_total"] for r in records]),
        "llm_calls_per_role_mean": {role: _mean([r["llm_calls"][role] for r in records]) for role in ROLES},
        "prompt_tokens_mean": _mean([r["prompt_tokens_total"] for r in records]),
        "completion_tokens_mean": _mean([r["completion_tokens_total"] for r in records]),
        "tokens_per_role_mean": {
            role: {
                "prompt": _mean([r["tokens"][role]["prompt"] for r in records]),
                "completion": _mean([r["tokens"][role]["completion"] for r in records]),
            }
            for role in ROLES
        },
        "latency_mean_s": _mean(latencies),
        "latency_median_s": statistics.median(latencies) if latencies else None,
        "latency_p90_s": latencies[min(n - 1, int(0.9 * n))] if latencies else None,
        "terminated_by": dict(Counter(str(r["terminated_by"]) for r in records)),
        "grounding_mean": _mean(grounding),
        "by_type": by_type,
        "by_collection": by_collection(records),
    }


def by_collection(records: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """
    Totals per collection, for rows that name one (`row["collection"]`).

    :param records: Records from `score_result`.
    :returns: Collection -> `questions`, `all_gold_recall`, `f1` (`None` when not scored), and
        `foreign_chunk_rate` (share of the chunks found that came from another collection: 0 when scoping works).
    """
    result: dict[str, dict[str, Any]] = {}
    for name in sorted({r["collection"] for r in records if r.get("collection")}):
        group = [r for r in records if r.get("collection") == name]
        chunks = sum(sum(r["chunk_collections"].values()) for r in group)
        foreign = sum(n for r in group for c, n in r["chunk_collections"].items() if c != name)
        result[name] = {
            "questions": len(group),
            "all_gold_recall": _mean([float(r["all_gold_found"]) for r in group]),
            "f1": _mean([r["f1"] for r in group if r["f1"] is not None]),
            "foreign_chunk_rate": foreign / chunks if chunks else None,
        }
    return result


def run_eval(
    rows: Sequence[dict[str, Any]],
    configs: Sequence[EvalConfig],
    with_answer: bool = True,
    on_question: Callable[[str, int], None] | None = None,
    collections: str | list[str] | None = None,
) -> dict[str, Any]:
    """
    Run every configuration over every question (sequentially, `Pipeline.run`) and score each run.

    Each pipeline is warmed up first (model loading is timed separately as `warm_up_s`, not in latencies). A run
    that raises is recorded with `terminated_by="exception"` and the error, and the evaluation goes on.

    :param rows: HotpotQA/MuSiQue rows.
    :param configs: The configurations.
    :param with_answer: Score answers (EM/F1); `False` for retrieval-only runs.
    :param on_question: Called after each question with `(config name, questions done)` (e.g. a progress bar).
    :param collections: The collection scope of every run (`LoopController`'s `collections`); a row's own
        `collection` takes its place for that row. `None`: no scope.
    :returns: `{"configs": {name: {"description", "warm_up_s", "summary", "questions": [records]}}}`.
    """
    report: dict[str, Any] = {"configs": {}}
    for config in configs:
        started = time.perf_counter()
        config.pipeline.warm_up()
        warm_up = time.perf_counter() - started
        records = []
        for done, row in enumerate(rows, start=1):
            start = time.perf_counter()
            try:
                inputs: dict[str, Any] = {"query": row["question"]}
                scope = row.get("collection", collections)
                if scope is not None:
                    inputs["collections"] = scope
                result = config.pipeline.run({"controller": inputs})["result"]
            except Exception as exc:  # noqa: BLE001 - one failing question must not end the evaluation
                logger.warning("{config} failed on {id}: {error}", config=config.name, id=row["id"], error=exc)
                result = {"terminated_by": "exception", "error": f"{type(exc).__name__}: {exc}"}
            records.append(score_result(row, result, time.perf_counter() - start, with_answer))
            if on_question is not None:
                on_question(config.name, done)
        report["configs"][config.name] = {
            "description": config.description,
            "warm_up_s": warm_up,
            "summary": summarise(records),
            "questions": records,
        }
    return report
