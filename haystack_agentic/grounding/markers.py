# SPDX-License-Identifier: Apache-2.0
"""The `[n]` citation markers of an answer: how they are written and how they are taken out."""

import json
import re
import unicodedata
from collections.abc import Sequence

#: `metadata` key of the answer's sentences that no chunk of the run backs (no citation found): a list of str.
UNCITED_KEY = "uncited_claims"

#: A marker: `[3]`, `[1, 2]` (`[1][2]` is two markers). Spaces before it belong to it (a match starts where a run of
#: spaces does: a run not followed by a marker is scanned once, not once per space).
MARKER_RE = re.compile(r"(?<![ \t])[ \t]*\[(\d{1,4}(?:\s*,\s*\d{1,4})*)\]")


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


#: What a reply writes around a tool call it puts in its text: tags, code fences, the language tag of a fence.
_CALL_WRAPPING_RE = re.compile(r"</?\s*(?:tool_call|tools|function_call)\s*>|```[a-zA-Z]*", re.IGNORECASE)

#: The JSON values `has_own_words` tries to decode in one answer, at most: each try may scan the rest of the text, so
#: the bound keeps the check linear in the answer's length (unbounded, a text of many `[` is quadratic; issue 39).
MAX_CALL_STARTS = 64

#: Longest lead-in (one line, in characters) a tool call written as text may have and still be only a tool call
#: ("Searching for it now." before the JSON): longer prose around a call is an answer that quotes one.
MAX_LEAD_IN_CHARS = 100


def has_own_words(text: str | None) -> bool:
    """
    Whether an answer has words of its own: not empty, not only whitespace or invisible characters (format
    characters such as U+200B), not only `[n]` markers, and not only tool calls written as text (JSON objects with a
    `name` and `arguments` or `parameters`, bare, in `<tool_call>`/`<tools>` tags or code fences, with at most a
    one-line lead-in of `MAX_LEAD_IN_CHARS`).

    :param text: The answer, or `None`.
    :returns: `True` when a letter or digit remains outside markers and tool-call text.
    """
    body = strip_markers(text) or ""
    body = "".join(ch for ch in body if unicodedata.category(ch) not in ("Cf", "Cc", "Co", "Cn") or ch == "\n")
    rest, calls = _without_calls(_CALL_WRAPPING_RE.sub(" ", body))
    rest = rest.strip()
    if calls and "\n" not in rest and len(rest) <= MAX_LEAD_IN_CHARS:
        return False
    return re.search(r"\w", rest if not calls else body) is not None


def _without_calls(text: str) -> tuple[str, int]:
    """The text without the tool calls written in it as JSON (an object, or a list of objects, naming a tool), and
    how many there were."""
    decoder = json.JSONDecoder()
    kept, calls, index, tries = [], 0, 0, 0
    while index < len(text) and tries < MAX_CALL_STARTS:
        start = min((i for i in (text.find("{", index), text.find("[", index)) if i >= 0), default=-1)
        if start < 0:
            break
        tries += 1
        try:
            value, end = decoder.raw_decode(text, start)
        except (ValueError, RecursionError):  # not JSON, or nested deeper than Python's recursion limit
            kept.append(text[index : start + 1])
            index = start + 1
            continue
        found = value if isinstance(value, list) else [value]
        if found and all(isinstance(v, dict) and "name" in v and {"arguments", "parameters"} & set(v) for v in found):
            kept.append(text[index:start])
            calls += len(found)
        else:
            kept.append(text[index:end])
        index = end
    kept.append(text[index:])
    return "".join(kept), calls
