# SPDX-License-Identifier: Apache-2.0
"""
Citations: which sentence of which chunk each claim of the answer rests on, with `[n]` markers in the answer.

The rules (markers, ids, a located short answer, nothing cited; the offline check) are in docs/decisions.md
("Citations"). Citation dict::

    {"n": 1, "document_id": str, "title": str | None, "quote": str, "start": int, "end": int, "claim": str,
     "search": {"iteration": int, "query": str | None} | None, "supported": bool | None,
     "check": "offline" | "hhem" | "llm_judge" | None}
"""

import functools
import re
from collections.abc import Sequence
from typing import Any

from haystack import Document, logging

from haystack_agentic.dataclasses.loop_state import LoopState
from haystack_agentic.evidence.features import chunk_title, key_entities, question_terms, tokens
from haystack_agentic.grounding.assembly import assemble, chunk_sources
from haystack_agentic.grounding.chunk_sentences import Words, cached_word_sets, chunk_sentences, sentence_words
from haystack_agentic.grounding.markers import (
    MARKER_RE,
    UNCITED_KEY,
    append_markers,
    insert_markers,
    strip_markers,
)
from haystack_agentic.grounding.sentence_splitter import SENTENCE_SPANS_KEY, Sentence, plain, split_sentences
from haystack_agentic.llm.result_digests import find_chunk
from haystack_agentic.text import stem, strip_qualifier

logger = logging.getLogger(__name__)

#: The `LoopState.metadata` key listing the citations the LLM gave that were dropped, and why.
DROPPED_KEY = "citations_dropped"

#: Share of a claim's content words (light stems) the cited sentence must contain: half, so a claim that
#: paraphrases its source still passes, one that shares a stray word does not.
MIN_WORD_SHARE = 0.5

#: Yes/no answers carry no claim of their own: the question is what they assert.
_YES_NO = frozenset({"yes", "no"})

_NO_SEARCH = {"iteration": None, "query": None}

Cited = list[tuple[Document, tuple[int, int] | None]]


def draft_sources(state: LoopState) -> list[str]:
    """
    The `sources` of the controller's last `answer` tool call, as non-empty strings; `[]` without any.

    A single value counts as a list of one; a non-id is kept as text so `cite` drops and records it.
    """
    for step in reversed(state.tool_history):
        if step.action == "answer":
            sources = (step.arguments or {}).get("sources") if step.tool_name == "answer" else None
            if sources is None:
                return []
            items = sources if isinstance(sources, (list, tuple)) else [sources]
            return [text for text in (str(item).strip() for item in items) if text]
    return []


