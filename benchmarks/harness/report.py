# SPDX-License-Identifier: Apache-2.0
"""Present an evaluation report: rich tables that fit the console without cutting a number (groups of columns
share a table when they fit; empty columns are left out and named in a note), and a JSON file."""

import json
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import Any

from rich.cells import cell_len
from rich.console import Console
from rich.table import Table

_MISSING = "-"


@dataclass
class Column:
    """One table column: its header, its formatted cells, `justify` `"right"` (numbers) or `"left"`."""

    header: str
    cells: list[str]
    justify: str = "right"

    @property
    def empty(self) -> bool:
        return all(cell == _MISSING for cell in self.cells)


def _pct(value: float | None) -> str:
    return _MISSING if value is None else f"{100 * value:.1f}%"


def _num(value: float | None, digits: int = 2) -> str:
    return _MISSING if value is None else f"{value:.{digits}f}"


def summary_columns(report: dict[str, Any]) -> tuple[Column, list[tuple[str, list[Column]]]]:
    """The summary of a `run_eval` report: `(names column, [(group title, columns)])`."""
    summaries = [entry["summary"] for entry in report["configs"].values()]

    def col(header: str, cell, justify: str = "right") -> Column:
        return Column(header, [cell(s) for s in summaries], justify)

    def roles(s: dict[str, Any]) -> str:
        return "+".join(_num(s["llm_calls_per_role_mean"][r]) for r in ("controller", "answer", "fallback"))

    quality = [
        col("EM", lambda s: _pct(s["em"])),
        col("F1", lambda s: _pct(s["f1"])),
        col("both gold found", lambda s: _pct(s["all_gold_recall"])),
        col("gold recall", lambda s: _pct(s["gold_recall"])),
        col("grounding", lambda s: _num(s["grounding_mean"])),
    ]
    cost = [
        col("searches (max)", lambda s: f"{_num(s['searches_mean'])} ({s['searches_max']})"),
        col("iterations", lambda s: _num(s["iterations_mean"])),
        col("LLM calls /q", lambda s: _num(s["llm_calls_mean"])),
        col("calls ctl+ans+fb", roles),
        col(
            "tokens /q prompt+compl",
            lambda s: f"{_num(s['prompt_tokens_mean'], 0)}+{_num(s['completion_tokens_mean'], 0)}",
        ),
        col("latency s median (p90)", lambda s: f"{_num(s['latency_median_s'], 3)} ({_num(s['latency_p90_s'], 3)})"),
    ]
    ended = [
        col("ended (runs)", lambda s: ", ".join(f"{k} {v}" for k, v in sorted(s["terminated_by"].items())), "left")
    ]
    names = Column("config", list(report["configs"]), "left")
    return names, [("answers and evidence", quality), ("endings", ended), ("cost", cost)]


#: Width a column adds besides its text: one space either side and one border line (plus one for the table).
_COLUMN_EXTRA = 3


def _widths(column: Column) -> tuple[int, int, int]:
    """Text widths, narrowest first: longest word; longest cell or header word; longest cell or header."""
    words = [cell_len(word) for text in [column.header, *column.cells] for word in text.split()]
    cells = max((cell_len(cell) for cell in column.cells), default=1)
    return max(words, default=1), max(cells, *words), max(cells, cell_len(column.header))


def _total(columns: list[Column], level: int) -> int:
    return sum(_widths(c)[level] + _COLUMN_EXTRA for c in columns) + 1


def _fixed_widths(columns: list[Column], width: int) -> list[int | None]:
    """Column widths that fit `width` without cutting a word: headers wrap first, then the widest cells."""
    widths = [_widths(c)[2] for c in columns]
    if _total(columns, 2) <= width:
        return [None] * len(columns)
    excess = _total(columns, 2) - width
    for level in (1, 0):
        floor = [_widths(c)[level] for c in columns]
        while excess > 0:
            shrinkable = [i for i, w in enumerate(widths) if w > floor[i]]
            if not shrinkable:
                break
            widest = max(shrinkable, key=lambda i: widths[i])
            widths[widest] -= 1
            excess -= 1
    return widths


