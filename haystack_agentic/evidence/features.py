# SPDX-License-Identifier: Apache-2.0
"""
The lexical features of `EvidenceChecker`: whether the question's key entities and content words occur in the chunks.

- Key entities are quoted strings, runs of capitalised words ("Bank of America") and numbers, a leading question
  word dropped. An entity is *found* when its words occur as one phrase in one chunk (case, accents, punctuation
  and a possessive "'s" ignored); otherwise it scores `SCATTERED_ENTITY_CREDIT` x the share of its words in its
  best chunk. It is a chunk's *subject* when it occurs in the chunk's first `HEAD_CHARS` characters, and *has its
  own passage* when a chunk's title (`meta["title"]` or a short first line, "(qualifier)" ignored) contains it or
  is contained in it; entities made only of numbers are not counted for that.
- Content words (stopwords and question words removed) are matched by light stem, in all chunks, in one chunk,
  and in two *linked* chunks (the second's title named in the first, as a bridge question's two hops are).

`scoring.py` turns these (and the MiniLM similarity) into a score.
"""

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from haystack_agentic.text import (
    NAME_CONNECTORS,
    QUESTION_STOPWORDS,
    WORD_RE,
    alternation,
    fold,
    stem,
    strip_qualifier,
)

# Question words that may open a capitalised run without belonging to the entity ("Which", "In", "The").
_LEADING_NOISE = frozenset(
    """which what who whom whose when where why how in on at of for from the a an is are was were did do does
    this that these those name as by to and or""".split()
)

#: How much of a chunk's start counts as its head, in characters (the subject test).
HEAD_CHARS = 150

#: The longest first line taken as a chunk's title when it has no `meta["title"]`, in characters.
TITLE_CHARS = 120

#: What an entity found only word by word scores, per share of its words in one chunk: scattered words may be
#: about something else, so they count half.
SCATTERED_ENTITY_CREDIT = 0.5

_WORD_RE = re.compile(r"\w+(?:['’.&-]\w+)*", re.UNICODE)
_SENTENCE_ENDS = frozenset('.!?:;\n"“')
_POSSESSIVE_RE = re.compile(r"(\w)['’]s\b")
#: Lower-case words inside a question's entity: a name's connectors and those of a work's title ("First for Women").
_ENTITY_CONNECTORS = NAME_CONNECTORS | frozenset("for in on a an to".split())
# A quoted string, or a run of capitalised words / numbers joined by a few lower-case connectors. A connector only
# joins a capitalised word: "John Bregar in a 2008 film" names John Bregar, not "John Bregar in a 2008".
_ENTITY_RE = re.compile(
    r"\"([^\"]{2,})\"|“([^”]{2,})”"
    rf"|(\b[A-Z0-9][\w'’.&-]*(?:(?:\s+(?:{alternation(_ENTITY_CONNECTORS)}\s+)+[A-Z]|\s+[A-Z0-9])"
    r"[\w'’.&-]*)*)",
    re.UNICODE,
)


def tokens(text: str) -> list[str]:
    """Folded word tokens of a text: lower case, accents removed, a possessive "'s" dropped."""
    return WORD_RE.findall(fold(_POSSESSIVE_RE.sub(r"\1", text)))


def chunk_title(content: str, meta: Mapping[str, Any] | None = None) -> str:
    """A chunk's `meta["title"]`, else its first line when that is short and more text follows, else `""`."""
    title = (meta or {}).get("title")
    if isinstance(title, str) and title.strip():
        return title.strip()
    first, newline, rest = (content or "").strip().partition("\n")
    return first.strip() if newline and rest.strip() and len(first.strip()) <= TITLE_CHARS else ""


def key_entities(question: str) -> list[tuple[str, tuple[str, ...]]]:
    """The question's key entities as `(display text, folded tokens)` pairs, distinct, in order of appearance."""
    found: dict[tuple[str, ...], str] = {}
    for match in _ENTITY_RE.finditer(question):
        text = next(g for g in match.groups() if g is not None).strip()
        words = text.split()
        while words and words[0].lower().strip("'’") in _LEADING_NOISE:
            words = words[1:]
        text = " ".join(words).strip(" .,;:!?'’")
        toks = tuple(tokens(text))
        if not toks or all(t in QUESTION_STOPWORDS for t in toks) or toks in found:
            continue
        found[toks] = text
    # An entity inside a longer one ("Big Stone" in "Big Stone Gap") adds nothing.
    return [
        (text, toks)
        for toks, text in found.items()
        if not any(other != toks and contains_phrase(other, toks) for other in found)
    ]


def truecase(question: str, texts: Sequence[str]) -> str:
    """
    Capitalise a lower-case question's words as the chunks write them.

    A question typed without capitals, its words capitalised as the chunks write them mid-sentence, so that
    `key_entities` finds its names; a question with any capital letter is returned as it is.
    """
    if any(c.isupper() for c in question):
        return question
    capitalised: dict[str, str] = {}
    for text in texts:
        for match in _WORD_RE.finditer(text):
            word = match.group(0)
            if word[0].isupper() and word.lower() not in capitalised:
                i = match.start() - 1
                while i >= 0 and text[i].isspace():  # the character before the word, spaces skipped
                    i -= 1
                if i >= 0 and text[i] not in _SENTENCE_ENDS:
                    capitalised[word.lower()] = word

    def restore(match: re.Match) -> str:
        word = match.group(0)
        return word if word in QUESTION_STOPWORDS else capitalised.get(word, word)

    return _WORD_RE.sub(restore, question)


def question_terms(question: str) -> list[str]:
    """The question's content words (no stopwords or question words), folded, the first of each stem, in order."""
    words: dict[str, str] = {}
    for token in tokens(question):
        if token not in QUESTION_STOPWORDS:
            words.setdefault(stem(token), token)
    return list(words.values())