def cite(
    state: LoopState,
    text: str,
    *,
    shown: Sequence[Document] = (),
    cited_ids: Sequence[str] = (),
    located: tuple[int, int, int] | None = None,
    language: str = "en",
) -> LoopState:
    """
    Set the answer with its `[n]` markers and its checked citations (see docs/decisions.md, "Citations").

    :param state: The ended run's state (its chunks and tool history name the chunks and the searches).
    :param text: The answer as the LLM (or the short-answer rule) wrote it, markers included.
    :param shown: The numbered chunks the answer's prompt listed (`[1]` is `shown[0]`); `()` when the path shows
        none (tools mode), then every marker is dropped and taken out of the text.
    :param cited_ids: Chunk ids the LLM cited (the `answer` tool's `sources`), used when no marker is valid.
    :param located: `(index into shown, start, end)`: where in a shown chunk the answer was read from.
    :param language: Sentence splitter language (ISO 639-1). Default `en`.
    :returns: The state with `answer` (`text` as written, plus the markers the loop adds at its end), `citations`
        and, when the LLM cited something that does not exist, `metadata["citations_dropped"]`.
    """
    dropped: list[dict[str, str]] = []
    claims = _claims(text, language)
    if not shown:  # nothing was numbered (a tool call's text, never streamed): its markers point at nothing
        dropped.extend(
            {"cited": f"[{number}]", "reason": "no numbered chunks were shown here; cite ids"}
            for _, numbers, _ in claims
            for number in numbers
        )
        unmarked = MARKER_RE.sub("", text or "")
        if unmarked != text:  # the answer is split again only if it changed (pysbd: the largest cost left here)
            text, claims = unmarked, _claims(unmarked, language)
    beyond = [number for _, numbers, _ in claims for number in numbers if not 1 <= number <= len(shown)]
    if beyond:  # a marker whose citation is dropped does not stay in the answer
        dropped.extend(
            {"cited": f"[{number}]", "reason": f"no chunk [{number}] was shown (1-{len(shown)})"} for number in beyond
        )
        text = _without_markers_beyond(text, len(shown))
        claims = _claims(text, language)
    # Where a claim nobody cited is looked up: the shown chunks first, then the run's others.
    pool = [*shown, *(doc for doc in state.chunks if all(doc.id != s.id for s in shown))]
    looked_up: dict[str, tuple[Document, tuple[int, int]] | None] = {}  # a claim said again is looked up once
    cited: list[Cited] = [[] for _ in claims]
    by_llm: set[int] = set()  # the claims cited by the LLM (a valid marker or id) or by where they were read
    for index, (_, markers, _) in enumerate(claims):
        for number in markers:
            by_llm.add(index)
            _add(cited[index], shown[number - 1], None)
    if located is not None and claims and 0 <= located[0] < len(shown):
        doc, span = _saying(claims[-1][0], (shown[located[0]], located[1], located[2]), pool, state.question)
        _add(cited[-1], doc, span)
        by_llm.add(len(claims) - 1)  # where the answer was read stands, as what the LLM cited does
    elif not by_llm and cited_ids and claims:
        for chunk_id in cited_ids:
            chunk, problem = find_chunk(state.chunks, chunk_id)
            if chunk is None:
                dropped.append({"cited": chunk_id, "reason": problem or "unknown chunk"})
                continue
            best = max(range(len(claims)), key=lambda i: (_best_sentence(claims[i][0], chunk, state.question)[0], i))
            _add(cited[best], chunk, None)
            by_llm.add(best)
    for index, (claim, _, _) in enumerate(claims):
        if index in by_llm or not claim:
            continue  # what the LLM cited stands; a name is cited from its own page when that page supports it
        if claim not in looked_up:
            looked_up[claim] = _own_page(claim, pool, state.question) or _best_in(claim, pool, state.question)
        found = looked_up[claim]
        if found is not None:
            cited[index] = [found]
    return _with_citations(state, text, claims, cited, dropped, shown)


def _without_markers_beyond(text: str, count: int) -> str:
    """`text` without the marker numbers outside 1..`count` (a marker left with none goes, its spaces too)."""

    def kept(match: re.Match[str]) -> str:
        numbers = [n for n in re.split(r"\s*,\s*", match.group(1)) if 1 <= int(n) <= count]
        if len(numbers) == len(re.split(r"\s*,\s*", match.group(1))):
            return match.group(0)
        return f" [{', '.join(numbers)}]" if numbers else ""

    return MARKER_RE.sub(kept, text)


def _add(entries: Cited, doc: Document, at: tuple[int, int] | None) -> None:
    if all(existing.id != doc.id for existing, _ in entries):
        entries.append((doc, at))


def _claims(text: str, language: str) -> list[tuple[str, list[int], int]]:
    """The answer's `(claim without markers, marker numbers, end offset)`; a markers-only sentence's go before."""
    claims: list[tuple[str, list[int], int]] = []
    for sentence in split_sentences(text or "", language):
        numbers = [int(n) for match in MARKER_RE.finditer(sentence.text) for n in re.split(r"\s*,\s*", match.group(1))]
        claim = plain(strip_markers(sentence.text))
        if not re.search(r"\w", claim):
            if claims:
                claims[-1][1].extend(numbers)
            continue
        claims.append((claim, numbers, sentence.end))
    return claims


