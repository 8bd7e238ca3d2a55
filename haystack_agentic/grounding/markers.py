# SPDX-License-Identifier: Apache-2.0
"""The `[n]` citation markers of an answer: how they are written and how they are taken out."""

import re
import unicodedata
from collections.abc import Collection, Sequence
from typing import overload

#: `metadata` key of the answer's sentences that no chunk of the run backs (no citation found): a list of str.
UNCITED_KEY = "uncited_claims"

#: A marker: `[3]`, `[1, 2]` (`[1][2]` is two markers). Spaces before it belong to it (a match starts where a run of
#: spaces does: a run not followed by a marker is scanned once, not once per space).
MARKER_RE = re.compile(r"(?<![ \t])[ \t]*\[(\d{1,4}(?:\s*,\s*\d{1,4})*)\]")


@overload
def strip_markers(text: str) -> str: ...
@overload
def strip_markers(text: None) -> None: ...
def strip_markers(text: str | None) -> str | None:
    """The text without its `[n]` markers, stripped ("Adriana Trigiani [1]" -> "Adriana Trigiani"); `None` stays."""
    return None if text is None else MARKER_RE.sub("", text).strip()


def append_markers(text: str, numbers: Sequence[int]) -> str:
    """`text` without leading whitespace, then `[n]` markers after its own trailing whitespace (or one space)."""
    body = (text or "").lstrip()
    if not numbers:
        return body.rstrip()
    kept = body.rstrip()
    return kept + (body[len(kept) :] or " ") + "".join(f"[{n}]" for n in numbers)


def insert_markers(text: str, ends: Sequence[int], numbers: Sequence[Sequence[int]]) -> str:
    """`text` with `numbers[i]`'s markers before the final `.!?` of the sentence ending at `ends[i]` ("big [2].")."""
    answer = text or ""
    for end, marks in sorted(zip(ends, numbers, strict=False), reverse=True):
        if marks:
            stop = end - 1 if answer[end - 1 : end] in (".", "!", "?") else end
            answer = answer[:stop].rstrip() + " " + "".join(f"[{n}]" for n in marks) + answer[stop:]
    return answer.strip()


def has_own_words(text: str | None, tool_names: Collection[str]) -> bool:
    """
    Whether an answer has words of its own (not only markers, invisible characters or calls to the run's tools).

    Whether an answer has words of its own: not empty, not only whitespace or invisible characters (format
    characters such as U+200B), not only `[n]` markers, and not only calls to the run's tools written as text (the
    shapes the recovery of text tool calls reads: `llm.text_tool_calls.is_only_calls`). A JSON object that names
    no tool of the run (`{"name": "Paris", "country": "France"}`) is an answer in words.

    :param text: The answer, or `None`.
    :param tool_names: The names of the tools the run offers (`llm.loop_tools.run_tool_names`).
    :returns: `True` when a letter or digit remains outside markers, and the text is not only tool calls.
    """
    # Imported here: the recovery module imports Haystack, which the CLI's `--help` (it loads this module) must not.
    from haystack_agentic.llm.text_tool_calls import is_only_calls  # noqa: PLC0415

    body = strip_markers(text) or ""
    body = "".join(ch for ch in body if unicodedata.category(ch) not in ("Cf", "Cc", "Co", "Cn") or ch == "\n")
    return re.search(r"\w", body) is not None and not is_only_calls(body, tool_names)
