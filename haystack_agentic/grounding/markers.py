# SPDX-License-Identifier: Apache-2.0
"""The `[n]` citation markers of an answer: how they are written and how they are taken out."""

import re

#: A marker: `[3]`, `[1, 2]` (`[1][2]` is two markers). Spaces before it belong to it.
MARKER_RE = re.compile(r"[ \t]*\[(\d{1,4}(?:\s*,\s*\d{1,4})*)\]")


def strip_markers(text: str | None) -> str | None:
    """
    The text without its `[n]` markers (the answer as evaluators compare it, and as a conversation carries it on:
    "Adriana Trigiani [1]" -> "Adriana Trigiani").

    :param text: Text with markers, or `None`.
    :returns: The text without them, stripped (`None` for `None`).
    """
    return None if text is None else MARKER_RE.sub("", text).strip()
