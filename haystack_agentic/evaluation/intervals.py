# SPDX-License-Identifier: Apache-2.0
"""95% confidence intervals of evaluation figures (`scipy.stats`): the Wilson score interval of a proportion (it
stays inside [0, 1] at 0 % and 100 %) and the percentile bootstrap of a mean."""

from collections.abc import Sequence


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """
    The Wilson score interval `(low, high)` of `successes` out of `n` trials, at coverage `confidence`.

    :raises ValueError: If `n < 1` or `successes` is outside [0, n].
    """
    from scipy.stats import binomtest  # noqa: PLC0415 - scipy.stats takes a second to import

    if n < 1 or not 0 <= successes <= n:
        raise ValueError(f"need 0 <= successes <= n and n >= 1, got successes={successes}, n={n}")
    interval = binomtest(successes, n).proportion_ci(confidence_level=confidence, method="wilson")
    return float(interval.low), float(interval.high)


def bootstrap_mean_interval(
    values: Sequence[float], resamples: int = 2000, confidence: float = 0.95, seed: int = 0
) -> tuple[float, float]:
    """
    The percentile-bootstrap interval `(low, high)` of the mean of `values` (resampled with replacement, seeded).

    :raises ValueError: If `values` is empty, `resamples < 1` or `confidence` is outside (0, 1).
    """
    import numpy as np  # noqa: PLC0415
    from scipy.stats import bootstrap  # noqa: PLC0415

    if not values:
        raise ValueError("bootstrap_mean_interval needs at least one value")
    if resamples < 1 or not 0 < confidence < 1:
        raise ValueError(f"need resamples >= 1 and 0 < confidence < 1, got {resamples} and {confidence}")
    data = np.asarray(values, dtype=float)
    low, high = float(data.min()), float(data.max())
    if len(data) == 1 or low == high:  # scipy needs two observations; every resample's mean is that value
        return low, high
    result = bootstrap(
        (data,), np.mean, n_resamples=resamples, confidence_level=confidence, method="percentile",
        rng=np.random.default_rng(seed),
    )  # fmt: skip
    interval = result.confidence_interval
    # a resampled mean never leaves the data's range (summing floats can, by a rounding error)
    return max(float(interval.low), low), min(float(interval.high), high)
