# SPDX-License-Identifier: Apache-2.0
"""
Answer and retrieval metrics for multi-hop QA, as the HotpotQA and MuSiQue evaluations compute them.

- `normalize_answer`, `exact_match`, `f1`: the official `hotpot_evaluate_v1.py` rules (lower case, punctuation
  removed, articles a/an/the removed, whitespace collapsed; F1 over tokens; a `yes`/`no`/`noanswer` answer on
  either side scores 0 unless both sides are equal).
- `best_answer_scores`: the maximum over the gold answer and its aliases (MuSiQue's `answer_aliases`), as the
  MuSiQue evaluation does.
- `supporting_recall`: which gold paragraphs are among the chunks a run accumulated.

Usage example:
```python
from haystack_agentic.evaluation.metrics import exact_match, f1

print(exact_match("The Eiffel Tower!", "eiffel tower"))  # 1.0
print(f1("in Greenwich Village", "Greenwich Village, New York City"))  # 0.5
```
"""

import re
import string
from collections import Counter
from collections.abc import Iterable
from typing import Any

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_SPECIAL = ("yes", "no", "noanswer")


def normalize_answer(text: str | None) -> str:
    """
    Normalise an answer the HotpotQA way: lower case, punctuation removed, articles removed, whitespace collapsed.

    :param text: The answer (`None` counts as the empty string).
    :returns: The normalised answer.
    """
    text = (text or "").lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def exact_match(prediction: str | None, gold: str) -> float:
    """
    Exact match after `normalize_answer`.

    :param prediction: The predicted answer (`None`: no answer).
    :param gold: The gold answer.
    :returns: 1.0 or 0.0.
    """
    return float(normalize_answer(prediction) == normalize_answer(gold))


def f1_precision_recall(prediction: str | None, gold: str) -> tuple[float, float, float]:
    """
    Token-overlap F1, precision and recall of the normalised answers (`hotpot_evaluate_v1.f1_score`).

    :param prediction: The predicted answer (`None`: no answer).
    :param gold: The gold answer.
    :returns: `(f1, precision, recall)`, each in [0, 1]. A `yes`/`no`/`noanswer` on either side that differs
        from the other side gives zeros.
    """
    pred, truth = normalize_answer(prediction), normalize_answer(gold)
    if (pred in _SPECIAL or truth in _SPECIAL) and pred != truth:
        return 0.0, 0.0, 0.0
    pred_tokens, truth_tokens = pred.split(), truth.split()
    same = sum((Counter(pred_tokens) & Counter(truth_tokens)).values())
    if same == 0:
        return 0.0, 0.0, 0.0
    precision = same / len(pred_tokens)
    recall = same / len(truth_tokens)
    return 2 * precision * recall / (precision + recall), precision, recall


def f1(prediction: str | None, gold: str) -> float:
    """
    Token-overlap F1 of the normalised answers (see `f1_precision_recall`).

    :param prediction: The predicted answer.
    :param gold: The gold answer.
    :returns: F1 in [0, 1].
    """
    return f1_precision_recall(prediction, gold)[0]


def best_answer_scores(prediction: str | None, golds: Iterable[str]) -> tuple[float, float]:
    """
    Exact match and F1 against the best of several gold answers (the answer and its aliases).

    :param prediction: The predicted answer.
    :param golds: The gold answer first, then aliases (at least one).
    :returns: `(exact_match, f1)`, each the maximum over the golds.
    :raises ValueError: If `golds` is empty.
    """
    golds = [g for g in golds if g is not None]
    if not golds:
        raise ValueError("best_answer_scores needs at least one gold answer.")
    return max(exact_match(prediction, g) for g in golds), max(f1(prediction, g) for g in golds)


def gold_answers(row: dict[str, Any]) -> list[str]:
    """
    The gold answers of a HotpotQA or MuSiQue row: `answer`, then `answer_aliases` if any.

    :param row: The row.
    :returns: Distinct answers, `answer` first.
    """
    return list(dict.fromkeys([str(row["answer"]), *(str(a) for a in row.get("answer_aliases") or [])]))


def supporting_recall(chunk_ids: Iterable[str], gold_ids: Iterable[str]) -> dict[str, Any]:
    """
    Supporting-paragraph recall of a run's accumulated chunks.

    :param chunk_ids: Ids of the chunks the run ended with.
    :param gold_ids: Ids of the gold (supporting) paragraphs.
    :returns: `{"found": int, "total": int, "recall": float, "all_found": bool}`; with no gold paragraphs,
        recall is 1.0 and `all_found` is `True` (nothing was missed).
    """
    found_set = set(chunk_ids)
    gold = list(dict.fromkeys(gold_ids))
    found = sum(g in found_set for g in gold)
    return {
        "found": found,
        "total": len(gold),
        "recall": found / len(gold) if gold else 1.0,
        "all_found": found == len(gold),
    }
