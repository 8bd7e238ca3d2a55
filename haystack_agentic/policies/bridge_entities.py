# SPDX-License-Identifier: Apache-2.0
"""
A deterministic multi-hop search policy that follows bridge entities.

A deterministic multi-hop search policy: search the question, then the *bridge entities* (titles of other documents
in the store) that the best chunks mention but the question does not, then answer.
"""

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from haystack import Document

from haystack_agentic.dataclasses.loop_state import merge_chunks
from haystack_agentic.policies.entity_scoring import (
    Candidate,
    PageIndex,
    generic_specificity,
    is_generic,
    score_candidate,
)
from haystack_agentic.policies.mention_search import covers_open_words, mentions_search
from haystack_agentic.text import STOPWORDS, WORD_RE, content_words, fold, folded_words, strip_qualifier

#: Longest title alias indexed, in tokens: longer titles are lists and descriptions, not names a chunk repeats.
MAX_ALIAS_TOKENS = 12

#: Distinct chunk texts whose mentions are cached (chunks recur turn after turn; the cache stays bounded).
MENTION_CACHE_SIZE = 4096


def title_aliases(title: str) -> set[tuple[str, ...]]:
    """The folded token tuples of a title with and without its "(qualifier)", stopword-only ones dropped."""
    forms = {tuple(folded_words(form)) for form in (title, strip_qualifier(title)) if form}
    return {toks for toks in forms if toks and not all(t in STOPWORDS for t in toks)}


@dataclass(frozen=True)
class Mention:
    """A title mention found in a text: character span and the titles the mention may refer to."""

    start: int
    end: int
    titles: tuple[str, ...]


