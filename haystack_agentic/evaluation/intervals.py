# SPDX-License-Identifier: Apache-2.0
"""
95% confidence intervals for evaluation figures over n questions.

- `wilson_interval`: a proportion (e.g. the share of questions whose gold paragraphs were all found). The Wilson
  score interval stays inside [0, 1] and behaves at 0 % and 100 %, where the normal approximation collapses.
- `bootstrap_mean_interval`: a mean of per-question values (answer F1, LLM calls per question). The percentile
  bootstrap: resample the questions with replacement (2,000 times by default, fixed seed, so a report is
  reproducible) and take the 2.5th and 97.5th percentiles of the resampled means.

Usage example:
```python
from haystack_agentic.evaluation.intervals import bootstrap_mean_interval, wilson_interval

print(wilson_interval(52, 60))                          # about (0.758, 0.931)
print(bootstrap_mean_interval([0.0, 0.5, 1.0, 1.0]))    # (low, high) around the mean 0.625
```
"""

import math
import random
from collections.abc import Sequence

#: The normal quantile of a two-sided 95% interval.
Z_95 = 1.959963984540054


def wilson_interval(successes: int, n: int, z: float = Z_95) -> tuple[float, float]:
    """
    The Wilson score interval of a proportion.

    :param successes: How many of the `n` trials succeeded (0 <= successes <= n).
    :param n: Trials (questions); at least 1.
    :param z: The normal quantile (default: 95% two-sided).
    :returns: `(low, high)`, both in [0, 1].
    :raises ValueError: If `n < 1` or `successes` is outside [0, n].
    """
    if n < 1 or not 0 <= successes <= n:
        raise ValueError(f"need 0 <= successes <= n and n >= 1, got successes={successes}, n={n}")
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return low, high


def bootstrap_mean_interval(
    values: Sequence[float], resamples: int = 2000, confidence: float = 0.95, seed: int = 0
) -> tuple[float, float]:
    """
    The percentile-bootstrap interval of a mean.

    :param values: Per-question values (at least one).
    :param resamples: Bootstrap resamples. Default 2,000.
    :param confidence: Coverage, in (0, 1). Default 0.95.
    :param seed: Seed of the resampling (the same values give the same interval).
    :returns: `(low, high)`; both equal the value when all values are equal.
    :raises ValueError: If `values` is empty, `resamples < 1` or `confidence` is outside (0, 1).
    """
    if not values:
        raise ValueError("bootstrap_mean_interval needs at least one value")
    if resamples < 1 or not 0 < confidence < 1:
        raise ValueError(f"need resamples >= 1 and 0 < confidence < 1, got {resamples} and {confidence}")
    data = [float(v) for v in values]
    n = len(data)
    rng = random.Random(seed)
    means = sorted(math.fsum(rng.choices(data, k=n)) / n for _ in range(resamples))
    tail = (1 - confidence) / 2
    low = means[int(math.floor(tail * (resamples - 1)))]
    high = means[int(math.ceil((1 - tail) * (resamples - 1)))]
    # a resampled mean never leaves the data's range (summing floats can, by a rounding error)
    return max(low, min(data)), min(high, max(data))
