# SPDX-License-Identifier: Apache-2.0
"""Calibrating and measuring the evidence check: a logistic regression fitted with numpy, the threshold rule, and
the precision/recall curve of a score (positives: answerable examples; negatives: unanswerable ones)."""

import math
from collections.abc import Sequence
from typing import Any

from haystack_agentic.evidence.scoring import EvidenceModel

#: The L2 penalty of `fit_logistic` (not on the intercept), its most Newton steps, and `curve_summary`'s recall step.
L2 = 1.0
NEWTON_STEPS = 50
RECALL_STEP = 0.05


def fit_logistic(
    rows: Sequence[Sequence[float]], labels: Sequence[int], feature_names: Sequence[str], name: str = "offline"
) -> EvidenceModel:
    """
    Fit an L2-regularised logistic regression by Newton's method to `rows` (one feature vector per example, columns
    named by `feature_names`) and `labels` (1: the chunks support an answer).

    :returns: The model, with threshold 0.5 (set it with `choose_threshold`).
    :raises ValueError: On empty data, a length mismatch, or labels of one class only.
    """
    import numpy as np

    x = np.asarray(rows, dtype=float)
    y = np.asarray(labels, dtype=float)
    if x.ndim != 2 or len(x) == 0 or len(x) != len(y) or x.shape[1] != len(feature_names):
        msg = "fit_logistic needs one row of len(feature_names) values per label, and some rows"
        raise ValueError(msg)
    if y.min() == y.max():
        msg = "fit_logistic needs examples of both classes"
        raise ValueError(msg)
    design = np.hstack([x, np.ones((len(x), 1))])
    weights = np.zeros(design.shape[1])
    penalty = L2 * np.diag([*([1.0] * x.shape[1]), 0.0])
    for _ in range(NEWTON_STEPS):
        p = 1.0 / (1.0 + np.exp(-np.clip(design @ weights, -60, 60)))
        gradient = design.T @ (p - y) + penalty @ weights
        hessian = design.T @ (design * (p * (1 - p))[:, None]) + penalty
        step = np.linalg.solve(hessian, gradient)
        weights -= step
        if float(np.abs(step).max()) < 1e-9:
            break
    weights_by_name = {n: round(float(w), 4) for n, w in zip(feature_names, weights[:-1], strict=True)}
    return EvidenceModel(name=name, weights=weights_by_name, bias=round(float(weights[-1]), 4), threshold=0.5)


def choose_threshold(positive_scores: Sequence[float], target_answer_rate: float) -> float:
    """
    The highest threshold (rounded down to 4 decimals) accepting `target_answer_rate` in (0, 1] of the positives.

    :raises ValueError: Without scores, or with a rate outside (0, 1].
    """
    if not positive_scores or not 0.0 < target_answer_rate <= 1.0:
        msg = "choose_threshold needs scores and a target rate in (0, 1]"
        raise ValueError(msg)
    ordered = sorted(positive_scores)
    rejected = math.floor((1.0 - target_answer_rate) * len(ordered) + 1e-9)
    return math.floor(ordered[min(rejected, len(ordered) - 1)] * 10_000) / 10_000


def precision_recall_curve(
    positive_scores: Sequence[float], negative_scores: Sequence[float]
) -> list[dict[str, float]]:
    """
    Precision and recall of "sufficient" (score >= t) at every distinct score t:
    `[{"threshold", "precision", "recall", "abstention"}]` by rising threshold.
    """
    points = []
    for t in sorted(set(positive_scores) | set(negative_scores)):
        tp = sum(s >= t for s in positive_scores)
        fp = sum(s >= t for s in negative_scores)
        points.append(
            {
                "threshold": round(float(t), 4),
                "precision": tp / (tp + fp) if tp + fp else 1.0,
                "recall": tp / len(positive_scores) if positive_scores else 0.0,
                "abstention": 1.0 - fp / len(negative_scores) if negative_scores else 1.0,
            }
        )
    return points


def average_precision(positive_scores: Sequence[float], negative_scores: Sequence[float]) -> float | None:
    """Average precision in [0, 1] over the positives by falling score, or `None` without positives."""
    if not positive_scores:
        return None
    ranked = sorted([(s, 1) for s in positive_scores] + [(s, 0) for s in negative_scores], key=lambda p: -p[0])
    hits, total = 0, 0.0
    for rank, (_, label) in enumerate(ranked, start=1):
        if label:
            hits += 1
            total += hits / rank
    return total / len(positive_scores)


def roc_auc(positive_scores: Sequence[float], negative_scores: Sequence[float]) -> float | None:
    """The probability that a positive scores above a negative (ties count half); `None` when a class is empty."""
    if not positive_scores or not negative_scores:
        return None
    wins = sum((p > n) + 0.5 * (p == n) for p in positive_scores for n in negative_scores)
    return wins / (len(positive_scores) * len(negative_scores))


def curve_summary(points: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A few points of a `precision_recall_curve` for a table: the first reaching each `RECALL_STEP`."""
    shown, seen = [], set()
    for point in sorted(points, key=lambda p: -p["threshold"]):
        step = math.floor(point["recall"] / RECALL_STEP + 1e-9)
        if step not in seen:
            seen.add(step)
            shown.append(point)
    return sorted(shown, key=lambda p: -p["recall"])
