# SPDX-License-Identifier: Apache-2.0
"""
Plot an evaluation report (matplotlib, the `eval` extra): evidence recall (Wilson score interval: it stays inside
[0, 1]) and answer F1 (percentile bootstrap of the mean), 95% intervals by `scipy.stats`, against LLM calls per
question (searches per question when no configuration made an LLM call).
"""

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import Any

#: Coverage of the intervals, and bootstrap resamples (seeded: the same values give the same interval).
CONFIDENCE = 0.95
RESAMPLES = 2000


def wilson_interval(successes: int, n: int) -> tuple[float, float]:
    """
    The Wilson score interval `(low, high)` of `successes` out of `n` trials.

    :raises ValueError: If `n < 1` or `successes` is outside [0, n].
    """
    from scipy.stats import binomtest

    if n < 1 or not 0 <= successes <= n:
        msg = f"need 0 <= successes <= n and n >= 1, got successes={successes}, n={n}"
        raise ValueError(msg)
    interval = binomtest(successes, n).proportion_ci(confidence_level=CONFIDENCE, method="wilson")
    return float(interval.low), float(interval.high)


def bootstrap_mean_interval(values: Sequence[float]) -> tuple[float, float]:
    """The percentile-bootstrap interval `(low, high)` of the mean of `values`. :raises ValueError: If it is empty."""
    import numpy as np
    from scipy.stats import bootstrap

    if not values:
        msg = "bootstrap_mean_interval needs at least one value"
        raise ValueError(msg)
    data = np.asarray(values, dtype=float)
    low, high = float(data.min()), float(data.max())
    if len(data) == 1 or low == high:  # scipy needs two observations; every resample's mean is that value
        return low, high
    interval = bootstrap(
        (data,),
        np.mean,
        n_resamples=RESAMPLES,
        confidence_level=CONFIDENCE,
        method="percentile",
        rng=np.random.default_rng(0),
    ).confidence_interval
    # a resampled mean never leaves the data's range (summing floats can, by a rounding error)
    return max(float(interval.low), low), min(float(interval.high), high)


_MARKERS = ("o", "s", "D", "^", "v", "P", "X", "*")


@dataclass
class PlotPoint:
    """One configuration's figures (fractions) with their 95% intervals; `f1` is `None` when nothing was scored."""

    name: str
    n: int
    x: float
    x_low: float
    x_high: float
    recall: float
    recall_low: float
    recall_high: float
    f1: float | None = None
    f1_low: float | None = None
    f1_high: float | None = None


def plot_points(report: dict[str, Any]) -> tuple[list[PlotPoint], str]:
    """The plot's points (one per configuration with questions) and x axis label, from a `run_eval` report."""
    records = {name: entry["questions"] for name, entry in report["configs"].items() if entry["questions"]}
    any_calls = any(r["llm_calls_total"] for rows in records.values() for r in rows)
    x_key, x_label = (
        ("llm_calls_total", "LLM calls per question")
        if any_calls
        else ("searches", "searches per question (no LLM calls in this run)")
    )
    points = []
    for name, rows in records.items():
        xs = [float(r[x_key]) for r in rows]
        found = sum(bool(r["all_gold_found"]) for r in rows)
        point = PlotPoint(
            name,
            len(rows),
            sum(xs) / len(xs),
            *bootstrap_mean_interval(xs),
            found / len(rows),
            *wilson_interval(found, len(rows)),
        )
        f1s = [r["f1"] for r in rows if r["f1"] is not None]
        if f1s:
            point.f1 = sum(f1s) / len(f1s)
            point.f1_low, point.f1_high = bootstrap_mean_interval(f1s)
        points.append(point)
    return points, x_label


def _dodges(xs: list[float], span: float, step: float = 7.0) -> list[float]:
    """Horizontal offsets (points) spreading out configurations whose x values are within 2% of the span."""
    offsets = [0.0] * len(xs)
    groups: list[list[int]] = []
    for i in sorted(range(len(xs)), key=lambda i: xs[i]):
        if groups and abs(xs[i] - xs[groups[-1][0]]) <= 0.02 * span:
            groups[-1].append(i)
        else:
            groups.append([i])
    for group in groups:
        for k, i in enumerate(group):
            offsets[i] = (k - (len(group) - 1) / 2) * step
    return offsets


def plot_report(report: dict[str, Any], path: str | PathLike) -> Path:
    """
    Write a PNG (its folder created) of a `run_eval` report (its optional `meta` gives the title); the F1 panel only
    when answers were scored. Returns `path`.

    :raises ImportError: If matplotlib is not installed (`pip install "haystack-agentic[eval]"`).
    :raises ValueError: If no configuration has any question.
    """
    try:
        import matplotlib as mpl

        mpl.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.transforms import offset_copy
    except ImportError as exc:
        msg = 'The plot needs matplotlib: pip install "haystack-agentic[eval]"'
        raise ImportError(msg) from exc

    points, x_label = plot_points(report)
    if not points:
        msg = "The report has no configuration with questions: nothing to plot."
        raise ValueError(msg)
    panels = [("Evidence recall: every gold paragraph found", "% of questions", "recall")]
    if any(p.f1 is not None for p in points):
        panels.append(("Answer quality", "mean answer F1 (%)", "f1"))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig, axes = plt.subplots(1, len(panels), figsize=(6.4 * len(panels), 5.2), squeeze=False, layout="constrained")
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    x_max = max(1.0, *(p.x_high for p in points)) * 1.12
    offsets = _dodges([p.x for p in points], x_max)
    handles = []
    for ax, (title, y_label, key) in zip(axes[0], panels, strict=True):
        for i, point in enumerate(points):
            value = getattr(point, key)
            if value is None:
                continue
            low, high = getattr(point, f"{key}_low"), getattr(point, f"{key}_high")
            handle = ax.errorbar(
                point.x,
                100 * value,
                xerr=[[point.x - point.x_low], [point.x_high - point.x]],
                yerr=[[100 * (value - low)], [100 * (high - value)]],
                fmt=_MARKERS[i % len(_MARKERS)],
                color=colours[i % len(colours)],
                markersize=8,
                capsize=4,
                label=f"{point.name} (n={point.n})",
                transform=offset_copy(ax.transData, fig=fig, x=offsets[i], units="points"),
            )
            if key == "recall":
                handles.append(handle)
        ax.set(title=title, xlabel=x_label, ylabel=y_label, ylim=(-3, 103), xlim=(-0.06 * x_max, x_max))
        ax.set_yticks(range(0, 101, 20))
        ax.grid(alpha=0.3)
    meta = report.get("meta") or {}
    if meta:
        answers = meta.get("answer_llm") and f"answers: {meta['answer_llm']}"
        details = "; ".join(filter(None, [meta.get("retriever"), answers]))
        first = f"{meta.get('data_name', '')}: {meta.get('questions', '?')} questions, {meta.get('budget', '?')} chunks"
        fig.suptitle("\n".join([first, *textwrap.wrap(details, 70 * len(panels))]))
    means = ("answer F1 and " if len(panels) > 1 else "") + x_label.split(" (")[0]
    note = (
        "Bars: 95% confidence intervals. Evidence recall: Wilson score interval; "
        f"{means}: percentile bootstrap, {RESAMPLES:,} resamples of the questions."
    )
    legend = fig.legend(
        handles=handles,
        loc="outside lower center",
        ncol=min(len(handles), 4),
        frameon=False,
        title="\n".join(textwrap.wrap(note, 85 * len(panels))),
        title_fontsize="small",
    )
    legend.get_title().set_color("dimgray")
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