def contains_phrase(words: Sequence[str], phrase: Sequence[str]) -> bool:
    """Whether `phrase` occurs in `words` as consecutive tokens."""
    n = len(phrase)
    return any(tuple(words[i : i + n]) == tuple(phrase) for i in range(len(words) - n + 1))


@dataclass(frozen=True)
class LexicalCoverage:
    """
    How much of the question the chunks cover, word for word (see the module docstring).

    Per entity: `entity_scores` (1.0 found as a phrase), `entity_subjects`, `entity_titles` (own passage; `None`
    for a number). `best_chunk_word_share` / `best_pair_word_share`: the largest share of `words` in one chunk /
    in one chunk or two linked chunks. The properties are 1.0 when there is nothing to count.
    """

    entities: list[str]
    entity_scores: list[float]
    entity_subjects: list[bool]
    words: list[str]
    words_found: list[str]
    best_chunk_word_share: float
    entity_titles: list[bool | None]
    best_pair_word_share: float

    @property
    def entity_coverage(self) -> float:
        """The mean key-entity score (1.0 without key entities)."""
        return sum(self.entity_scores) / len(self.entity_scores) if self.entity_scores else 1.0

    @property
    def entity_min(self) -> float:
        """The lowest key-entity score (1.0 without key entities)."""
        return min(self.entity_scores, default=1.0)

    @property
    def subject_min(self) -> float:
        """1.0 if every key entity is the subject of some chunk, else 0.0."""
        return 1.0 if all(self.entity_subjects) else 0.0

    @property
    def title_share(self) -> float:
        """The share of the non-numeric key entities that have a passage of their own."""
        counted = [t for t in self.entity_titles if t is not None]
        return sum(counted) / len(counted) if counted else 1.0

    @property
    def entities_without_passage(self) -> list[str]:
        """The key entities found somewhere, but with no passage of their own."""
        return [e for e, t in zip(self.entities, self.entity_titles, strict=True) if t is False]

    @property
    def word_coverage(self) -> float:
        """The share of the question's content words found in some chunk."""
        return len(self.words_found) / len(self.words) if self.words else 1.0

    @property
    def missing_entities(self) -> list[str]:
        """The key entities not found as a phrase in any chunk."""
        return [e for e, s in zip(self.entities, self.entity_scores, strict=True) if s < 1.0]

    @property
    def missing_words(self) -> list[str]:
        """The question's content words found in no chunk."""
        return [w for w in self.words if w not in set(self.words_found)]


def lexical_coverage(question: str, texts: Sequence[str], titles: Sequence[str] | None = None) -> LexicalCoverage:
    """
    How much of the question's key entities and content words the chunk texts contain.

    :param titles: The chunks' titles (`chunk_title`), one per text; `None`: their first lines only.
    :raises ValueError: If `titles` is given with a length other than `texts`'.
    """
    if titles is not None and len(titles) != len(texts):
        msg = f"lexical_coverage got {len(titles)} titles for {len(texts)} texts; give one per text"
        raise ValueError(msg)
    pairs = [(t, titles[i] if titles is not None else chunk_title(t)) for i, t in enumerate(texts) if t]
    texts = [t for t, _ in pairs]
    # Per chunk, its titles as phrases of folded tokens: the one given and a short first line (a heading), if any.
    title_phrases = [
        {f" {p} " for p in (_phrase(title), _phrase(chunk_title(text))) if p.strip()} for text, title in pairs
    ]
    chunk_tokens = [tokens(t) for t in texts]
    joined = [" " + " ".join(toks) + " " for toks in chunk_tokens]
    heads = [" " + " ".join(tokens(t[:HEAD_CHARS])) + " " for t in texts]
    chunk_sets = [set(toks) for toks in chunk_tokens]
    entities = key_entities(truecase(question, texts))
    entity_scores, entity_subjects, entity_titles = [], [], []
    for _, toks in entities:
        phrase = " " + " ".join(toks) + " "
        entity_subjects.append(any(phrase in head for head in heads))
        own = any(phrase in title or title in phrase for titles_ in title_phrases for title in titles_)
        entity_titles.append(None if all(t.isdigit() for t in toks) else own)
        if any(phrase in text for text in joined):
            entity_scores.append(1.0)
            continue
        significant = [t for t in toks if t not in QUESTION_STOPWORDS] or list(toks)
        share = max((sum(t in s for t in significant) / len(significant) for s in chunk_sets), default=0.0)
        entity_scores.append(SCATTERED_ENTITY_CREDIT * share)
    words = question_terms(question)
    chunk_stems = [{stem(t) for t in s} for s in chunk_sets]
    union = set().union(*chunk_stems)
    stems = [stem(w) for w in words]
    best = max((_share(stems, s) for s in chunk_stems), default=0.0) if words else 1.0
    best_pair = best
    if words:  # two linked chunks: the second's title is named in the first (a bridge)
        for i, text in enumerate(joined):
            for j, titles_ in enumerate(title_phrases):
                if i != j and any(title in text for title in titles_):
                    best_pair = max(best_pair, _share(stems, chunk_stems[i] | chunk_stems[j]))
    found = [w for w, st in zip(words, stems, strict=True) if st in union]
    names = [text for text, _ in entities]
    return LexicalCoverage(names, entity_scores, entity_subjects, words, found, best, entity_titles, best_pair)


def _phrase(title: str) -> str:
    return " ".join(tokens(strip_qualifier(title)))


def _share(stems: Sequence[str], found: set[str]) -> float:
    return sum(w in found for w in stems) / len(stems)
