# SPDX-License-Identifier: Apache-2.0
"""
A loop result as text for people, shared by `haystack-agentic ask` and the served chat answers.

A loop result as text for people, shared by `haystack-agentic ask` and the served chat answers: control characters
escaped, one line per citation (`[n] Title: "quoted sentence"`) and the note on unsupported citations.
"""

import re
from typing import Any

from haystack_agentic.grounding.markers import UNCITED_KEY
from haystack_agentic.text import CONTROL_CHARACTERS_RE


def printable(text: str) -> str:
    """Escape control characters (e.g. terminal escape codes in a question) before they reach the terminal."""
    return CONTROL_CHARACTERS_RE.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def document_titles(result: dict[str, Any]) -> dict[str, str]:
    """Chunk id -> its `meta.title` (else the id's first 12 characters), for each chunk of a loop result."""
    return {d["id"]: (d.get("meta") or {}).get("title") or d["id"][:12] for d in result.get("documents", [])}


#: A quote's line breaks and runs of spaces print as one space: one line per source.
_WHITESPACE = re.compile(r"\s+")


def source_lines(result: dict[str, Any], width: int | None = None) -> list[str]:
    """
    One line per citation of a loop result, in the order of `n`.

    One line per citation of a loop result, in the order of `n`: `[n] Title: "quoted sentence"`, with
    `(unsupported) ` after `[n]` when the check found the quote does not support its claim; each cut to `width`
    terminal cells with an ellipsis (`None`: whole).
    """
    titles = document_titles(result)
    lines = []
    for citation in result.get("citations") or []:
        title = citation.get("title") or titles.get(citation["document_id"]) or citation["document_id"][:12]
        flag = "(unsupported) " if citation.get("supported") is False else ""
        quote = _WHITESPACE.sub(" ", citation.get("quote") or "").strip()
        line = printable(f'[{citation["n"]}] {flag}{title}: "{quote}"')
        if width is not None:
            from rich.text import Text  # noqa: PLC0415 - cuts by terminal cells (wide characters count twice)

            text = Text(line)
            text.truncate(width, overflow="ellipsis")
            line = text.plain
        lines.append(line)
    return lines


#: Said of an answer that cites nothing: no chunk of the run says it, so nothing shows where it comes from.
NO_SOURCE_NOTE = "No chunk of this run says this answer: it is unsupported, check it before relying on it."


def uncited(result: dict[str, Any]) -> bool:
    """Whether the result has an answer (answered, or the fallback's at the iteration limit) with no citation."""
    return (
        bool(result.get("answer"))
        and result.get("terminated_by") in ("answered", "max_iterations")
        and not (result.get("citations"))
    )


def unsupported_note(result: dict[str, Any]) -> str | None:
    """
    What the reader should check in an answer, or `None`.

    What the reader should check, or `None`: the citations the check found unsupported ("The offline check found [2]
    unsupported: ..."), then the answer's sentences no chunk backs (`metadata["uncited_claims"]`: no citation to flag).
    """
    notes = []
    flagged = [c for c in result.get("citations") or [] if c.get("supported") is False]
    if flagged:
        checks = list(dict.fromkeys(c.get("check") or "citation" for c in flagged))
        markers = ", ".join(f"[{c['n']}]" for c in flagged)
        which = "its quoted sentence does not" if len(flagged) == 1 else "their quoted sentences do not"
        notes.append(f"The {' and '.join(checks)} check found {markers} unsupported: {which} support the claim.")
    unbacked = (result.get("metadata") or {}).get(UNCITED_KEY) or []
    if unbacked:
        quoted = ", ".join(f'"{printable(_WHITESPACE.sub(" ", claim))}"' for claim in unbacked)
        notes.append(f"No chunk backs {quoted}: unsupported, check it before relying on it.")
    return " ".join(notes) or None
