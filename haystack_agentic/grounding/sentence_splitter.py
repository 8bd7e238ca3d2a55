# SPDX-License-Identifier: Apache-2.0
"""
Split an answer or a chunk into sentences with character offsets, for grounding.

Split an answer or a chunk into sentences with character offsets (pysbd, else a punctuation splitter), for grounding;
a chunk's offsets can be stored with it at index time (`sentence_spans`) and read back (`sentences_at`).
"""

import functools
import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from haystack import logging

logger = logging.getLogger(__name__)

#: Markdown block markers at the start of a line: headings, bullets, numbered items, block quotes, table pipes.
_MARKER = re.compile(r"[ \t]*(?:#{1,6}[ \t]+|[-*+•][ \t]+|\(?\d{1,3}[.)][ \t]+|\(?[a-z]\)[ \t]+|>[ \t]*|\|[ \t]*)")
#: A line that starts a new block (list item, heading, quote, fence) or a blank line: always a sentence boundary.
_BLOCK_START = re.compile(r"\n(?=[ \t]*(?:#{1,6}[ \t]|[-*+•][ \t]|\(?\d{1,3}[.)][ \t]|>|```|\|)|[ \t]*\n)")
_WORD = re.compile(r"\w", flags=re.UNICODE)
#: Longest text pysbd splits: its rules take time quadratic in the number of sentence ends (80,000 characters of
#: "1. " took 69 s, 20,000 took 4.5 s here); a longer text is split by the punctuation splitter.
PYSBD_MAX_CHARS = 5_000
_FALLBACK_END = re.compile(r"(?<=[.!?。！？])[\"'”’)\]]*(?:\s+|(?=\S)(?<=[。！？]))")
#: Document meta key of a chunk's sentence boundaries, written at index time (`SentenceSpanAnnotator`) so that
#: citations do not split the chunk again: `split_sentences(content)`'s offsets, flat (`[start, end, start, ...]`:
#: a list of integers, which stores hold as an array field where they cannot hold nested lists).
SENTENCE_SPANS_KEY = "sentence_spans"


@dataclass(frozen=True)
class Sentence:
    """One sentence: `text == original[start:end]` (block markers and outer whitespace excluded)."""

    text: str
    start: int
    end: int


def _library_spans(text: str, language: str) -> list[tuple[int, int]] | None:
    """Sentence spans from pysbd's segments; `None` when pysbd is not installed."""
    try:
        import pysbd  # noqa: PLC0415 - optional dependency (`grounding` extra)
    except ImportError:
        _warn_without_pysbd()
        return None
    # A new segmenter per call: `segment` keeps the text on the instance, so a shared one is not thread-safe.
    # pysbd's own `char_span` finds each sentence by scanning the whole text for every one (quadratic): each is
    # looked for after the previous one instead; one it changed is not found, and `_fill_gaps` covers its text.
    segmenter = pysbd.Segmenter(language=language, clean=False, char_span=False)
    spans, last_end = [], 0
    for segment in pysbd_segments(segmenter, text):
        sentence = segment.strip()
        start = text.find(sentence, last_end) if sentence else -1
        if start >= 0:
            spans.append((start, start + len(sentence)))
            last_end = start + len(sentence)
    return spans


def pysbd_segments(segmenter: Any, text: str) -> list[str]:
    """
    What pysbd's `segmenter.segment(text)` returns, found with `str.find` instead of a regular expression per sentence.

    The result is the same for a segmenter with `clean=False` and no `doc_type`. pysbd finds each processed sentence
    in the text with a pattern built from it (`re.escape` of the sentence, then `\\s*`), which Python compiles anew
    for every sentence and which pushes pysbd's fixed patterns out of `re`'s 512-entry cache, so they are compiled
    again too. The same search by `str.find`: the first of the non-overlapping occurrences (with the whitespace after
    it) that ends after the previous sentence's.
    """
    if not text:
        return []
    segments, prior_end = [], 0
    for sentence in segmenter.processor(text).process():
        found = _occurrence_after(text, sentence, prior_end)
        if found is not None:
            segments.append(text[found[0] : found[1]])
            prior_end = found[1]
    return segments


