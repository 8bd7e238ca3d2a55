# SPDX-License-Identifier: Apache-2.0
"""
Score the bridge entities a chunk mentions by what the store says about them.

The scores are **lookahead** (the IDF share of the question's words the chunk does not say that the candidate's page
opens with), **specificity** (mean IDF of the mention's words: "State" says little, "Adriana Trigiani" a lot) and
**proximity** (chunk rank, place in the chunk).
"""

import math
from array import array
from collections.abc import Iterable
from dataclasses import dataclass

from haystack_agentic.text import NON_CONTENT_WORDS, content_words

#: How many distinct opening words of each page are kept for the lookahead (memory: 4 bytes each).
PAGE_WORDS = 48

# The candidate score's weights (fitted on half A of the HotpotQA sample, docs/benchmarks.md):
#: per unit of lookahead (0..1): a page that says what the question still asks is the strongest sign;
LOOKAHEAD_WEIGHT = 4.0
#: per unit of specificity (mean IDF, about 1..9): rare names beat generic ones, without outweighing the lookahead;
SPECIFICITY_WEIGHT = 0.25
#: per rank of the mentioning chunk (0 = best): a name in the best chunk is more likely the next hop;
RANK_WEIGHT = 0.5
#: per unit of position in the chunk (0 = start, 1 = end): a lead paragraph names its key links early.
POSITION_WEIGHT = 0.5

#: The fewest chunks a generic mention's words are in: in a small store no name is generic.
GENERIC_MIN_CHUNKS = 20


@dataclass(frozen=True)
class Candidate:
    """
    One title the policy may follow, with the evidence for it (see the module docstring).

    `chunk_rank` is the 0-based rank of the mentioning chunk, `lookahead` (0..1) the IDF share of the question's
    open words its page says (`shared`), `position` where the mention starts in its chunk (0 = start, 1 = end).
    """

    title: str
    score: float
    chunk_rank: int
    chunk_title: str
    lookahead: float
    shared: tuple[str, ...]
    specificity: float
    position: float

    def explain(self) -> str:
        """One line for the trace: where the title is named, the words its page shares, its scores."""
        shared = ", ".join(self.shared[:5]) or "none"
        return (
            f"{self.title!r}: named in chunk {self.chunk_rank + 1} ({self.chunk_title!r}); its page shares "
            f"question words [{shared}] ({self.lookahead:.0%}); specificity {self.specificity:.1f}; "
            f"score {self.score:.2f}"
        )


class PageIndex:
    """Store statistics from `(title, content)` pairs: word document frequencies, each title's first `PAGE_WORDS`."""

    def __init__(self, pages: Iterable[tuple[str, str]]) -> None:
        self._vocab: dict[str, int] = {}
        df: list[int] = []
        self._pages: dict[str, array] = {}
        n = 0
        for title, content in pages:
            n += 1
            words = content_words(content or "")
            ids = []
            for w in dict.fromkeys(words):
                i = self._vocab.get(w)
                if i is None:
                    i = self._vocab[w] = len(df)
                    df.append(0)
                df[i] += 1
                ids.append(i)
            if title:
                kept = self._pages.get(title)
                if kept is None or len(kept) < PAGE_WORDS:
                    merged = list(dict.fromkeys([*(kept or ()), *ids[:PAGE_WORDS]]))[:PAGE_WORDS]
                    self._pages[title] = array("I", merged)
        self.documents = n
        self._idf = [math.log(1 + n / d) for d in df]
        self._max_idf = math.log(1 + max(n, 1))

    def idf(self, word: str) -> float:
        """IDF of a folded word over the store's chunks (an unseen word gets the highest IDF)."""
        i = self._vocab.get(word)
        return self._max_idf if i is None else self._idf[i]

    def specificity(self, mention_words: Iterable[str]) -> float:
        """Mean IDF of a mention's content words (0 when it has none)."""
        words = [w for w in mention_words if w not in NON_CONTENT_WORDS]
        return sum(self.idf(w) for w in words) / len(words) if words else 0.0


def generic_specificity(share: float, documents: int) -> float:
    """
    The specificity below which a mention is generic.

    The specificity below which a mention is generic: its words are (mean IDF) in more than `share` of the store's
    `documents` chunks and in at least `GENERIC_MIN_CHUNKS` of them (0 for an empty store); `ValueError` unless
    `0 < share < 1`.
    """
    if not 0 < share < 1:
        msg = f"generic_share must be in (0, 1), got {share!r}."
        raise ValueError(msg)
    return min(math.log(1 + 1 / share), math.log(1 + documents / GENERIC_MIN_CHUNKS))


def is_generic(candidate: Candidate, threshold: float) -> bool:
    """Whether a candidate's page says no open question word and its mention is below `generic_specificity`."""
    return candidate.lookahead <= 0 and candidate.specificity < threshold


def score_candidate(
    index: PageIndex,
    title: str,
    mention_words: list[str],
    question_words: list[str],
    chunk_text: str | set[str],
    chunk_title: str,
    chunk_rank: int,
    position: float,
) -> Candidate:
    """Score one title mention (see the module docstring); `chunk_text` may be its `content_words` set."""
    said = chunk_text if isinstance(chunk_text, set) else set(content_words(chunk_text))
    said = said | set(content_words(title))  # the open words: what neither the chunk nor the title says
    open_words = list(dict.fromkeys(w for w in question_words if w not in said))
    ids = {index._vocab[w]: w for w in open_words if w in index._vocab}
    shared = [ids[i] for i in index._pages.get(title, ()) if i in ids]
    total = sum(index.idf(w) for w in open_words)
    lookahead = sum(index.idf(w) for w in shared) / total if total else 0.0
    specificity = index.specificity(mention_words)
    score = (
        LOOKAHEAD_WEIGHT * lookahead
        + SPECIFICITY_WEIGHT * specificity
        - RANK_WEIGHT * chunk_rank
        - POSITION_WEIGHT * position
    )
    return Candidate(title, score, chunk_rank, chunk_title, lookahead, tuple(shared), specificity, position)
