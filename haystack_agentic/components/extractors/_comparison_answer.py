# SPDX-License-Identifier: Apache-2.0
"""
Decide "which came first" comparisons between two named options by the years in their chunks.

The years are those the options' own chunks open with (a person's birth and death, a film's release): `None` unless each
option has a chunk and the years differ.
"""

import re
from collections.abc import Sequence

from haystack_agentic.text import fold, strip_qualifier

_EARLIER_RE = re.compile(r"\b(first|earlier|earliest|older|oldest|before)\b", re.IGNORECASE)
_LATER_RE = re.compile(r"\b(later|latest|younger|youngest|more recent|most recent|newer|newest)\b", re.IGNORECASE)
_LIFESPAN_RE = re.compile(r"\b(lived longer|longer life|lived the longest)\b", re.IGNORECASE)
#: A year: four digits not inside a longer number ("1926February" counts; "12,1926" and "19265" do not) and not a
#: measure ("1850 m", "2000 ft").
_YEAR_RE = re.compile(r"(?<![\d,.])(1[0-9]{3}|20[0-9]{2})(?![\d,]|\.\d|\s?(?:m|km|ft|feet|metres|meters|mi|miles)\b)")
#: How far into a chunk (characters after its title line) the option's own year is looked for.
OPENING_CHARS = 300
#: The longest lifespan, in years, taken as one (a larger gap between two years is not a birth and a death).
MAX_LIFESPAN_YEARS = 130
#: A lifespan needs two years in the opening: a birth and a death.
LIFESPAN_YEAR_COUNT = 2
#: How many characters past an untitled chunk's opening option may sit before its text ("Terry Richardson (born").
_OPENING_SLACK = 8


def _bare(name: str) -> str:
    """A name folded for comparison: quotes and a leading "the" removed."""
    folded = fold(name).strip("\"“”'‘’ ")
    return folded[4:] if folded.startswith("the ") else folded


def _own_chunk(option: str, chunk_texts: Sequence[str]) -> str | None:
    """The chunk whose title line is `option` (qualifier aside) or that opens with it; `None` if none is its own."""
    wanted = _bare(option)
    if not wanted:
        return None
    for text in chunk_texts:
        title, _, body = text.partition("\n")
        if _bare(strip_qualifier(title)) == wanted:
            return body or text
    for text in chunk_texts:  # an untitled chunk that opens with the option ("Terry Richardson (born ...")
        if _bare(text[: len(option) + _OPENING_SLACK]).startswith(wanted):
            return text
    return None


def compare_by_year(question: str, options: tuple[str, str], chunk_texts: Sequence[str]) -> str | None:
    """
    Pick the option a date comparison question asks for, or `None` when the chunks do not settle it.

    The option of `options` the question (earlier, later or longer-lived) asks for, or `None` when the chunks
    (title on the first line, as the shipped datasets write it) do not settle it.
    """
    lifespan = _LIFESPAN_RE.search(question) is not None
    earlier = _EARLIER_RE.search(question) is not None
    later = _LATER_RE.search(question) is not None
    if not lifespan and earlier == later:
        return None
    keys = []
    for option in options:
        chunk = _own_chunk(option, chunk_texts)
        years = [int(y) for y in _YEAR_RE.findall(chunk[:OPENING_CHARS])] if chunk else []
        if lifespan:
            if len(years) < LIFESPAN_YEAR_COUNT or not 0 < years[1] - years[0] < MAX_LIFESPAN_YEARS:
                return None
            keys.append(years[1] - years[0])
        elif years:
            keys.append(years[0])
        else:
            return None
    if keys[0] == keys[1]:
        return None
    if lifespan or later:
        return options[0] if keys[0] > keys[1] else options[1]
    return options[0] if keys[0] < keys[1] else options[1]