def _occurrence_after(text: str, sentence: str, prior_end: int) -> tuple[int, int] | None:
    """Where pysbd finds `sentence` (pattern: it, escaped, then `\\s*`): the first match ending past `prior_end`."""
    if not sentence:  # an empty pattern matches everywhere: left to `re` (a pattern it keeps cached)
        match = next((m for m in re.finditer(r"\s*", text) if m.end() > prior_end), None)
        return match.span() if match else None
    position = 0
    while (start := text.find(sentence, position)) >= 0:
        end = start + len(sentence)
        while end < len(text) and text[end].isspace():  # `\s` of a str pattern is `str.isspace`
            end += 1
        if end > prior_end:
            return start, end
        position = end  # finditer's matches do not overlap
    return None


@functools.cache
def _warn_without_pysbd() -> None:
    """Say once per process that the punctuation splitter stands in for pysbd (a base install: no `grounding` extra)."""
    logger.warning(
        "pysbd is not installed (pip install 'haystack-agentic[grounding]'); using a simple punctuation splitter."
    )


def _fallback_spans(text: str) -> list[tuple[int, int]]:
    cuts = [0, *(match.end() for match in _FALLBACK_END.finditer(text)), len(text)]
    return [(a, b) for a, b in itertools.pairwise(cuts) if a < b]


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
    cuts = [start, *(match.start() + 1 for match in _BLOCK_START.finditer(text, start, end)), end]
    return [(a, b) for a, b in itertools.pairwise(cuts) if a < b]


def _trim(text: str, start: int, end: int) -> tuple[int, int] | None:
    """Drop outer whitespace and a leading Markdown marker; `None` when nothing wordy remains."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    before = start  # at a line start when only whitespace comes between the last line break and `start`
    while before > 0 and text[before - 1].isspace() and text[before - 1] != "\n":
        before -= 1
    at_line_start = before == 0 or text[before - 1] == "\n"
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
    """The sentences of a text (Markdown allowed), in order, by the pysbd rules of `language` (ISO 639-1)."""
    if not text or not text.strip():
        return []
    spans = _library_spans(text, language) if len(text) <= PYSBD_MAX_CHARS else None
    spans = _fill_gaps(text, _fallback_spans(text) if spans is None else spans)
    trimmed = [_trim(text, *block) for start, end in spans for block in _split_blocks(text, start, end)]
    return [Sentence(text=text[a:b], start=a, end=b) for a, b in filter(None, trimmed)]


def sentence_spans(text: str, language: str = "en") -> list[int]:
    """`split_sentences(text, language)` as flat offsets `[start, end, start, end, ...]` (the stored form)."""
    return [offset for sentence in split_sentences(text, language) for offset in (sentence.start, sentence.end)]


def sentences_at(text: str, spans: Sequence[int]) -> list[Sentence] | None:
    """
    The sentences of `text` at stored flat `spans`, or `None` when they cannot be its sentences.

    The sentences of `text` at stored flat `spans` (see `sentence_spans`), or `None` when they cannot be its
    sentences: not integers, an odd count, out of order, overlapping, outside the text, starting or ending on
    whitespace, or none for a text with words. Spans that fit a text but were written for another are not detected.
    """
    if len(spans) % 2 or not all(isinstance(n, int) and not isinstance(n, bool) for n in spans):
        return None
    if not spans:
        return None if _WORD.search(text) else []
    sentences, last_end = [], 0
    for start, end in zip(spans[::2], spans[1::2], strict=True):
        if not last_end <= start < end <= len(text) or text[start].isspace() or text[end - 1].isspace():
            return None
        sentences.append(Sentence(text=text[start:end], start=start, end=end))
        last_end = end
    return sentences


_EMPHASIS = re.compile(r"(\*\*|__|`+|~~)")
#: A Markdown link `[text](target)`; neither part may hold its own brackets (so a text of `[`s is one linear scan).
_LINK = re.compile(r"\[([^\[\]]+)\]\([^()]*\)")


def plain(sentence: str) -> str:
    """The sentence as a claim to check: Markdown emphasis, code ticks and link targets removed."""
    text = _LINK.sub(r"\1", sentence)
    return _EMPHASIS.sub("", text).strip()
