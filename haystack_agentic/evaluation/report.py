# SPDX-License-Identifier: Apache-2.0
"""
Present an evaluation report: a terminal table (rich) and a JSON file.

Usage example:
```python
from rich.console import Console
from haystack_agentic.evaluation.report import render_table, write_json

render_table(report, Console())          # report from `run_eval`
write_json(report, "eval-results/eval.json")
```
"""

import json
from os import PathLike
from pathlib import Path
from typing import Any

from haystack import logging
from rich.console import Console
from rich.table import Table

logger = logging.getLogger(__name__)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _num(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def summary_table(report: dict[str, Any]) -> Table:
    """
    One row per configuration: quality, recall, searches, LLM calls and tokens per question, latency, endings.

    :param report: A report from `run_eval` (with optional `meta`).
    :returns: A rich `Table`.
    """
    meta = report.get("meta") or {}
    title = "Evaluation"
    if meta:
        title += f": {meta.get('data_name', '')} ({meta.get('questions', '?')} questions, {meta.get('budget', '?')} chunks)"
    table = Table(title=title, show_lines=False)
    for header, justify in (
        ("config", "left"),
        ("EM", "right"),
        ("F1", "right"),
        ("both gold", "right"),
        ("gold recall", "right"),
        ("searches (max)", "right"),
        ("iters", "right"),
        ("LLM calls/q (ctl+ans+fb)", "right"),
        ("tokens/q (prompt+compl)", "right"),
        ("latency med (p90) s", "right"),
        ("grounding", "right"),
        ("terminated_by", "left"),
    ):
        table.add_column(header, justify=justify)
    for name, entry in report["configs"].items():
        s = entry["summary"]
        per_role = s["llm_calls_per_role_mean"]
        roles = "+".join(_num(per_role[r], 2) for r in ("controller", "answer", "fallback"))
        table.add_row(
            name,
            _pct(s["em"]),
            _pct(s["f1"]),
            _pct(s["all_gold_recall"]),
            _pct(s["gold_recall"]),
            f"{_num(s['searches_mean'])} ({s['searches_max']})",
            _num(s["iterations_mean"]),
            f"{_num(s['llm_calls_mean'])} ({roles})",
            f"{_num(s['prompt_tokens_mean'], 0)}+{_num(s['completion_tokens_mean'], 0)}",
            f"{_num(s['latency_median_s'], 3)} ({_num(s['latency_p90_s'], 3)})",
            _num(s["grounding_mean"]),
            ", ".join(f"{k} {v}" for k, v in sorted(s["terminated_by"].items())),
        )
    return table


def render_table(report: dict[str, Any], console: Console, per_question: bool = False) -> None:
    """
    Print the summary table (and, with `per_question`, one line per question and configuration).

    :param report: A report from `run_eval`.
    :param console: Where to print.
    :param per_question: Also print every question's record in short.
    """
    console.print(summary_table(report))
    if per_question:
        table = Table(title="Per question")
        for header in ("config", "id", "EM", "F1", "gold", "searches", "LLM calls", "s", "ended", "answer"):
            table.add_column(header)
        for name, entry in report["configs"].items():
            for r in entry["questions"]:
                table.add_row(
                    name,
                    str(r["id"])[:12],
                    _num(r["em"], 0),
                    _num(r["f1"]),
                    f"{r['gold_found']}/{r['gold_total']}",
                    str(r["searches"]),
                    str(r["llm_calls_total"]),
                    _num(r["latency_s"], 2),
                    str(r["terminated_by"]),
                    (r["answer"] or "")[:40],
                )
        console.print(table)


def write_json(report: dict[str, Any], path: str | PathLike) -> Path:
    """
    Write the report (summaries and every question's record) as indented UTF-8 JSON.

    :param report: A report from `run_eval`.
    :param path: The file (its folder is created).
    :returns: The path written.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, ensure_ascii=False, indent=2), encoding="utf-8")
    return path
