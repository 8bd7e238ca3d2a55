# SPDX-License-Identifier: Apache-2.0
"""
What `haystack-agentic ask` prints: iterations, answer, sources, evidence verdict and grounding.

What `haystack-agentic ask` prints: each iteration's action, query and chunks, the answer with its `[n]` markers and
the sources they point to, the evidence check's verdict and the grounding of the answer's sentences.
"""

from __future__ import annotations

import shutil
import textwrap
from typing import TYPE_CHECKING, Any

from haystack_agentic.presentation import (
    NO_SOURCE_NOTE,
    document_titles,
    printable,
    source_lines,
    uncited,
    unsupported_note,
)

if TYPE_CHECKING:
    from rich.console import Console


def print_trace(
    console: Console, question: str, result: dict[str, Any], seconds: float, describe: dict[str, str]
) -> None:
    """Print a run's trace and answer (`result`: the loop's result dict, `describe`: its `llm` and `policy`)."""
    console.print(f"[bold]LLM:[/bold] {describe['llm']}   [bold]Policy:[/bold] {describe['policy']}")
    console.print(f"[bold]Question:[/bold] {printable(question)}", highlight=False)
    titles = document_titles(result)
    for step in result["tool_history"]:
        line = f"  {step['iteration']:>2}. {step['action']:<8}"
        if step.get("query"):
            line += f' "{step["query"]}"'
        if step["action"] == "search":
            found = step.get("returned_chunk_ids") or []
            names = ", ".join(titles.get(i, i[:12]) for i in found) or "no results"
            where = f" in {', '.join(step['collections'])}" if step.get("collections") else ""
            line += f"{where} -> {len(found)} chunk(s): {names}"
        elif step.get("result"):
            line += f"  ({textwrap.shorten(step['result'], 120, placeholder=' ...')})"
        console.print(printable(line), highlight=False, markup=False)
    answer = result.get("answer")
    shown = printable(answer) if answer is not None else "(no answer)"
    console.print("[bold]Answer:[/bold] ", end="")
    console.print(shown, highlight=False, markup=False)
    print_sources(console, result)
    usage = result.get("usage", {})
    per_role = ", ".join(f"{role} {u['calls']}" for role, u in usage.items() if role != "total") or "none"
    total = usage.get("total", {})
    console.print(
        f"[bold]Terminated by:[/bold] {result['terminated_by']} after {result['iterations']} iteration(s); "
        f"LLM calls: {total.get('calls', 0)} ({per_role}); tokens: {total.get('prompt_tokens', 0)} prompt + "
        f"{total.get('completion_tokens', 0)} completion; {seconds:.1f} s",
        highlight=False,
    )
    if result.get("error"):
        console.print(f"[bold red]Error:[/bold red] {result['error']}", highlight=False)
        if "TimeoutError" in result["error"]:  # e.g. openai's APITimeoutError: say which flag moves the limit
            console.print("An LLM call took longer than its timeout: give it more with --timeout SECONDS.")
    print_evidence(console, result)
    print_grounding(console, result)


#: Source lines are indented under their heading like the trace's steps.
_SOURCE_INDENT = "  "
#: The narrowest a source line is cut to, however narrow the terminal says it is.
_MIN_WIDTH = 20


def print_sources(console: Console, result: dict[str, Any]) -> None:
    """
    Print the sources the answer's `[n]` markers point to.

    One line each, cut to the terminal width, with the ones the check found unsupported marked; an answer without
    citations gets `NO_SOURCE_NOTE`, a result without an answer nothing.
    """
    lines = source_lines(result, max(shutil.get_terminal_size().columns - len(_SOURCE_INDENT), _MIN_WIDTH))
    if not lines:
        if uncited(result):
            console.print(f"[bold]Sources:[/bold] none. {NO_SOURCE_NOTE}", style="yellow", highlight=False)
        return
    console.print("[bold]Sources:[/bold]")
    for line in lines:
        console.print(_SOURCE_INDENT + line, highlight=False, markup=False)
    note = unsupported_note(result)
    if note:
        console.print(_SOURCE_INDENT + note, style="yellow", highlight=False, markup=False)


def print_evidence(console: Console, result: dict[str, Any]) -> None:
    """The evidence check's verdict (score, threshold, method, reason) and any warning."""
    evidence = result.get("evidence")
    if not evidence:
        return
    verdict = "sufficient" if evidence.get("sufficient") else "insufficient"
    console.print(
        f"[bold]Evidence:[/bold] {verdict}, score {evidence.get('score', 0):.2f} (needed "
        f"{evidence.get('threshold', 0):.2f}, {evidence.get('method')}); ",
        end="",
        highlight=False,
    )
    console.print(printable(str(evidence.get("reason") or "")), highlight=False, markup=False)
    if evidence.get("warning"):
        console.print("[bold yellow]Warning:[/bold yellow] ", end="")
        console.print(printable(evidence["warning"]), highlight=False, markup=False)


def print_grounding(console: Console, result: dict[str, Any]) -> None:
    """The answer's grounding sentence by sentence (supported or not, score, source chunk), or why it was skipped."""
    grounding = result.get("grounding")
    if not grounding:
        reason = (result.get("metadata") or {}).get("grounding_skipped")
        if reason:
            if reason.startswith("HHEM model") and "not available" in reason:
                reason = "the HHEM model is not available here (see the note on stderr for how to get it)"
            console.print("[bold]Grounding:[/bold] skipped: ", end="")
            console.print(printable(reason), highlight=False, markup=False)
        return
    console.print(
        f"[bold]Grounding:[/bold] {grounding['score']:.2f} ({grounding['method']}, {grounding['model']}; "
        f"supported at >= {grounding['threshold']})",
        highlight=False,
    )
    spans = sorted([*grounding["faithful_spans"], *grounding["hallucinated_spans"]], key=lambda s: s["start"])
    for span in spans:
        mark = "supported    " if span["supported"] else "NOT supported"
        line = f'  {mark} {span["score"]:.2f}  "{span["text"]}"'
        if span["sources"]:
            first = span["sources"][0]
            line += f" <- {first.get('title') or first['chunk_id'][:12]}"
            if first.get("iteration") is not None:
                line += f' (search {first["iteration"]}: "{first.get("query") or ""}")'
            if len(span["sources"]) > 1:
                line += f" +{len(span['sources']) - 1} more"
        console.print(printable(line), highlight=False, markup=False)