def _with_citations(
    state: LoopState,
    text: str,
    claims: list[tuple[str, list[int], int]],
    cited: list[Cited],
    dropped: list[dict[str, str]],
    shown: Sequence[Document],
) -> LoopState:
    """Number the citations, append the markers the loop added to the text, check each citation offline."""
    sources = chunk_sources(state)
    written = [number for _, numbers, _ in claims for number in numbers]
    # The LLM's markers stand as written, so chunks keep the numbers the prompt gave them; without any, the
    # citations are numbered 1, 2, ... in claim order. Either way one chunk has one number.
    number_of = {doc.id: i + 1 for i, doc in enumerate(shown)} if written else {}
    last = max([len(shown), *written]) if written else 0
    citations: list[dict[str, Any]] = []
    added: list[int] = []  # the numbers the loop cites beyond the LLM's markers, in claim order
    in_place: list[list[int]] = [[] for _ in claims]  # the same, per claim
    for (claim, marks, _), entries, own in zip(claims, cited, in_place, strict=True):
        for doc, at in entries:
            if doc.id not in number_of:
                last += 1
                number_of[doc.id] = last
            number = number_of[doc.id]
            # The sentence around where a short answer was read, unless that is the title line.
            around = _sentence_around(doc, *at) if at is not None else None
            start, end = around or _best_sentence(claim, doc, state.question)[1]
            quote = (doc.content or "")[start:end]
            title = (doc.meta or {}).get("title")
            title = title if isinstance(title, str) else None  # a store or user tool may hold any JSON value
            citations.append(
                {
                    "n": number,
                    "document_id": doc.id,
                    "title": title,
                    "quote": quote,
                    "start": start,
                    "end": end,
                    "claim": claim,
                    "search": sources.get(doc.id),
                    "supported": offline_support(claim, quote, state.question, title),
                    "check": "offline",
                }
            )
            if number not in marks and number not in added:
                added.append(number)
                own.append(number)
    metadata = dict(state.metadata)
    if dropped:
        logger.info("Dropped {count} citation(s) the LLM gave: {dropped}", count=len(dropped), dropped=dropped)
        metadata[DROPPED_KEY] = dropped
    else:
        metadata.pop(DROPPED_KEY, None)
    # A sentence no chunk backs has no citation to flag: the result names it instead.
    unbacked = [claim for (claim, _, _), entries in zip(claims, cited, strict=True) if not entries]
    if unbacked:
        metadata[UNCITED_KEY] = unbacked
    else:
        metadata.pop(UNCITED_KEY, None)
    # A text the answer's prompt numbered chunks for may have streamed as written: the loop's markers go after it.
    # Any other (a tool call's argument, a draft, an answer re-cited by a grounder) never streamed: each marker goes
    # on the sentence it cites.
    ends = [end for _, _, end in claims]
    answer = append_markers(text, added) if shown else insert_markers(text, ends, in_place)
    return state.with_outcome(answer=answer, citations=tuple(citations)).evolve(metadata=metadata)


def _sentence_around(doc: Document, start: int, end: int) -> tuple[int, int] | None:
    """The sentence of `doc` holding `[start, end)`, or `None` when it is only the title line."""
    for sentence in chunk_sentences(doc):
        if sentence.start <= start < sentence.end or sentence.start < end <= sentence.end:
            return sentence.start, max(sentence.end, min(end, len(doc.content or "")))
    return None


def _best_sentence(claim: str, doc: Document, question: str) -> tuple[tuple[float, float], tuple[int, int]]:
    """`((claim score, question score), (start, end))` of `doc`'s sentence best for `claim` (score 0: its first)."""
    terms, asked = _terms(claim, question), _terms(question, question)
    sentences = sentence_words(doc)
    best = ((0.0, 0.0), (sentences[0][0].start, sentences[0][0].end) if sentences else (0, 0))
    for sentence, words in sentences:
        score = _share(terms, words)
        key = (score, _share(asked, _with_title(doc, words))) if score > 0 else (0.0, 0.0)
        if key > best[0]:
            best = (key, (sentence.start, sentence.end))
    return best


