# SPDX-License-Identifier: Apache-2.0
"""The `[n]` citation markers of an answer: how they are written and how they are taken out."""

import re
import unicodedata
from collections.abc import Collection, Mapping, Sequence
from typing import Any, overload

#: `metadata` key of the answer's sentences that no chunk of the run backs (no citation found): a list of str.
UNCITED_KEY = "uncited_claims"

#: The highest number read as a marker where the number of the run's chunks is not known. A marker is a chunk's
#: number, and a run numbers fewer chunks than this (`LoopLimits.chunk_cap` defaults to 30, answer prompts show 6-10;
#: `Answerer` and `FallbackSynthesizer` refuse to show more); a year has 3-4 digits, so "[2004]" or "[1990, 1991]"
#: in an answer is answer text, never a marker.
MAX_MARKER = 99

#: A marker: `[3]`, `[1, 2]` (`[1][2]` is two markers), each number 1..`MAX_MARKER` (no leading zero). Spaces
#: before it belong to it (a match starts where a run of spaces does: a run not followed by a marker is scanned once,
#: not once per space). Where the run's chunk count n is known, only markers in 1..n are markers (`markers_within`).
MARKER_RE = re.compile(r"(?<![ \t])[ \t]*\[([1-9]\d?(?:\s*,\s*[1-9]\d?)*)\]")


def marker_numbers(match: re.Match[str]) -> list[int]:
    """The numbers of a `MARKER_RE` match (`[1, 2]` -> `[1, 2]`)."""
    return [int(n) for n in re.split(r"\s*,\s*", match.group(1))]


def markers_within(text: str, count: int | None = None) -> str:
    """
    `text` without the markers whose numbers are all chunk numbers (1..`count`), not stripped.

    :param text: The text.
    :param count: How many chunks the text's markers may number (`None`: not known, `MAX_MARKER`). A bracket with a
        number beyond it stays text.
    """
    if count is None or count >= MAX_MARKER:
        return MARKER_RE.sub("", text)
    return MARKER_RE.sub(lambda m: "" if max(marker_numbers(m)) <= count else m.group(0), text)


@overload
def strip_markers(text: str, count: int | None = None) -> str: ...
@overload
def strip_markers(text: None, count: int | None = None) -> None: ...
def strip_markers(text: str | None, count: int | None = None) -> str | None:
    """
    The text without its `[n]` markers, stripped ("Adriana Trigiani [1]" -> "Adriana Trigiani"); `None` stays.

    :param text: The text, or `None`.
    :param count: How many chunks the markers may number (`markers_within`); `None`: not known (1..`MAX_MARKER`).
    """
    return None if text is None else markers_within(text, count).strip()


def cited_count(citations: Sequence[Mapping[str, Any]]) -> int:
    """The highest marker number of a final answer's citations (`0` without any): its markers number no more."""
    return max((c["n"] for c in citations if isinstance(c.get("n"), int)), default=0)


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
