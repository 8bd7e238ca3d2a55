# SPDX-License-Identifier: Apache-2.0
"""
A deterministic multi-hop search policy: follow the bridge entities that retrieved chunks mention.

Without an LLM to route, an agentic loop can still do multi-hop retrieval: search the question,
then search the entities that the best retrieved chunks mention but the question does not (the
*bridge entities*, recognised as the titles of other documents in the store), then answer.
"""

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from haystack import Document, logging

from haystack_agentic.dataclasses.loop_state import merge_chunks
from haystack_agentic.policies.mention_search import covers_open_words, mentions_search
from haystack_agentic.policies.entity_scoring import (  # noqa: F401 - normalise is re-exported
    Candidate, PageIndex, ScoringWeights, content_words, generic_specificity, is_generic, normalise, score_candidate,
)

logger = logging.getLogger(__name__)

CandidateOrder = Literal["chunk_rank", "position"]
QueryMode = Literal["title", "title_full", "title_question"]
Ranking = Literal["scored", "mention_order"]
QuestionExclusion = Literal["phrase", "all_words"]
ScoreMode = Literal["bm25", "rank"]

# Aliases made only of these words are never matched (they would fire on every sentence start).
STOPWORDS = frozenset(
    """a an the and or of in on at to for from by with as is was are were be been it its he she
    they them his her their this that these those there here who whom whose which what when where
    why how not no but if then than so also after before during since until while into onto over
    under about between through s""".split()
)

_TOKEN_RE = re.compile(r"\w+", re.UNICODE)
_PAREN_RE = re.compile(r"\s*\([^()]*\)\s*$")
# A run of capitalised words, optionally joined by a few lower-case connectors ("Bank of America").
_CAPITALISED_RE = re.compile(
    r"\b[A-Z][\w'’.-]*(?:\s+(?:(?:of|the|de|von|van|la|le|and|du|del|da)\s+)*[A-Z][\w'’.-]*)*", re.UNICODE
)


def _tokens(text: str) -> list[re.Match]:
    return list(_TOKEN_RE.finditer(text))


def title_aliases(title: str, comma_alias: bool = False) -> set[tuple[str, ...]]:
    """
    The normalised token sequences under which a title can be mentioned.

    `"Big Stone Gap (film)"` gives `("big", "stone", "gap", "film")` and `("big", "stone", "gap")`;
    with `comma_alias=True`, `"Van Hook Township, Mountrail County, North Dakota"` also gives
    `("van", "hook", "township")`. Aliases made only of stopwords are dropped.

    :param title: A document title.
    :param comma_alias: Whether the part before the first comma is an alias too (default False).
    :returns: A set of token tuples (possibly empty).
    """
    forms = {title}
    bare = _PAREN_RE.sub("", title).strip()
    if bare:
        forms.add(bare)
    if comma_alias and "," in bare:
        forms.add(bare.split(",", 1)[0])
    aliases = set()
    for form in forms:
        toks = tuple(m.group(0) for m in _TOKEN_RE.finditer(normalise(form)))
        if toks and not all(t in STOPWORDS for t in toks):
            aliases.add(toks)
    return aliases


@dataclass(frozen=True)
class Mention:
    """A title mention found in a text: character span and the titles the mention may refer to."""

    start: int
    end: int
    titles: tuple[str, ...]