def _about(asked: tuple[Sequence[tuple[str, ...]], frozenset[str]], doc: Document, sentence: str) -> float:
    """How much of the question a sentence says, its chunk's title counting as its subject."""
    return _share(asked, _with_title(doc, cached_word_sets(sentence)))


def _with_title(doc: Document, words: Words) -> Words:
    """
    A sentence's `words` with those of its chunk's `meta["title"]`.

    They are the words of `"{title}. {sentence}"` (a token never runs across ". "), without tokenizing that string
    anew for every sentence of every chunk.
    """
    title = cached_word_sets(f"{(doc.meta or {}).get('title') or ''}")
    return words[0] | title[0], words[1] | title[1]


def _saying(
    claim: str, located: tuple[Document, int, int], pool: Sequence[Document], question: str
) -> tuple[Document, tuple[int, int]]:
    """Among `pool`'s sentences saying a short answer, the one best supporting the claim; `located`'s on a tie."""
    name, asked = tokens(claim), _terms(question, question)

    def key(doc: Document, span: tuple[int, int]) -> tuple[bool, float]:  # the check passes, then the question
        quote = (doc.content or "")[span[0] : span[1]]
        return offline_support(claim, quote, question, (doc.meta or {}).get("title")), _about(asked, doc, quote)

    doc, start, end = located
    best = (doc, _sentence_around(doc, start, end) or (start, end))
    # Only these can have such a sentence:
    holding = [d for d in pool if set(name) <= cached_word_sets(d.content or "")[0]]
    candidates = [(d, (s.start, s.end)) for d in holding for s, words in sentence_words(d) if set(name) <= words[0]]
    return max([best, *candidates], key=lambda found: key(*found))  # max keeps the first of equals: `best`


def _own_page(claim: str, pool: Sequence[Document], question: str) -> tuple[Document, tuple[int, int]] | None:
    """For a name, the chunk of `pool` titled with it and its best sentence, when that supports it; else `None`."""
    name = tuple(tokens(claim))
    for doc in pool:
        title = tuple(tokens(strip_qualifier(chunk_title(doc.content or "", doc.meta))))
        if not title or title != name:
            continue
        score, (start, end) = _best_sentence(claim, doc, question)
        quote, title_text = (doc.content or "")[start:end], (doc.meta or {}).get("title")
        if score[0] > 0 and offline_support(claim, quote, question, title_text):
            return doc, (start, end)
    return None


def _best_in(claim: str, pool: Sequence[Document], question: str) -> tuple[Document, tuple[int, int]] | None:
    """The chunk sentence that supports `claim` best among `pool` (as `_best_sentence`; ties: the earlier chunk)."""
    terms = _terms(claim, question)
    # A chunk holding none of the claim's terms has no sentence that does, and is not scored sentence by sentence.
    pool = [doc for doc in pool if _share(terms, _words_to_match(doc)) > 0]
    scored = [(score, doc, span) for doc in pool for score, span in [_best_sentence(claim, doc, question)]]
    best = max([found for found in scored if found[0][0] > 0], key=lambda found: found[0], default=None)
    return (best[1], best[2]) if best else None


def _words_to_match(doc: Document) -> Words:
    """
    The words a chunk's sentences could match a claim with.

    With its sentence offsets stored: the union of its `sentence_words` (tokenized once, cached with the chunk; its
    title line left out, which no sentence score counts). Else those of its whole text, so that a chunk no claim
    matches is never split (pysbd: ~3 ms a chunk).
    """
    if SENTENCE_SPANS_KEY not in (doc.meta or {}):
        return cached_word_sets(doc.content or "")
    sentences = sentence_words(doc)
    found: frozenset[str] = frozenset().union(*(words[0] for _, words in sentences))
    return found, frozenset().union(*(words[1] for _, words in sentences))


@functools.lru_cache(maxsize=1024)
def _terms(claim: str, question: str) -> tuple[tuple[tuple[str, ...], ...], frozenset[str]]:
    """The claim's key entities (folded token tuples) and content-word stems; a yes/no claim's are the question's."""
    if set(tokens(claim)) <= _YES_NO:
        claim = question
    return tuple(toks for _, toks in key_entities(claim)), frozenset(stem(w) for w in question_terms(claim))


