# SPDX-License-Identifier: Apache-2.0
"""
Cut a small model's full-sentence answer down to the short answer span it contains.

A 135M model asked for a short answer usually restates the question ("The director of Big Stone Gap is based in
Greenwich Village, New York City."). The short answer is what the sentence adds to the question: the longest run
of words the question does not contain, preferably one that occurs in a retrieved chunk (then the chunk's own
spelling is returned). Yes/no questions get "yes" or "no"; "A or B" questions get the option the sentence names.
Deterministic, a few microseconds; when nothing qualifies, the answer is returned unchanged.
"""

import re
from collections.abc import Sequence

from haystack import logging

from haystack_agentic.policies.entity_scoring import FUNCTION_WORDS, fold

logger = logging.getLogger(__name__)

_WORD_RE = re.compile(r"[\w'’]+", re.UNICODE)
_YES_NO_START = frozenset("is are was were do does did can could has have had will would should".split())
_NEGATION_RE = re.compile(r"\b(no|not|never|neither|nor)\b|n't\b", re.IGNORECASE)
_OPTIONS_RE = re.compile(r"(?:,|:)?\s*([^,?:]+?)\s+or\s+([^,?]+?)\s*\??$")
#: Words that may sit inside an answer span without ending it ("University of Oxford", "Greenwich Village, NYC").
_JOINERS = frozenset("of the de la von van and du del da".split())


def _options(question: str) -> tuple[str, str] | None:
    match = _OPTIONS_RE.search(question.strip())
    return (match.group(1).strip(), match.group(2).strip()) if match else None


def _choose_option(answer: str, options: tuple[str, str]) -> str | None:
    folded = fold(answer)
    hits = []
    for option in options:
        words = [w for w in _WORD_RE.findall(fold(option)) if w not in FUNCTION_WORDS]
        positions = [folded.find(w) for w in words if w in folded]
        if positions:
            hits.append((len(positions) / max(len(words), 1), -min(positions), option))
    return max(hits)[2] if hits else None


def _runs(answer: str, question_words: set[str]) -> list[tuple[int, int]]:
    """Character spans of maximal word runs that the question does not contain (joiners allowed inside)."""
    spans: list[tuple[int, int]] = []
    start = end = None
    pending = 0
    for match in _WORD_RE.finditer(answer):
        word = fold(match.group(0))
        new = word not in question_words and word not in FUNCTION_WORDS
        if new:
            start = match.start() if start is None else start
            end, pending = match.end(), 0
        elif start is not None and word in _JOINERS and pending < 2:
            pending += 1  # may continue the run
        elif start is not None:
            spans.append((start, end))
            start, end, pending = None, None, 0
    if start is not None:
        spans.append((start, end))
    return spans


def short_answer(question: str, answer: str, chunk_texts: Sequence[str] = ()) -> str:
    """
    The short answer span of `answer` (see the module docstring).

    :param question: The user's question.
    :param answer: The model's answer.
    :param chunk_texts: The contents of the chunks the answer was written from.
    :returns: The span (possibly the unchanged answer).
    """
    text = (answer or "").strip()
    if not text:
        return answer
    q_words = _WORD_RE.findall(fold(question))
    options = _options(question)
    if options is not None:
        chosen = _choose_option(text, options)
        if chosen is not None:
            return chosen
    if q_words and q_words[0] in _YES_NO_START and options is None:
        return "no" if _NEGATION_RE.search(text) else "yes"
    runs = _runs(text, set(q_words))
    if not runs:
        return text
    folded_chunks = [fold(c) for c in chunk_texts]

    def rank(span: tuple[int, int]) -> tuple[bool, bool, int, int]:
        raw = text[span[0] : span[1]]
        named = any(w[0].isupper() or w[0].isdigit() for w in _WORD_RE.findall(raw))
        return (any(fold(raw) in c for c in folded_chunks), named, span[1] - span[0], -span[0])

    best = max(runs, key=rank)
    piece = text[best[0] : best[1]].strip(" ,;:.")
    return piece or text
