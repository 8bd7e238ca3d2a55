# SPDX-License-Identifier: Apache-2.0
"""
Plot an evaluation report: answer quality and retrieval recall against LLM calls per question, one point per
configuration (matplotlib, the non-interactive Agg backend; install the `eval` extra).

Usage example:
```python
from haystack_agentic.evaluation.plot import plot_report

plot_report(report, "eval-results/eval.png")  # report from `run_eval`
```
"""

from os import PathLike
from pathlib import Path
from typing import Any

from haystack import logging

logger = logging.getLogger(__name__)


def plot_report(report: dict[str, Any], path: str | PathLike) -> Path:
    """
    Write a PNG with three panels: EM and F1 vs LLM calls per question, both-gold recall vs LLM calls per question,
    and both-gold recall vs searches per question.

    :param report: A report from `run_eval`.
    :param path: The PNG file (its folder is created).
    :returns: The path written.
    :raises ImportError: If matplotlib is not installed (`pip install "haystack-agentic[eval]"`).
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ImportError('The plot needs matplotlib: pip install "haystack-agentic[eval]"') from exc

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    any_answers = False
    for i, (name, entry) in enumerate(report["configs"].items()):
        s = entry["summary"]
        colour = colours[i % len(colours)]
        calls = s["llm_calls_mean"] or 0.0
        if s["f1"] is not None:
            any_answers = True
            axes[0].scatter(calls, 100 * s["f1"], color=colour, marker="o", s=60, label=f"{name} F1")
            axes[0].scatter(calls, 100 * s["em"], color=colour, marker="x", s=60, label=f"{name} EM")
        axes[1].scatter(calls, 100 * s["all_gold_recall"], color=colour, s=60, label=name)
        axes[1].annotate(name, (calls, 100 * s["all_gold_recall"]), textcoords="offset points", xytext=(5, 5))
        axes[2].scatter(s["searches_mean"], 100 * s["all_gold_recall"], color=colour, s=60, label=name)
        axes[2].annotate(name, (s["searches_mean"], 100 * s["all_gold_recall"]), textcoords="offset points", xytext=(5, 5))
    axes[0].set_title("Answer quality")
    axes[0].set_xlabel("LLM calls per question")
    axes[0].set_ylabel("%")
    if any_answers:
        axes[0].legend(fontsize="small")
    else:
        axes[0].text(0.5, 0.5, "retrieval-only run\n(no answers scored)", ha="center", va="center",
                     transform=axes[0].transAxes)
    axes[1].set_title("Both gold paragraphs found")
    axes[1].set_xlabel("LLM calls per question")
    axes[1].set_ylabel("% of questions")
    axes[2].set_title("Both gold paragraphs found")
    axes[2].set_xlabel("searches per question")
    axes[2].set_ylabel("% of questions")
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.margins(x=0.3, y=0.15)
    meta = report.get("meta") or {}
    if meta:
        fig.suptitle(f"{meta.get('data_name', '')}: {meta.get('questions', '?')} questions, "
                     f"{meta.get('budget', '?')} chunks, {meta.get('retriever', '')}")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