class BridgeEntityPolicy:
    """
    Decides what to search next in a multi-hop question, without an LLM (`BridgeEntityRouter` runs it in the loop).

    Search the question (`first_top_k` chunks), then up to `max_follow_ups` times the best next entity
    (`follow_up_top_k` chunks, filtered to its page by `meta.title`). Titles are matched through a token n-gram
    index of the store's `meta["title"]` values (case, accents, punctuation and a trailing "(qualifier)" ignored;
    a mention starts with a capital or a digit). Keep `max_chunks` within the loop's chunk cap: BM25 scores of
    different queries are not comparable, and evicting the lowest score would drop the follow-up chunks.
    """

    def __init__(
        self,
        titles: Iterable[str],
        first_top_k: int = 4,
        follow_up_top_k: int = 1,
        max_follow_ups: int = 2,
        scan_top_chunks: int = 2,
        pages: PageIndex | None = None,
        mentions: bool = True,
        stop_when_covered: bool = True,
        scan_named_first: bool = True,
        generic_share: float | None = 0.05,
    ) -> None:
        """
        Build the title index; the parameters are `BridgeEntityRouter`'s (see there), plus:

        :param titles: The titles of the documents in the store (duplicates are fine).
        :param pages: The store's statistics the candidates are scored with (`from_documents` builds it); without
            it every page looks the same.
        :raises ValueError: If a top-k, `max_follow_ups` or `scan_top_chunks` is out of range.
        """
        if first_top_k < 1 or follow_up_top_k < 1:
            msg = "first_top_k and follow_up_top_k must be at least 1."
            raise ValueError(msg)
        if max_follow_ups < 0 or scan_top_chunks < 1:
            msg = "max_follow_ups must be >= 0 and scan_top_chunks >= 1."
            raise ValueError(msg)
        self.first_top_k = first_top_k
        self.follow_up_top_k = follow_up_top_k
        self.max_follow_ups = max_follow_ups
        self.scan_top_chunks = scan_top_chunks
        self.pages = pages if pages is not None else PageIndex(())
        self.mentions = mentions
        self.stop_when_covered = stop_when_covered
        self.scan_named_first = scan_named_first
        self.generic_share = generic_share
        self._generic_below = (  # the specificity under which a lookahead-0 page is generic
            None if generic_share is None else generic_specificity(generic_share, self.pages.documents)
        )

        self._index: dict[tuple[str, ...], list[str]] = {}
        self._aliases: dict[str, set[tuple[str, ...]]] = {}
        for title in dict.fromkeys(t for t in titles if t):
            aliases = {a for a in title_aliases(title) if len(a) <= MAX_ALIAS_TOKENS}
            self._aliases[title] = aliases
            for alias in aliases:
                self._index.setdefault(alias, []).append(title)
        # Longest alias starting with each token: most tokens start none, so most positions cost one lookup.
        self._max_len_from: dict[str, int] = {}
        for alias in sorted(self._index, key=len):
            self._max_len_from[alias[0]] = len(alias)
        self._mention_cache: dict[str, list[Mention]] = {}

    @classmethod
    def from_documents(cls, documents: Iterable[Document], **kwargs: Any) -> "BridgeEntityPolicy":
        """Build the policy from the documents' `meta["title"]` (untitled ones skipped); `kwargs` go to `__init__`."""
        documents = list(documents)
        if kwargs.get("pages") is None:
            kwargs["pages"] = PageIndex((d.meta.get("title"), d.content or "") for d in documents)
        return cls((d.meta.get("title") for d in documents), **kwargs)

    def knows_title(self, title: str) -> bool:
        """Whether `title` (as stored) is indexed, so it can be followed."""
        return title in self._aliases

    @property
    def max_chunks(self) -> int:
        """The most chunks the policy retrieves: `first_top_k + max_follow_ups * follow_up_top_k`."""
        return self.first_top_k + self.max_follow_ups * self.follow_up_top_k

    def find_mentions(self, text: str) -> list[Mention]:
        """Title mentions in a text, left to right, longest match first, non-overlapping."""
        # NFKD folding can change lengths: match on folded tokens, keep the original spans for the capital check.
        cached = self._mention_cache.get(text)
        if cached is not None:
            return list(cached)
        spans = list(WORD_RE.finditer(text))
        if text.isascii() and "&" not in text:
            folded = [m.group(0).lower() for m in spans]
        else:
            folded = [fold(m.group(0)) for m in spans]
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
        if len(self._mention_cache) >= MENTION_CACHE_SIZE:
            self._mention_cache.clear()
        self._mention_cache[text] = mentions
        return list(mentions)

    def scored_candidates(
        self, question: str, chunks: Sequence[Document], searched: Iterable[str] = ()
    ) -> list[Candidate]:
        """
        Score the bridge titles the top chunks mention, best first.

        The titles the top `scan_top_chunks` chunks mention (not retrieved, searched or named by the question),
        scored by `entity_scoring`, best first; a title mentioned several times keeps its best score.
        """
        q_joined = f" {' '.join(folded_words(question))} "
        q_words = content_words(question)
        searched_norm = {fold(s).strip() for s in searched}
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
                    if fold(self._query_for(title)).strip() in searched_norm:
                        continue
                    if any(f" {' '.join(alias)} " in q_joined for alias in self._aliases.get(title, ())):
                        continue  # the question names it
                    candidate = score_candidate(
                        self.pages,
                        title,
                        words,
                        q_words,
                        said,
                        chunk.meta.get("title") or "",
                        rank,
                        mention.start / max(len(text), 1),
                    )
                    if title not in best or candidate.score > best[title].score:
                        best[title] = candidate
        return sorted(best.values(), key=lambda c: (-c.score, c.chunk_rank, c.position, c.title))

    @staticmethod
    def _query_for(title: str) -> str:
        return strip_qualifier(title) or title

    def next_searches(
        self, question: str, chunks: Sequence[Document], searched: Sequence[str], latest: Sequence[str] = ()
    ) -> list[dict[str, Any]]:
        """
        The searches to run next, best first.

        In order: titles the question names whose pages are not retrieved, the scanned chunks' bridge titles
        (`scored_candidates`) but generic pages, a mentions search when no page is left, then the generic pages.

        :param chunks: The chunks retrieved so far, best first.
        :param searched: The queries already made (the question included), compared case- and accent-insensitively.
        :param latest: Ids of the chunks the last follow-up returned.
        :returns: `[{"query": str, "filters": dict | None, "top_k": int, "why": str}]`, possibly empty. A page search
            carries a `meta.title ==` filter (AND it with any user filters); `why` explains the choice for the trace.
        """
        newest = [c for c in chunks if c.id in set(latest)]
        if self.scan_named_first:  # the chunks of pages the question names first, each group in the given order
            named = {t for m in self.find_mentions(question) for t in m.titles}
            chunks = sorted(chunks, key=lambda c: c.meta.get("title") not in named)
        searches = self._scored_searches(question, chunks, searched)
        if self.stop_when_covered and newest and covers_open_words(question, chunks, newest):
            return [s for s in searches if s["why"].startswith("the question names")]
        return searches

    def _page_search(self, title: str, why: str) -> dict[str, Any]:
        filters = {"field": "meta.title", "operator": "==", "value": title}
        return {"query": self._query_for(title), "filters": filters, "top_k": self.follow_up_top_k, "why": why}

    def _scored_searches(self, question: str, chunks: Sequence[Document], searched: Sequence[str]) -> list[dict]:
        retrieved = {c.meta.get("title") for c in chunks}
        searched_norm = {fold(s).strip() for s in searched}
        out: list[dict[str, Any]] = []
        for mention in self.find_mentions(question):
            for title in mention.titles:
                if title not in retrieved and fold(self._query_for(title)).strip() not in searched_norm:
                    out.append(self._page_search(title, f"the question names {title!r}"))
        pages = self.scored_candidates(question, chunks, searched)
        strong = pages
        if self._generic_below is not None:  # generic pages ("United States") wait behind the mentions search
            strong = [c for c in strong if not is_generic(c, self._generic_below)]
        out += [self._page_search(c.title, "page " + c.explain()) for c in strong]
        if self.mentions and not out:  # only when no page is left to follow (and so only computed then)
            search = mentions_search(self.pages, question, chunks, searched, self.scan_top_chunks, self.follow_up_top_k)
            if search is not None:
                below = self._generic_below
                later = [c.title for c in pages if below is not None and is_generic(c, below)][:3]
                out.append({**search, "why": search["why"] + (f"; before generic pages {later}" if later else "")})
        out += [self._page_search(c.title, "page " + c.explain()) for c in pages if c not in strong]
        return out

    def collect(
        self,
        question: str,
        retrieve: Callable[[str, int, dict | None], list[Document]],
        chunk_cap: int | None = None,
    ) -> tuple[list[Document], list[str]]:
        """
        Run the policy as the loop would: the question, then the first of `next_searches` per follow-up.

        :param retrieve: `retrieve(query, top_k, filters) -> list[Document]`, best first.
        :param chunk_cap: The most chunks kept; `None`: `max_chunks`.
        :returns: `(chunks, queries)`: the final chunks, best first, and the queries made in order.
        """
        cap = self.max_chunks if chunk_cap is None else chunk_cap
        queries = [question]
        chunks = merge_chunks([], retrieve(question, self.first_top_k, None), cap)
        latest: list[str] = []
        for _ in range(self.max_follow_ups):
            proposals = self.next_searches(question, chunks, queries, latest)
            if not proposals:
                break
            search = proposals[0]
            queries.append(search["query"])
            found = retrieve(search["query"], search["top_k"], search["filters"])
            latest = [d.id for d in found]
            chunks = merge_chunks(chunks, found, cap)
        return list(chunks), queries