def _share(terms: tuple[Sequence[tuple[str, ...]], frozenset[str]], text_words: Words) -> float:
    """How much of the claim's `terms` a text with these `cached_word_sets` holds, in [0, 2]: entity + word share."""
    entities, words = terms
    found, stems = text_words
    entity_share = sum(set(e) <= found for e in entities) / len(entities) if entities else 0.0
    word_share = len(words & stems) / len(words) if words else 0.0
    return entity_share + word_share


def offline_support(claim: str, quote: str, question: str, title: str | None = None) -> bool:
    """Whether `quote` (the cited sentence, `title` its subject) supports `claim` for `question` (the offline check)."""
    entities, words = _terms(claim, question)
    if not entities and not words:
        return False
    quote_tokens = tokens(quote)
    stems = {stem(t) for t in quote_tokens}
    found = set(quote_tokens)
    if not all(set(entity) <= found for entity in entities):  # a name's words, as a phrase or not ("Lev Yashin")
        return False
    if words and len(words & stems) / len(words) < MIN_WORD_SHARE:
        return False
    if not {stem(w) for w in question_terms(question)} & words:  # a bare answer: the quote must be about the question
        return _about_question(question, quote_tokens + tokens(title or ""))
    return True


def _about_question(question: str, context: list[str]) -> bool:
    """Whether the context holds a question word outside its names (the relation), else one of its names."""
    names = [toks for _, toks in key_entities(question)]
    relation = {stem(w) for w in question_terms(question)} - {stem(t) for toks in names for t in toks}
    if relation:
        return bool(relation & {stem(t) for t in context})
    return any(set(name) <= set(context) for name in names)


def claim_sentences(answer: str, language: str = "en") -> list[Sentence]:
    """The answer's sentences (offsets into the marked answer), markers-only sentences left out."""
    return [s for s in split_sentences(answer or "", language) if re.search(r"\w", strip_markers(s.text))]


def settle(
    state: LoopState,
    verdicts: Sequence[float | None],
    threshold: float,
    method: str,
    model: str,
    language: str = "en",
    **extra: Any,
) -> dict[str, Any]:
    """
    Apply a grounder's `verdicts` to the citations and derive the `grounding` dict (`assembly`) from them.

    `verdicts` holds a score in [0, 1] per citation (`None` keeps the offline verdict; supported at `>= threshold`;
    `method` becomes their `check`). In the `grounding` dict, each answer sentence is a span with its citations' best
    score, supported when one of them is.

    :returns: `{"citations": the updated citation dicts (tuple), "grounding": the grounding dict}`.
    """
    citations, scores = [], []
    for citation, score in zip(state.outcome.citations, verdicts, strict=True):
        updated = dict(citation)
        if score is not None:
            updated.update(supported=score >= threshold, check=method)
        citations.append(updated)
        scores.append(float(score) if score is not None else (1.0 if updated["supported"] else 0.0))
    spans = []
    for sentence in claim_sentences(state.outcome.answer or "", language):
        claim = plain(strip_markers(sentence.text))
        mine = [i for i, c in enumerate(citations) if c["claim"] == claim]
        supporting = [citations[i] for i in mine if citations[i]["supported"]]
        spans.append(
            {
                "text": sentence.text,
                "start": sentence.start,
                "end": sentence.end,
                "score": round(max((scores[i] for i in mine), default=0.0), 4),
                "supported": bool(supporting),
                "chunk_ids": list(dict.fromkeys(c["document_id"] for c in supporting)),
                "sources": [
                    {"chunk_id": c["document_id"], "title": c["title"], **(c["search"] or _NO_SEARCH)}
                    for c in supporting
                ],
                "citations": [citations[i]["n"] for i in mine],
            }
        )
    return {"citations": tuple(citations), "grounding": assemble(spans, threshold, method, model, **extra)}
