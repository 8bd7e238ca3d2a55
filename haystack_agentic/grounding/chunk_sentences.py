# SPDX-License-Identifier: Apache-2.0
"""
A chunk's sentences and their words, worked out once per chunk for the citations.

Citing a claim compares its words with the sentences of the run's chunks. Splitting a chunk into sentences and
tokenizing each costs a few milliseconds a chunk, and the same chunks come back turn after turn and question after
question, so both are cached by the chunk's text, title and stored sentence offsets (`SENTENCE_SPANS_KEY`, written
at index time by `SentenceSpanAnnotator`).
"""

import functools

from haystack import Document, logging

from haystack_agentic.evidence.features import chunk_title, tokens
from haystack_agentic.grounding.sentence_splitter import SENTENCE_SPANS_KEY, Sentence, sentences_at, split_sentences
from haystack_agentic.text import stem

logger = logging.getLogger(__name__)

#: A text's folded tokens and their stems, as sets (`word_sets`).
Words = tuple[frozenset[str], frozenset[str]]

#: Chunks whose sentences and words are kept (`sentence_words`): computing them is per-chunk work (a tokenizer pass
#: per sentence), done once per chunk as long as the chunk stays cached, not again at every question that
#: retrieves it.
CHUNK_CACHE_SIZE = 4096


def chunk_sentences(doc: Document) -> list[Sentence]:
    """The chunk's sentences, its title line left out (a title is not evidence of a claim)."""
    return [sentence for sentence, _ in sentence_words(doc)]


def sentence_words(doc: Document) -> tuple[tuple[Sentence, Words], ...]:
    """
    The chunk's sentences with their `word_sets`, its title line left out; worked out once per chunk (cached).

    :param doc: A chunk; its `meta[SENTENCE_SPANS_KEY]` (sentence end offsets) is used when it fits the text, else
        the text is split (a warning says to index it again).
    :returns: `(sentence, (tokens, stems))` pairs in text order.
    """
    stored = (doc.meta or {}).get(SENTENCE_SPANS_KEY)
    spans: tuple[int, ...] | bool | None = False  # `False`: none stored, split the text
    if stored is not None:
        valid = isinstance(stored, (list, tuple)) and all(isinstance(n, int) for n in stored)
        spans = tuple(stored) if valid else None
    return _chunk_words(doc.content or "", chunk_title(doc.content or "", doc.meta), spans)


def word_sets(text: str) -> Words:
    """A text's folded tokens and their stems, as sets."""
    found = frozenset(tokens(text))
    return found, frozenset(_stem(t) for t in found)


#: `word_sets`, cached: the same chunks, titles and claims are scored for every claim of an answer, and question
#: after question (a chunk's sentences are cached with the chunk, `sentence_words`).
cached_word_sets = functools.lru_cache(maxsize=8192)(word_sets)

#: `stem`, cached: a chunk's words are mostly words already seen.
_stem = functools.lru_cache(maxsize=65536)(stem)


@functools.lru_cache(maxsize=CHUNK_CACHE_SIZE)
def _chunk_words(content: str, title: str, spans: tuple[int, ...] | bool | None) -> tuple[tuple[Sentence, Words], ...]:
    # `spans`: the stored sentence offsets, `None` when stored ones are invalid, `False` when none are stored.
    sentences = _split(content) if spans is False else _at(content, spans if isinstance(spans, tuple) else None)
    title_words = word_sets(title)[0]
    pairs = ((sentence, word_sets(sentence.text)) for sentence in sentences)
    return tuple((sentence, found) for sentence, found in pairs if not title_words or not found[0] <= title_words)


@functools.lru_cache(maxsize=1024)
def _split(content: str) -> tuple[Sentence, ...]:
    # The same chunks are cited turn after turn and question after question; splitting costs 3-10 ms a chunk.
    return tuple(split_sentences(content))


@functools.lru_cache(maxsize=1024)
def _at(content: str, spans: tuple[int, ...] | None) -> tuple[Sentence, ...]:
    # Cached so that spans which do not fit are reported once, not at every claim.
    sentences = sentences_at(content, spans) if spans is not None else None
    if sentences is None:
        logger.warning(
            "A chunk's stored '{key}' do not fit its text (index it again); it is split into sentences instead.",
            key=SENTENCE_SPANS_KEY,
        )
        return _split(content)
    return tuple(sentences)