class BridgeEntityPolicy:
    """
    Decides what to search next in a multi-hop question, without an LLM.

    The policy is: search the question (`first_top_k` chunks); then, for up to `max_follow_ups`
    turns, search the best next entity (`follow_up_top_k` chunks each, scoped by default to that
    entity's document with a `meta.title` filter). Candidates, best first: titles the question
    mentions whose documents were not retrieved (`question_titles`), then bridge entities: titles
    of other documents that the top `scan_top_chunks` chunks mention, that the question does not
    mention, whose documents are not retrieved yet and that were not searched before. Titles are
    matched through a token n-gram dictionary built once from the store's `meta["title"]` values
    (case, accents, punctuation and a trailing "(disambiguator)" ignored; the mention must start
    with a capital letter or a digit in the chunk).

    Budget: `first_top_k + max_follow_ups * follow_up_top_k` should not exceed the loop's chunk cap
    (defaults: 4 + 2 x 1 = 6), because BM25 scores of different queries are not comparable (a short
    title query scores lower than a long question), and a loop that evicts the lowest score would
    drop the follow-up chunks. `score_mode="rank"` is the alternative: fill the budget with the
    first search and let rank-scored follow-ups evict its tail.

    Measured on the HotpotQA sample (3,572 paragraphs in one InMemoryDocumentStore, BM25, title
    line in content, 6 chunks): both gold paragraphs found for 85.6% of questions with the
    defaults (1.85 searches per question), against 55.6% for one search of top_k=6.

    Usage example:
    ```python
    from haystack import Document
    from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
    from haystack.document_stores.in_memory import InMemoryDocumentStore
    from haystack_agentic.policies.bridge_entities import BridgeEntityPolicy

    store = InMemoryDocumentStore()
    store.write_documents([
        Document(content="Big Stone Gap is a 2014 American romantic comedy film directed by Adriana Trigiani.",
                 meta={"title": "Big Stone Gap (film)"}),
        Document(content="Adriana Trigiani is an Italian American author based in Greenwich Village, New York City.",
                 meta={"title": "Adriana Trigiani"}),
    ])
    retriever = InMemoryBM25Retriever(store)
    policy = BridgeEntityPolicy.from_document_store(store, first_top_k=1, max_follow_ups=1)
    chunks, queries = policy.collect(
        'The director of the romantic comedy "Big Stone Gap" is based in what New York city?',
        retrieve=lambda query, top_k, filters: retriever.run(query=query, top_k=top_k, filters=filters)["documents"],
    )
    print(queries)  # [the question, 'Adriana Trigiani']
    print([c.meta["title"] for c in chunks])  # ['Big Stone Gap (film)', 'Adriana Trigiani']
    ```
    """

    def __init__(
        self,
        titles: Iterable[str],
        first_top_k: int = 4,
        follow_up_top_k: int = 1,
        max_follow_ups: int = 2,
        scan_top_chunks: int = 2,
        candidate_order: CandidateOrder = "chunk_rank",
        query_mode: QueryMode = "title",
        question_exclusion: QuestionExclusion = "phrase",
        comma_alias: bool = False,
        capitalised_fallback: bool = False,
        question_titles: bool = True,
        score_mode: ScoreMode = "bm25",
        title_filter: bool = True,
        max_alias_tokens: int = 12,
        ranking: Ranking = "mention_order",
        pages: PageIndex | None = None,
        weights: ScoringWeights | None = None,
        min_score: float | None = None,
        mentions: bool = False,
        page_min_lookahead: float | None = None,
        chain: bool = False,
        stop_when_covered: bool = False,
        stop_when_linked: bool = False,
        scan_named_first: bool = False,
        generic_share: float | None = None,
    ) -> None:
        """
        Build the title index.

        :param titles: The titles of the documents in the store (duplicates are fine).
        :param first_top_k: Chunks to retrieve for the question itself (default 4).
        :param follow_up_top_k: Chunks to retrieve per bridge-entity search (default 1).
        :param max_follow_ups: Bridge-entity searches after the first search (default 2), so at
            most `1 + max_follow_ups` searches per question.
        :param scan_top_chunks: How many of the best chunks (in the order given, i.e. by score) are
            scanned for mentions (default 2).
        :param candidate_order: `"chunk_rank"` (default): mentions of the best chunk first, each
            chunk's in text order; `"position"`: earliest mention in any scanned chunk first, ties
            by chunk rank.
        :param query_mode: The follow-up query: `"title"` (default) the title without its
            parenthetical disambiguator, `"title_full"` the title as stored, `"title_question"`
            the bare title followed by the question.
        :param question_exclusion: When a title counts as mentioned by the question: `"phrase"`
            (default) one of its aliases occurs as a contiguous token sequence of the question;
            `"all_words"` every token of one alias occurs somewhere in the question.
        :param comma_alias: Also match the part of a title before its first comma
            ("Paris, Texas" as "Paris"); default False.
        :param capitalised_fallback: When no title is found, propose capitalised phrases of the
            scanned chunks that the question does not contain (default False).
        :param question_titles: Before bridge entities, propose titles that the question itself
            mentions but whose documents are not retrieved yet (helps comparison questions whose
            first search found only one side); default True.
        :param score_mode: How `collect` scores chunks before merging: `"bm25"` (default) keeps the
            retriever's scores; `"rank"` replaces them by reciprocal ranks per search (see
            `rank_scores`), so follow-up chunks survive a score-capped merge.
        :param title_filter: Scope each bridge-entity search to the entity's document with a
            metadata filter `meta.title == <title>` (see `next_searches`); default True. A bare
            title query otherwise often ranks the chunk that mentions the title (already
            retrieved) above the titled document.
        :param max_alias_tokens: Longest alias, in tokens, that is indexed (default 12).
        :param ranking: `"mention_order"` (default here; the rules above) or `"scored"` (the router's default):
            bridge titles ordered by lookahead, specificity and proximity (`entity_scoring`), each search with a
            `why` for the trace.
        :param pages: The store's statistics for `"scored"` (`PageIndex`); `from_documents` builds it.
        :param weights: The score's weights (default `ScoringWeights()`).
        :param min_score: With `"scored"`, drop candidates scoring below this (default None: keep all).
        :param mentions: With `"scored"`, when no page is left to follow, propose a search for the chunks that
            mention the best scanned name with the question's open words, excluding retrieved pages (default False).
        :param page_min_lookahead: With `"scored"`, pages whose lookahead is not above this go after the mentions
            search (default None: every page goes first).
        :param chain: With `"scored"`, scan the last follow-up's chunks first (`latest` of `next_searches`).
        :param stop_when_covered: With `"scored"`, stop following when the last follow-up's chunks say every
            question word the other chunks do not (default False: measured to cost recall).
        :param stop_when_linked: With `"scored"`, stop following when a scanned chunk names another retrieved
            chunk's title, or every title the question names is retrieved (default False: measured to cost recall).
        :param scan_named_first: With `"scored"`, scan the chunks of pages the question names before the others
            (the next hop hangs off the question's own entity, even when its page ranks low); default False.
        :param generic_share: With `"scored"` and `mentions`, pages that share no open question word and whose mention's
            words are (mean IDF) in more than this share of the chunks go after the mentions search (default None: off).
        :raises ValueError: If a top-k, `max_follow_ups` or `scan_top_chunks` is out of range, or
            an option is not one of its documented values.
        """
        if first_top_k < 1 or follow_up_top_k < 1:
            raise ValueError("first_top_k and follow_up_top_k must be at least 1.")
        if max_follow_ups < 0 or scan_top_chunks < 1:
            raise ValueError("max_follow_ups must be >= 0 and scan_top_chunks >= 1.")
        if candidate_order not in ("chunk_rank", "position"):
            raise ValueError(f"candidate_order must be 'chunk_rank' or 'position', got {candidate_order!r}.")
        if query_mode not in ("title", "title_full", "title_question"):
            raise ValueError(f"query_mode must be 'title', 'title_full' or 'title_question', got {query_mode!r}.")
        if score_mode not in ("bm25", "rank"):
            raise ValueError(f"score_mode must be 'bm25' or 'rank', got {score_mode!r}.")
        if question_exclusion not in ("phrase", "all_words"):
            raise ValueError(f"question_exclusion must be 'phrase' or 'all_words', got {question_exclusion!r}.")
        self.first_top_k = first_top_k
        self.follow_up_top_k = follow_up_top_k
        self.max_follow_ups = max_follow_ups
        self.scan_top_chunks = scan_top_chunks
        self.candidate_order = candidate_order
        self.query_mode = query_mode
        self.question_exclusion = question_exclusion
        self.comma_alias = comma_alias
        self.capitalised_fallback = capitalised_fallback
        self.question_titles = question_titles
        self.score_mode = score_mode
        self.title_filter = title_filter
        self.max_alias_tokens = max_alias_tokens
        if ranking not in ("scored", "mention_order"):
            raise ValueError(f"ranking must be 'scored' or 'mention_order', got {ranking!r}.")
        self.ranking = ranking
        self.pages = pages if pages is not None else PageIndex(())
        self.weights = weights or ScoringWeights()
        self.min_score = min_score
        self.mentions = mentions
        self.page_min_lookahead = page_min_lookahead
        self.chain = chain
        self.stop_when_covered = stop_when_covered
        self.stop_when_linked = stop_when_linked
        self.scan_named_first = scan_named_first
        self.generic_share = generic_share
        self._generic_below = (  # the specificity under which a lookahead-0 page is generic (None: rule off)
            None if generic_share is None else generic_specificity(generic_share, self.pages.documents)
        )

        self._index: dict[tuple[str, ...], list[str]] = {}
        self._aliases: dict[str, set[tuple[str, ...]]] = {}
        for title in dict.fromkeys(t for t in titles if t):
            aliases = {a for a in title_aliases(title, comma_alias) if len(a) <= max_alias_tokens}
            self._aliases[title] = aliases
            for alias in aliases:
                self._index.setdefault(alias, []).append(title)
        self._max_len = max((len(a) for a in self._index), default=0)
        # Longest alias starting with each token: most tokens start none, so most positions cost one lookup.
        self._max_len_from: dict[str, int] = {}
        for alias in self._index:
            self._max_len_from[alias[0]] = max(self._max_len_from.get(alias[0], 0), len(alias))
        self._mention_cache: dict[str, list[Mention]] = {}

    @classmethod
    def from_documents(cls, documents: Iterable[Document], **kwargs) -> "BridgeEntityPolicy":
        """
        Build the policy from Documents' `meta["title"]` (Documents without a title are skipped).

        :param documents: The documents of the store.
        :param kwargs: Any `__init__` parameter but `titles`.
        :returns: The policy.
        """
        documents = list(documents)
        if kwargs.get("ranking") == "scored" and kwargs.get("pages") is None:
            kwargs["pages"] = PageIndex((d.meta.get("title"), d.content or "") for d in documents)
        return cls((d.meta.get("title") for d in documents), **kwargs)

    @classmethod
    def from_document_store(cls, document_store, filters: dict | None = None, **kwargs) -> "BridgeEntityPolicy":
        """
        Build the policy from every document of a Haystack document store (`filter_documents`).

        :param document_store: Any Haystack document store.
        :param filters: Optional Haystack filters to select the documents.
        :param kwargs: Any `__init__` parameter but `titles`.
        :returns: The policy.
        """
        return cls.from_documents(document_store.filter_documents(filters=filters), **kwargs)

    def knows_title(self, title: str) -> bool:
        """
        Whether `title` is one of the titles the policy was built from (so it can be followed).

        :param title: A document title, as stored.
        :returns: `True` if it is indexed.
        """
        return title in self._aliases

    @property
    def max_searches(self) -> int:
        """The most searches the policy makes for one question: `1 + max_follow_ups`."""
        return 1 + self.max_follow_ups

    @property
    def max_chunks(self) -> int:
        """The most chunks the policy retrieves: `first_top_k + max_follow_ups * follow_up_top_k`."""
        return self.first_top_k + self.max_follow_ups * self.follow_up_top_k

    def find_mentions(self, text: str) -> list[Mention]:
        """
        Title mentions in a text, left to right, longest match first, non-overlapping.

        :param text: Any text (a chunk's content).
        :returns: The mentions; a mention starts with an upper-case letter or a digit in `text`.
        """
        # normalise() keeps token boundaries for almost all text, but NFKD can change lengths, so
        # match on the folded tokens and keep the original token spans for the capital check.
        cached = self._mention_cache.get(text)
        if cached is not None:
            return list(cached)
        spans = _tokens(text)
        if text.isascii() and "&" not in text:
            folded = [m.group(0).lower() for m in spans]
        else:
            folded = [normalise(m.group(0)) for m in spans]
        mentions: list[Mention] = []
        i, n = 0, len(spans)
        while i < n:
            first = spans[i].group(0)[0]
            longest = self._max_len_from.get(folded[i], 0)
            if not longest or not (first.isupper() or first.isdigit()):
                i += 1
                continue
            for length in range(min(longest, n - i), 0, -1):
                titles = self._index.get(tuple(folded[i : i + length]))
                if titles:
                    mentions.append(Mention(spans[i].start(), spans[i + length - 1].end(), tuple(titles)))
                    i += length
                    break
            else:
                i += 1
        if len(self._mention_cache) >= 4096:  # chunks recur turn after turn; keep the cache bounded
            self._mention_cache.clear()
        self._mention_cache[text] = mentions
        return list(mentions)

    def _in_question(self, title: str, q_tokens: list[str], q_joined: str, q_set: set[str]) -> bool:
        for alias in self._aliases.get(title, ()):
            if self.question_exclusion == "all_words":
                if all(t in q_set for t in alias):
                    return True
            elif f" {' '.join(alias)} " in q_joined:
                return True
        return False

    def bridge_titles(self, question: str, chunks: Sequence[Document], searched: Iterable[str] = ()) -> list[str]:
        """
        The titles to follow next, best first (see `next_queries` for the rules).

        :param question: The user's question.
        :param chunks: The chunks retrieved so far, best first.
        :param searched: The queries already made.
        :returns: Document titles.
        """
        q_tokens = [m.group(0) for m in _TOKEN_RE.finditer(normalise(question))]
        q_joined, q_set = f" {' '.join(q_tokens)} ", set(q_tokens)
        searched_norm = {normalise(s).strip() for s in searched}
        retrieved = {c.meta.get("title") for c in chunks}
        found: list[tuple[int, int, str]] = []  # (position, chunk rank, title)
        for rank, chunk in enumerate(chunks[: self.scan_top_chunks]):
            for mention in self.find_mentions(chunk.content or ""):
                for title in mention.titles:
                    found.append((mention.start, rank, title))
        if self.candidate_order == "position":
            found.sort(key=lambda x: (x[0], x[1]))
        result: list[str] = []
        if self.question_titles:
            for mention in self.find_mentions(question):
                for title in mention.titles:
                    if title not in retrieved and title not in result and (
                        normalise(self._query_for(title, question)).strip() not in searched_norm
                    ):
                        result.append(title)
        if self.ranking == "scored":
            ranked = self.scored_candidates(question, chunks, searched)
            return result + [c.title for c in ranked if c.title not in result]
        for _, _, title in found:
            if title in retrieved or title in result:
                continue
            if normalise(self._query_for(title, question)).strip() in searched_norm:
                continue
            if self._in_question(title, q_tokens, q_joined, q_set):
                continue
            result.append(title)
        return result

    def scored_candidates(
        self, question: str, chunks: Sequence[Document], searched: Iterable[str] = ()
    ) -> list[Candidate]:
        """
        The bridge titles of the scanned chunks, scored (see `entity_scoring`), best first.

        Same eligibility as `bridge_titles` (not retrieved, not searched, not named by the question); a title
        mentioned several times keeps its best score. With `min_score`, weaker candidates are dropped.

        :param question: The user's question.
        :param chunks: The chunks to scan, best first.
        :param searched: The queries already made.
        :returns: The candidates.
        """
        q_tokens = [m.group(0) for m in _TOKEN_RE.finditer(normalise(question))]
        q_joined, q_set = f" {' '.join(q_tokens)} ", set(q_tokens)
        q_words = content_words(question)
        searched_norm = {normalise(s).strip() for s in searched}
        retrieved = {c.meta.get("title") for c in chunks}
        best: dict[str, Candidate] = {}
        for rank, chunk in enumerate(chunks[: self.scan_top_chunks]):
            text = chunk.content or ""
            said = set(content_words(text))
            for mention in self.find_mentions(text):
                words = content_words(text[mention.start : mention.end])
                for title in mention.titles:
                    if title in retrieved or (title in best and best[title].chunk_rank < rank):
                        continue
                    if normalise(self._query_for(title, question)).strip() in searched_norm:
                        continue
                    if self._in_question(title, q_tokens, q_joined, q_set):
                        continue
                    candidate = score_candidate(
                        self.pages, title, words, q_words, said, chunk.meta.get("title") or "", rank,
                        mention.start / max(len(text), 1), self.weights,
                    )
                    if title not in best or candidate.score > best[title].score:
                        best[title] = candidate
        ranked = sorted(best.values(), key=lambda c: (-c.score, c.chunk_rank, c.position, c.title))
        if self.min_score is not None:
            ranked = [c for c in ranked if c.score >= self.min_score]
        return ranked

    def _query_for(self, title: str, question: str) -> str:
        if self.query_mode == "title_full":
            return title
        bare = _PAREN_RE.sub("", title).strip() or title
        if self.query_mode == "title_question":
            return f"{bare} {question}"
        return bare

    def _capitalised_phrases(self, question: str, chunks: Sequence[Document], searched: set[str]) -> list[str]:
        q_norm = normalise(question)
        titles = {normalise(c.meta.get("title") or "") for c in chunks}
        out: list[str] = []
        for chunk in chunks[: self.scan_top_chunks]:
            for m in _CAPITALISED_RE.finditer(chunk.content or ""):
                phrase = m.group(0).strip(" .'’-")
                norm = normalise(phrase)
                toks = _TOKEN_RE.findall(norm)
                if not toks or all(t in STOPWORDS for t in toks) or norm in q_norm or norm in titles:
                    continue
                query = self._query_for(phrase, question)
                if normalise(query).strip() in searched or query in out:
                    continue
                out.append(query)
        return out

    def next_searches(
        self, question: str, chunks: Sequence[Document], searched: Sequence[str], latest: Sequence[str] = ()
    ) -> list[dict[str, Any]]:
        """
        The bridge-entity searches to run next, best first, as retriever arguments.

        Same candidates as `next_queries`; each is `{"query": str, "filters": dict | None,
        "top_k": follow_up_top_k}`. With `title_filter=True`, a title candidate's filters are
        `{"field": "meta.title", "operator": "==", "value": <title>}` (Haystack filter syntax;
        AND it with any user filters); capitalised-phrase fallbacks have no filter.

        :param question: The user's question.
        :param chunks: The chunks retrieved so far, best first (e.g. sorted by score).
        :param searched: The queries already made (the question included).
        :param latest: Ids of the chunks the last follow-up returned: with `chain=True` they are scanned first, so
            a follow-up can continue from the hop just found (3-4 hop questions).
        :returns: The searches, possibly empty; with `ranking="scored"` each also has `why` (for the trace).
        """
        if self.ranking == "scored":
            newest = [c for c in chunks if c.id in set(latest)]
            if self.scan_named_first:
                chunks = named_first(chunks, {t for m in self.find_mentions(question) for t in m.titles})
            if self.chain and newest:
                chunks = newest + [c for c in chunks if c.id not in set(latest)]
            searches = self._scored_searches(question, chunks, searched)
            if self.stop_when_covered and newest and covers_open_words(question, chunks, newest):
                return [s for s in searches if s["why"].startswith("the question names")]
            if self.stop_when_linked and self.evidence_linked(question, chunks):
                return [s for s in searches if s["why"].startswith("the question names")]
            return searches
        searches: list[dict[str, Any]] = []
        seen: set[str] = set()
        for title in self.bridge_titles(question, chunks, searched):
            query = self._query_for(title, question)
            if query in seen and not self.title_filter:
                continue
            seen.add(query)
            filters = {"field": "meta.title", "operator": "==", "value": title} if self.title_filter else None
            searches.append({"query": query, "filters": filters, "top_k": self.follow_up_top_k})
        if not searches and self.capitalised_fallback:
            searches = [
                {"query": q, "filters": None, "top_k": self.follow_up_top_k}
                for q in self._capitalised_phrases(question, chunks, {normalise(s).strip() for s in searched})
            ]
        return searches

    def evidence_linked(self, question: str, chunks: Sequence[Document]) -> bool:
        """
        Whether the chunks already hold a chain: a scanned chunk names another retrieved chunk's title, or the
        question names two or more titles and all of them are retrieved (a comparison with both sides found).

        :param question: The user's question.
        :param chunks: The chunks retrieved so far, in scan order.
        :returns: `True` when a follow-up would most likely be wasted.
        """
        retrieved = {c.meta.get("title") for c in chunks}
        named = {t for m in self.find_mentions(question) for t in m.titles}
        if len(named) >= 2 and named <= retrieved:
            return True
        for chunk in chunks[: self.scan_top_chunks]:
            own = chunk.meta.get("title")
            for mention in self.find_mentions(chunk.content or ""):
                if any(t in retrieved and t != own and t not in named for t in mention.titles):
                    return True
        return False

    def _page_search(self, title: str, question: str, why: str) -> dict[str, Any]:
        filters = {"field": "meta.title", "operator": "==", "value": title} if self.title_filter else None
        return {"query": self._query_for(title, question), "filters": filters, "top_k": self.follow_up_top_k,
                "why": why}

    def _scored_searches(self, question: str, chunks: Sequence[Document], searched: Sequence[str]) -> list[dict]:
        """`ranking="scored"`: question titles, then pages whose lookahead passes, then a mentions search."""
        retrieved = {c.meta.get("title") for c in chunks}
        searched_norm = {normalise(s).strip() for s in searched}
        out: list[dict[str, Any]] = []
        if self.question_titles:
            for mention in self.find_mentions(question):
                for title in mention.titles:
                    query = normalise(self._query_for(title, question)).strip()
                    if title not in retrieved and query not in searched_norm:
                        out.append(self._page_search(title, question, f"the question names {title!r}"))
        pages = self.scored_candidates(question, chunks, searched)
        threshold = self.page_min_lookahead
        strong = pages if threshold is None else [c for c in pages if c.lookahead > threshold]
        if self._generic_below is not None:  # generic pages ("United States") wait behind the mentions search
            strong = [c for c in strong if not is_generic(c, self._generic_below)]
        out += [self._page_search(c.title, question, "page " + c.explain()) for c in strong]
        if self.mentions and not out:  # only when no page is left to follow (and so only computed then)
            search = mentions_search(self.pages, question, chunks, searched, self.scan_top_chunks, self.follow_up_top_k)
            if search is not None:
                below = self._generic_below
                later = [c.title for c in pages if below is not None and is_generic(c, below)][:3]
                out.append({**search, "why": search["why"] + (f"; before generic pages {later}" if later else "")})
        out += [self._page_search(c.title, question, "page " + c.explain()) for c in pages if c not in strong]
        return out

    def next_queries(self, question: str, chunks: Sequence[Document], searched: Sequence[str]) -> list[str]:
        """
        The bridge-entity queries to search next, best first.

        A candidate is the title of a document that one of the top `scan_top_chunks` chunks
        mentions, whose document is not among `chunks`, that the question does not mention, and
        whose query is not in `searched`. Mentions of a chunk's own title are skipped because the
        document is already retrieved. With `question_titles=True`, titles that the question
        mentions but whose documents are not among `chunks` come first. When no title qualifies
        and `capitalised_fallback` is set, capitalised phrases of those chunks are proposed.

        :param question: The user's question.
        :param chunks: The chunks retrieved so far, best first (e.g. sorted by score).
        :param searched: The queries already made (the question included), compared case- and
            accent-insensitively.
        :returns: The queries (formatted according to `query_mode`), possibly empty. The caller
            decides how many to follow (`max_follow_ups`).
        """
        return list(dict.fromkeys(s["query"] for s in self.next_searches(question, chunks, searched)))

    def collect(
        self,
        question: str,
        retrieve: Callable[[str, int, dict | None], list[Document]],
        chunk_cap: int | None = None,
    ) -> tuple[list[Document], list[str]]:
        """
        Run the whole policy with a retrieval function, the way an agentic loop would.

        One search per turn: the question with `first_top_k`, then up to `max_follow_ups` times
        the first search of `next_searches` (on the chunks so far, best first). With
        `score_mode="rank"` each search's scores are replaced by reciprocal ranks (`rank_scores`).
        Chunks are merged like the loop's state: deduplicated by id keeping the highest score,
        sorted by score (a missing score ranks lowest), capped at `chunk_cap` (lowest evicted).

        :param question: The user's question.
        :param retrieve: `retrieve(query, top_k, filters) -> list[Document]`, best first, e.g.
            `lambda q, k, f: retriever.run(query=q, top_k=k, filters=f)["documents"]`.
        :param chunk_cap: The most chunks kept; None (default) means `max_chunks`.
        :returns: `(chunks, queries)`: the final chunks, best first, and the queries made in order.
        """
        cap = self.max_chunks if chunk_cap is None else chunk_cap
        rescore = rank_scores if self.score_mode == "rank" else list
        queries = [question]
        chunks = merge_chunks([], rescore(retrieve(question, self.first_top_k, None)), cap)
        latest: list[str] = []
        for _ in range(self.max_follow_ups):
            proposals = self.next_searches(question, chunks, queries, latest)
            if not proposals:
                break
            search = proposals[0]
            queries.append(search["query"])
            found = rescore(retrieve(search["query"], search["top_k"], search["filters"]))
            latest = [d.id for d in found]
            chunks = merge_chunks(chunks, found, cap)
        return list(chunks), queries


def named_first(chunks: Sequence[Document], named: set[str]) -> list[Document]:
    """The chunks whose title is in `named` first, then the others, each group in the given order."""
    return sorted(chunks, key=lambda c: c.meta.get("title") not in named)


def rank_scores(documents: Sequence[Document]) -> list[Document]:
    """
    Replace retrieval scores by reciprocal ranks: the i-th document (0-based) scores `1 / (i + 1)`.

    Scores of different queries become comparable: every search's best chunk scores 1.0, so a
    score-capped merge keeps each search's best chunks and evicts the tail of the longest list.
    The original score is kept in `meta["retrieval_score"]`; new Documents are returned (the
    inputs are not mutated) with the same ids.

    :param documents: One search's results, best first.
    :returns: Copies of the documents with rank scores.
    """
    return [
        replace(doc, score=1.0 / (i + 1), meta={**doc.meta, "retrieval_score": doc.score})
        for i, doc in enumerate(documents)
    ]
