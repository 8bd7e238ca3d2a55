# SPDX-License-Identifier: Apache-2.0
"""
Split an answer into sentences with character offsets, for sentence-level grounding.

The boundaries come from `pysbd` (rule-based Sentence Boundary Disambiguation, pure Python, no model or download,
installed with the `grounding` extra): it knows abbreviations ("Dr.", "e.g."), decimals and money ("$3.50"),
numbered lists, quotes and parentheses, and CJK sentence ends ("。"). This module adds what grounding needs on
top of it:

- offsets that always index back into the original text (`text[start:end] == sentence.text`), from pysbd's own
  character spans (`char_span=True`); text pysbd leaves out of every span becomes a span of its own;
- Markdown awareness: a line break before a list item, heading or quote always ends a sentence, and the markers
  themselves (`#`, `-`, `*`, `1.`, `>`) are outside the span;
- no empty spans: whitespace and pure punctuation / Markdown rules (`---`, fences) are dropped.

Without `pysbd` a plain fallback (sentence-final punctuation followed by a space or line break) is used, with a
warning; it gets abbreviations wrong.
"""

import re
from dataclasses import dataclass
from haystack import logging

logger = logging.getLogger(__name__)

#: Markdown block markers at the start of a line: headings, bullets, numbered items, block quotes, table pipes.
_MARKER = re.compile(r"[ \t]*(?:#{1,6}[ \t]+|[-*+•][ \t]+|\(?\d{1,3}[.)][ \t]+|\(?[a-z]\)[ \t]+|>[ \t]*|\|[ \t]*)")
#: A line that starts a new block (list item, heading, quote, fence) or a blank line: always a sentence boundary.
_BLOCK_START = re.compile(r"\n(?=[ \t]*(?:#{1,6}[ \t]|[-*+•][ \t]|\(?\d{1,3}[.)][ \t]|>|```|\|)|[ \t]*\n)")
_WORD = re.compile(r"\w", flags=re.UNICODE)
_FALLBACK_END = re.compile(r"(?<=[.!?。！？])[\"'”’)\]]*(?:\s+|(?=\S)(?<=[。！？]))")


@dataclass(frozen=True)
class Sentence:
    """
    One sentence of a text.

    :param text: The sentence, exactly `original[start:end]` (Markdown block markers and outer whitespace excluded).
    :param start: Character offset of its first character in the original text.
    :param end: Character offset one past its last character.
    """

    text: str
    start: int
    end: int


def _library_spans(text: str, language: str) -> list[tuple[int, int]] | None:
    """Sentence spans from pysbd's `char_span` output; `None` when pysbd is not installed."""
    try:
        import pysbd  # noqa: PLC0415 - optional dependency (`grounding` extra)
    except ImportError:
        logger.warning(
            "pysbd is not installed (pip install 'haystack-agentic[grounding]'); using a simple punctuation splitter."
        )
        return None
    # A new segmenter per call: `segment` keeps the text on the instance, so a shared one is not thread-safe.
    segmenter = pysbd.Segmenter(language=language, clean=False, char_span=True)
    spans, last_end = [], 0
    for span in segmenter.segment(text):
        start = max(span.start, last_end)  # pysbd finds its spans by searching the text: never let two overlap
        if span.end > start:
            spans.append((start, span.end))
            last_end = span.end
    return spans


def _fallback_spans(text: str) -> list[tuple[int, int]]:
    cuts = [0, *(match.end() for match in _FALLBACK_END.finditer(text)), len(text)]
    return [(a, b) for a, b in zip(cuts, cuts[1:], strict=False) if a < b]


def _fill_gaps(text: str, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Text the splitter did not cover (pysbd drops a sentence it cannot find again) becomes its own span."""
    filled, cursor = [], 0
    for start, end in spans:
        if text[cursor:start].strip():
            filled.append((cursor, start))
        filled.append((start, end))
        cursor = end
    if text[cursor:].strip():
        filled.append((cursor, len(text)))
    return filled


def _split_blocks(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """Split one span at line breaks that start a Markdown block (list item, heading, quote, blank line)."""
    cuts = [start]
    for match in _BLOCK_START.finditer(text, start, end):
        cuts.append(match.start() + 1)
    cuts.append(end)
    return [(a, b) for a, b in zip(cuts, cuts[1:], strict=False) if a < b]


def _trim(text: str, start: int, end: int) -> tuple[int, int] | None:
    """Drop outer whitespace and a leading Markdown marker; `None` when nothing wordy remains."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    line_start = text.rfind("\n", 0, start) + 1
    at_line_start = not text[line_start:start].strip()
    marker = _MARKER.match(text, start, end) if at_line_start else None
    while marker and marker.end() > start:
        start = marker.end()
        marker = _MARKER.match(text, start, end)
    while start < end and text[start].isspace():
        start += 1
    if start >= end or not _WORD.search(text, start, end):
        return None
    return start, end


def split_sentences(text: str, language: str = "en") -> list[Sentence]:
    """
    Split a text into sentences with character offsets.

    :param text: The text (an answer; Markdown allowed).
    :param language: ISO 639-1 code of the pysbd rules to use (default `en`; its rules also end sentences at
        CJK "。！？").
    :returns: The sentences in order; `text[s.start:s.end] == s.text` for each. Empty for a blank text.
    """
    if not text or not text.strip():
        return []
    spans = _library_spans(text, language)
    spans = _fill_gaps(text, _fallback_spans(text) if spans is None else spans)
    sentences = []
    for start, end in spans:
        for block_start, block_end in _split_blocks(text, start, end):
            trimmed = _trim(text, block_start, block_end)
            if trimmed is not None:
                sentences.append(Sentence(text=text[trimmed[0] : trimmed[1]], start=trimmed[0], end=trimmed[1]))
    return sentences


_EMPHASIS = re.compile(r"(\*\*|__|`+|~~)")


def plain(sentence: str) -> str:
    """
    The sentence as a claim to check: Markdown emphasis, code ticks and link targets removed.

    :param sentence: A sentence from `split_sentences`.
    :returns: The plain text.
    """
    text = re.sub(r"\[([^\]]+)\]\([^)]*\)", r"\1", sentence)
    return _EMPHASIS.sub("", text).strip()
