# SPDX-License-Identifier: Apache-2.0
import pytest

from benchmarks.harness.metrics import (
    best_answer_scores,
    exact_match,
    f1,
    gold_answers,
    normalize_answer,
    supporting_recall,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The  Quick, brown fox!", "quick brown fox"),
        ("An apple a day", "apple day"),
        ("Theatre anthem", "theatre anthem"),  # articles only as whole words
        ("U.S.A.", "usa"),
        ("  New\tYork\nCity ", "new york city"),
        (None, ""),
    ],
)
def test_normalize_answer(text, expected):
    assert normalize_answer(text) == expected


def test_exact_match():
    assert exact_match("the Eiffel Tower", "Eiffel Tower.") == 1.0
    assert exact_match("Eiffel", "Eiffel Tower") == 0.0
    assert exact_match(None, "Paris") == 0.0


def test_f1_hand_computed():
    # pred {greenwich, village, new, york} vs gold {greenwich, village}: P = 2/4, R = 2/2, F1 = 2/3
    assert f1("Greenwich Village, New York", "Greenwich Village") == pytest.approx(2 / 3)  # P = 1/2, R = 1
    # repeated tokens count once per gold occurrence: pred [cat, cat], gold [cat]: P = 1/2, R = 1, F1 = 2/3
    assert f1("the cat cat", "cat") == pytest.approx(2 / 3)
    # P = 2/3, R = 2/5 -> F1 = 0.5
    assert f1("in Greenwich Village", "Greenwich Village, New York City") == pytest.approx(0.5)
    assert f1("Paris", "London") == 0.0
    assert f1(None, "London") == 0.0


def test_yes_no_noanswer_rules():
    assert f1("yes", "no") == 0.0
    assert f1("yes it is", "yes") == 0.0  # gold is yes/no and the prediction differs: zero, not partial overlap
    assert f1("no", "no way") == 0.0  # prediction is yes/no and differs from the gold
    assert f1("noanswer", "no answer") == 0.0
    assert f1("Yes.", "yes") == 1.0
    assert exact_match("Yes.", "yes") == 1.0


def test_best_answer_scores_and_aliases():
    row = {"answer": "United States", "answer_aliases": ["USA", "U.S."]}
    assert gold_answers(row) == ["United States", "USA", "U.S."]
    assert best_answer_scores("usa", gold_answers(row)) == (1.0, 1.0)
    em, score = best_answer_scores("the United States of America", gold_answers(row))
    assert em == 0.0 and score == pytest.approx(2 * (2 / 4) * 1 / (2 / 4 + 1))
    with pytest.raises(ValueError):
        best_answer_scores("x", [])


def test_supporting_recall():
    assert supporting_recall(["a", "b", "c"], ["a", "d"]) == {"found": 1, "total": 2, "recall": 0.5, "all_found": False}
    assert supporting_recall(["d", "a"], ["a", "d", "a"]) == {"found": 2, "total": 2, "recall": 1.0, "all_found": True}
    assert supporting_recall([], []) == {"found": 0, "total": 0, "recall": 1.0, "all_found": True}