def _table(title: str | None, columns: list[Column], width: int) -> Table:
    table = Table(title=title, title_justify="left")
    for column, fixed in zip(columns, _fixed_widths(columns, width), strict=True):
        table.add_column(column.header, justify=column.justify, width=fixed)
    for row in zip(*(column.cells for column in columns), strict=False):
        table.add_row(*row)
    return table


def fit_tables(keys: list[Column], groups: list[tuple[str, list[Column]]], width: int) -> list[Table]:
    """
    Lay `[(group title, columns)]` out in as few tables as fit `width`, each starting with the `keys` columns and
    titled with its groups when there are several; a group too wide even wrapped is split; empty columns left out.
    """
    packs: list[tuple[list[str], list[Column]]] = []
    for name, group in groups:
        columns = [c for c in group if not c.empty]
        if not columns:
            continue
        fits = [pack for pack in packs if _total(keys + pack[1] + columns, 2) <= width]
        if fits:  # the first table with room at natural width
            fits[0][0].append(name)
            fits[0][1].extend(columns)
        elif _total(keys + columns, 0) <= width:
            packs.append(([name], list(columns)))
        else:  # even wrapped, the group is too wide: one table per run of columns that fits
            for column in columns:
                if packs and packs[-1][0][-1] == name and _total(keys + packs[-1][1] + [column], 0) <= width:
                    packs[-1][1].append(column)
                else:
                    packs.append(([name], [column]))
    single = len(packs) == 1
    return [_table(None if single else ", ".join(names), keys + columns, width) for names, columns in packs]


def left_out_note(report: dict[str, Any]) -> str | None:
    """One line naming the summary columns left out (no value for any configuration) and why, else `None`."""
    _, groups = summary_columns(report)
    empty = [c.header for _, columns in groups for c in columns if c.empty]
    if not empty:
        return None
    reasons = {"EM": "no answers scored", "F1": "no answers scored", "grounding": "no grounding scores"}
    notes: dict[str, list[str]] = {}
    for header in empty:
        notes.setdefault(reasons.get(header, "no values"), []).append(header)
    return "Not shown: " + "; ".join(f"{', '.join(headers)} ({why})" for why, headers in notes.items()) + "."


def per_question_tables(report: dict[str, Any], console: Console) -> list[Table]:
    """One row per question and configuration (scores, cost, ending, the answer), as tables that fit `console`."""
    rows = [(name, r) for name, entry in report["configs"].items() for r in entry["questions"]]

    def col(header: str, cell, justify: str = "right") -> Column:
        return Column(header, [cell(r) for _, r in rows], justify)

    keys = [Column("config", [name for name, _ in rows], "left"), col("id", lambda r: str(r["id"]), "left")]
    numbers = [
        col("EM", lambda r: _num(r["em"], 0)),
        col("F1", lambda r: _num(r["f1"])),
        col("gold", lambda r: f"{r['gold_found']}/{r['gold_total']}"),
        col("searches", lambda r: str(r["searches"])),
        col("LLM calls", lambda r: str(r["llm_calls_total"])),
        col("s", lambda r: _num(r["latency_s"], 2)),
        col("ended", lambda r: str(r["terminated_by"]), "left"),
    ]
    answer = [col("answer", lambda r: r["answer"] if r["answer"] is not None else _MISSING, "left")]
    return fit_tables(keys, [("scores", numbers), ("answers", answer)], console.width)


def render_table(report: dict[str, Any], console: Console, per_question: bool = False) -> None:
    """Print a `run_eval` report's summary (and, with `per_question`, every question's record) to fit `console`."""
    meta = report.get("meta") or {}
    title = f": {meta.get('data_name', '')} ({meta.get('questions', '?')} questions, {meta.get('budget', '?')} chunks)"
    console.print(f"[bold]Evaluation{title if meta else ''}[/bold]", highlight=False)
    names, groups = summary_columns(report)
    for table in fit_tables([names], groups, console.width):
        console.print(table)
    note = left_out_note(report)
    if note:
        console.print(f"[dim]{note}[/dim]", highlight=False)
    if per_question:
        console.print("[bold]Per question[/bold]")
        for table in per_question_tables(report, console):
            console.print(table)


def write_json(report: dict[str, Any], path: str | PathLike) -> Path:
    """Write the report as indented UTF-8 JSON to `path` (its folder is created); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, ensure_ascii=False, indent=2), encoding="utf-8")
    return path
