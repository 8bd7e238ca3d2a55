# SPDX-License-Identifier: Apache-2.0
"""
Does the loop say "not in the documents" when it should? Every question runs as it is (normal) and with its gold
paragraphs removed from the pooled store (unanswerable): abstention and answer rates, the precision/recall of the
evidence score (positives: normal runs with every gold paragraph found) and the evidence check's cost.
"""

import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from haystack import logging
from haystack.document_stores.types import DuplicatePolicy

from benchmarks.harness.calibration import average_precision, curve_summary, precision_recall_curve, roc_auc
from benchmarks.harness.gold import gold_document_ids
from benchmarks.harness.runner import run_question

logger = logging.getLogger(__name__)

CONDITIONS = ("normal", "unanswerable")


@contextmanager
def without_documents(store: Any, ids: Sequence[str]) -> Iterator[int]:
    """Remove documents from a store for the duration of a block (its value: how many), then put them back."""
    removed = store.filter_documents(filters={"field": "id", "operator": "in", "value": list(ids)}) if ids else []
    if removed:
        store.delete_documents([doc.id for doc in removed])
    try:
        yield len(removed)
    finally:
        if removed:
            store.write_documents(removed, policy=DuplicatePolicy.OVERWRITE)


def time_checks(checker: Any) -> list[float]:
    """Record the wall time (s) of each of an `EvidenceChecker`'s `check` calls in the list returned."""
    seconds: list[float] = []
    original = checker.check

    def timed(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            seconds.append(time.perf_counter() - start)

    checker.check = timed  # an instance attribute shadows the method
    return seconds


def _record(row: dict[str, Any], condition: str, result: dict[str, Any], latency: float) -> dict[str, Any]:
    gold = gold_document_ids(row)
    found = {d["id"] for d in result.get("documents") or []}
    evidence = result.get("evidence") or {}
    return {
        "id": row["id"],
        "question": row["question"],
        "type": row.get("type"),
        "condition": condition,
        "terminated_by": result.get("terminated_by"),
        "abstained": result.get("terminated_by") == "gave_up",
        "answer": result.get("answer"),
        "gold_found": sum(g in found for g in gold),
        "gold_total": len(gold),
        "all_gold_found": bool(gold) and all(g in found for g in gold),
        "evidence_score": float(evidence.get("score", 0.0)),
        "evidence_sufficient": evidence.get("sufficient"),
        "evidence_action": evidence.get("action"),
        "evidence_reason": evidence.get("reason"),
        "evidence_features": evidence.get("features"),
        "searched_again": int(evidence.get("searched_again", 0)),
        "searches": sum(s["action"] == "search" for s in result.get("tool_history") or []),
        "latency_s": latency,
        "error": result.get("error"),
    }


def _rate(group: Sequence[dict[str, Any]], abstained: bool) -> float | None:
    return sum(r["abstained"] == abstained for r in group) / len(group) if group else None


def _ms(seconds: Sequence[float], average: Callable[[Sequence[float]], float]) -> float | None:
    return 1000 * average(seconds) if seconds else None


def summarise_abstention(
    records: Sequence[dict[str, Any]], threshold: float | None, check_seconds: Sequence[float] = ()
) -> dict[str, Any]:
    """The figures of one configuration from its records of both conditions (see the module docstring)."""
    normal = [r for r in records if r["condition"] == "normal"]
    unanswerable = [r for r in records if r["condition"] == "unanswerable"]
    found = [r for r in normal if r["all_gold_found"]]
    positives = [r["evidence_score"] for r in found]
    negatives = [r["evidence_score"] for r in unanswerable]
    curve = precision_recall_curve(positives, negatives)
    return {
        "normal": len(normal),
        "unanswerable": len(unanswerable),
        "evidence_found": len(found),
        "abstention_rate": _rate(unanswerable, True),
        "answer_rate_evidence_found": _rate(found, False),
        "answer_rate_normal": _rate(normal, False),
        "threshold": threshold,
        "auc": roc_auc(positives, negatives),
        "average_precision": average_precision(positives, negatives),
        "pr_curve": curve_summary(curve),
        "pr_curve_full": curve,
        "checks": len(check_seconds),
        "ms_per_check_mean": _ms(check_seconds, statistics.fmean),
        "ms_per_check_median": _ms(check_seconds, statistics.median),
        "searched_again_mean": statistics.fmean(r["searched_again"] for r in records) if records else None,
    }


def run_abstention_eval(
    rows: Sequence[dict[str, Any]],
    store: Any,
    configs: Sequence[Any],
    on_question: Callable[[str, int], None] | None = None,
) -> dict[str, Any]:
    """
    Run every configuration over every question, normal then unanswerable, and summarise.

    :param rows: HotpotQA/MuSiQue rows whose paragraphs are all in `store`.
    :param store: The pooled document store every configuration (an `EvalConfig`) searches.
    :param on_question: Called after each question with `(config name, questions done)`.
    :returns: `{"configs": {name: {"description", "summary", "questions": [records]}}}`.
    """
    report: dict[str, Any] = {"configs": {}}
    for config in configs:
        config.pipeline.warm_up()
        checker = config.pipeline.get_component("evidence") if "evidence" in config.pipeline.graph.nodes else None
        seconds = time_checks(checker) if hasattr(checker, "check") else []
        records = []
        for done, row in enumerate(rows, start=1):
            for condition in CONDITIONS:
                with without_documents(store, gold_document_ids(row) if condition == "unanswerable" else []):
                    result, latency = run_question(config, row, {"query": row["question"]})
                records.append(_record(row, condition, result, latency))
            if on_question is not None:
                on_question(config.name, done)
        threshold = None
        if checker is not None:
            threshold = checker.threshold if checker.threshold is not None else checker.model.threshold
        report["configs"][config.name] = {
            "description": config.description,
            "summary": summarise_abstention(records, threshold, seconds),
            "questions": records,
        }
    return report
