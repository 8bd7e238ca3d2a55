# SPDX-License-Identifier: Apache-2.0
"""
Reverse-link follow-ups: search the chunks that mention a bridge entity.

Reverse-link follow-ups: search the chunks that *mention* a bridge entity ("Mountrail County" -> "Mountrail County
Courthouse"), with the question's words no chunk says yet, excluding the pages already retrieved. The entity is the
best name in the scanned chunks the question does not contain, by proximity, specificity and position.
"""

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from haystack import Document

from haystack_agentic.policies.entity_scoring import PageIndex
from haystack_agentic.text import NAME_CONNECTORS, alternation, content_words

# A run of capitalised words, optionally joined by lower-case name connectors ("Bank of America").
_NAME_RE = re.compile(rf"\b[A-Z][\w'’-]*(?: +(?:{alternation(NAME_CONNECTORS)} +)*[A-Z0-9][\w'’-]*)*", re.UNICODE)
#: Longest name, in content words: a longer capitalised run is a row of table cells, not a name.
MAX_NAME_WORDS = 6
_SENTENCE_RE = re.compile(r"[^.!?]+(?:[.!?]+|$)")

# The name score (higher is better):
#: per unit of proximity (share of the question's IDF said in the name's sentence): the next hop sits near them;
PROXIMITY_WEIGHT = 3.0
#: per unit of specificity (mean IDF of the name's new words): a rare name is a better query;
SPECIFICITY_WEIGHT = 0.2
#: per rank of the chunk: names in the best chunk first;
RANK_WEIGHT = 1.0
#: per unit of position in the chunk (0 = start, 1 = end): a paragraph names its subject's links early.
POSITION_WEIGHT = 1.0


@dataclass(frozen=True)
class MentionEntity:
    """A name to search the mentions of, with why it was chosen."""

    name: str
    chunk_rank: int
    chunk_title: str
    specificity: float
    position: float
    score: float


def entity_names(pages: PageIndex, question: str, chunks: Sequence[Document], scan: int) -> list[MentionEntity]:
    """Names in the best `scan` chunks that the question does not contain, best first, deduplicated."""
    q_words = set(content_words(question))
    q_weight = sum(pages.idf(w) for w in q_words) or 1.0
    retrieved = {" ".join(content_words(c.meta.get("title") or "")) for c in chunks}
    out: dict[str, MentionEntity] = {}
    for rank, chunk in enumerate(chunks[:scan]):
        text = chunk.content or ""
        title = chunk.meta.get("title") or ""
        title_words = set(content_words(title))
        for sentence in _SENTENCE_RE.finditer(text):
            near = q_words & set(content_words(sentence.group(0)))
            proximity = sum(pages.idf(w) for w in near) / q_weight
            for match in _NAME_RE.finditer(sentence.group(0)):
                name = match.group(0).strip(" .'’-")
                words = content_words(name)
                if len(words) > MAX_NAME_WORDS:
                    continue
                new = [w for w in words if w not in q_words and w not in title_words and not w.isdigit() and len(w) > 1]
                if not new or len(new) < len(words) / 2 or " ".join(words) in retrieved:
                    continue  # mostly the question's or the chunk's own subject, or a page already retrieved
                specificity = pages.specificity(new)
                position = (sentence.start() + match.start()) / max(len(text), 1)
                score = (
                    PROXIMITY_WEIGHT * proximity
                    + SPECIFICITY_WEIGHT * specificity
                    - RANK_WEIGHT * rank
                    - POSITION_WEIGHT * position
                )
                key = " ".join(words)
                if key not in out or score > out[key].score:
                    out[key] = MentionEntity(name, rank, title, specificity, position, score)
    return sorted(out.values(), key=lambda e: (-e.score, e.chunk_rank, e.position, e.name))


def mentions_search(
    pages: PageIndex,
    question: str,
    chunks: Sequence[Document],
    searched: Sequence[str],
    scan: int,
    top_k: int = 1,
) -> dict[str, Any] | None:
    """The best mentions search as `{"query", "filters", "top_k", "why"}`, or `None` when no name qualifies."""
    said = {w for c in chunks for w in content_words(c.content or "")}
    open_words = [w for w in dict.fromkeys(content_words(question)) if w not in said]
    done = {s.strip().lower() for s in searched}
    for entity in entity_names(pages, question, chunks, scan):
        query = " ".join([entity.name, *open_words]) if open_words else f"{entity.name} {question}"
        if query.strip().lower() in done:
            continue
        titles = sorted({c.meta.get("title") for c in chunks if c.meta.get("title")})
        filters = {"field": "meta.title", "operator": "not in", "value": titles} if titles else None
        why = (
            f"mentions of {entity.name!r} (named in chunk {entity.chunk_rank + 1}, {entity.chunk_title!r}; "
            f"specificity {entity.specificity:.1f}) with the question's open words [{', '.join(open_words[:6])}]"
        )
        return {"query": query, "filters": filters, "top_k": top_k, "why": why}
    return None


def covers_open_words(question: str, chunks: Sequence[Document], newest: Sequence[Document]) -> bool:
    """Whether some question words were open before the last follow-up and its chunks (`newest`) say all of them."""
    new_ids = {c.id for c in newest}
    said = {w for c in chunks if c.id not in new_ids for w in content_words(c.content or "")}
    open_words = {w for w in content_words(question) if w not in said}
    found = {w for c in newest for w in content_words(c.content or "")}
    return bool(open_words) and open_words <= found
