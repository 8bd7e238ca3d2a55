# SPDX-License-Identifier: Apache-2.0
"""Answer and retrieval metrics for multi-hop QA: exact match and F1 by the official `hotpot_evaluate_v1.py` rules,
the best score over MuSiQue's answer aliases, and supporting-paragraph recall."""

import re
import string
from collections import Counter
from collections.abc import Iterable
from typing import Any

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_SPECIAL = ("yes", "no", "noanswer")


def normalize_answer(text: str | None) -> str:
    """Normalise an answer the HotpotQA way: lower case, no punctuation or articles, whitespace collapsed."""
    text = (text or "").lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def exact_match(prediction: str | None, gold: str) -> float:
    """1.0 when the answers are equal after `normalize_answer` (`None`: no answer), else 0.0."""
    return float(normalize_answer(prediction) == normalize_answer(gold))


def f1(prediction: str | None, gold: str) -> float:
    """Token-overlap F1 in [0, 1] (`hotpot_evaluate_v1.f1_score`); a differing `yes`/`no`/`noanswer` scores 0."""
    pred, truth = normalize_answer(prediction), normalize_answer(gold)
    if (pred in _SPECIAL or truth in _SPECIAL) and pred != truth:
        return 0.0
    pred_tokens, truth_tokens = pred.split(), truth.split()
    same = sum((Counter(pred_tokens) & Counter(truth_tokens)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred_tokens), same / len(truth_tokens)
    return 2 * precision * recall / (precision + recall)


def best_answer_scores(prediction: str | None, golds: Iterable[str]) -> tuple[float, float]:
    """`(exact_match, f1)`, each the maximum over the gold answers. :raises ValueError: If `golds` is empty."""
    golds = [g for g in golds if g is not None]
    if not golds:
        msg = "best_answer_scores needs at least one gold answer."
        raise ValueError(msg)
    return max(exact_match(prediction, g) for g in golds), max(f1(prediction, g) for g in golds)


def gold_answers(row: dict[str, Any]) -> list[str]:
    """The distinct gold answers of a HotpotQA or MuSiQue row: `answer`, then its `answer_aliases`."""
    return list(dict.fromkeys([str(row["answer"]), *(str(a) for a in row.get("answer_aliases") or [])]))


def supporting_recall(chunk_ids: Iterable[str], gold_ids: Iterable[str]) -> dict[str, Any]:
    """Supporting-paragraph recall of a run's chunks: `{"found", "total", "recall", "all_found"}` (1.0 without gold)."""
    found_set = set(chunk_ids)
    gold = list(dict.fromkeys(gold_ids))
    found = sum(g in found_set for g in gold)
    recall = found / len(gold) if gold else 1.0
    return {"found": found, "total": len(gold), "recall": recall, "all_found": found == len(gold)}
