# SPDX-License-Identifier: Apache-2.0
"""Evaluation of loop configurations on HotpotQA-format QA sets: metrics, runner, report and plot."""

from haystack_agentic.evaluation.metrics import (
    best_answer_scores,
    exact_match,
    f1,
    normalize_answer,
    supporting_recall,
)
from haystack_agentic.evaluation.retrieval_only_answerer import RetrievalOnlyAnswerer
from haystack_agentic.evaluation.runner import EvalConfig, build_store, run_eval, standard_configs, summarise

__all__ = [
    "EvalConfig",
    "RetrievalOnlyAnswerer",
    "best_answer_scores",
    "build_store",
    "exact_match",
    "f1",
    "normalize_answer",
    "run_eval",
    "standard_configs",
    "summarise",
    "supporting_recall",
]
