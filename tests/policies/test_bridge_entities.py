# SPDX-License-Identifier: Apache-2.0
import pytest
from haystack import Document
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.document_stores.in_memory import InMemoryDocumentStore

from haystack_agentic.policies.bridge_entities import BridgeEntityPolicy, merge_chunks, title_aliases

QUESTION = 'The director of the romantic comedy "Big Stone Gap" is based in what New York city?'

FILM = Document(
    id="film",
    content=(
        "Big Stone Gap is a 2014 American drama romantic comedy film written and directed by Adriana Trigiani "
        "and produced by Donna Gigliotti for Altar Identity Studios. The story is set in the actual Virginia "
        "town of Big Stone Gap circa 1970s."
    ),
    meta={"title": "Big Stone Gap (film)"},
)
TRIGIANI = Document(
    id="trigiani",
    content=(
        "Adriana Trigiani is an Italian American best-selling author of sixteen books, television writer, "
        "film director, and entrepreneur based in Greenwich Village, New York City."
    ),
    meta={"title": "Adriana Trigiani"},
)
TOWN = Document(
    id="town",
    content="Big Stone Gap is a town in Wise County, Virginia, United States.",
    meta={"title": "Big Stone Gap, Virginia"},
)
DONNA = Document(
    id="donna",
    content="Donna Gigliotti is an American film producer.",
    meta={"title": "Donna Gigliotti"},
)
VILLAGE = Document(
    id="village",
    content="Greenwich Village is a neighborhood on the west side of Lower Manhattan, New York City.",
    meta={"title": "Greenwich Village"},
)
CORPUS = [FILM, TRIGIANI, TOWN, DONNA, VILLAGE]


def scored(doc, score):
    return Document(id=doc.id, content=doc.content, meta=doc.meta, score=score)


def queries(policy, question, chunks, searched):
    return [search["query"] for search in policy.next_searches(question, chunks, searched)]


@pytest.fixture
def policy():
    return BridgeEntityPolicy.from_documents(CORPUS)


class TestTitles:
    def test_aliases_drop_parenthetical_disambiguator(self):
        assert title_aliases("Big Stone Gap (film)") == {("big", "stone", "gap", "film"), ("big", "stone", "gap")}

    def test_the_part_before_a_comma_is_not_an_alias(self):
        assert ("paris",) not in title_aliases("Paris, Texas")

    def test_stopword_only_titles_are_not_matched(self):
        assert title_aliases("The (band)") == {("the", "band")}
        assert title_aliases("It") == set()

    def test_find_mentions_longest_match_and_capital_required(self, policy):
        text = "Directed by Adriana Trigiani in Big Stone Gap; adriana trigiani again."
        mentions = policy.find_mentions(text)
        assert [(text[m.start : m.end], m.titles) for m in mentions] == [
            ("Adriana Trigiani", ("Adriana Trigiani",)),
            ("Big Stone Gap", ("Big Stone Gap (film)",)),
        ]


class TestNextSearches:
    def test_big_stone_gap_proposes_the_director_not_the_question_entity(self, policy):
        proposed = queries(policy, QUESTION, [scored(FILM, 9.0), scored(VILLAGE, 3.0)], [QUESTION])
        assert proposed[0] == "Adriana Trigiani"
        assert all("Big Stone Gap" not in q for q in proposed)

    def test_searched_and_retrieved_titles_are_skipped(self, policy):
        proposed = queries(policy, QUESTION, [scored(FILM, 9.0)], [QUESTION, "adriana TRIGIANI"])
        assert "Adriana Trigiani" not in proposed and "Donna Gigliotti" in proposed
        proposed = queries(policy, QUESTION, [scored(FILM, 9.0), scored(TRIGIANI, 1.0)], [QUESTION])
        assert "Adriana Trigiani" not in proposed and "Greenwich Village" in proposed  # the second chunk is scanned

    def test_only_top_chunks_are_scanned(self):
        policy = BridgeEntityPolicy.from_documents(CORPUS, scan_top_chunks=1, mentions=False, scan_named_first=False)
        assert queries(policy, QUESTION, [scored(VILLAGE, 9.0), scored(FILM, 5.0)], [QUESTION]) == []

    def test_next_searches_carry_a_title_filter_and_a_reason(self, policy):
        search = policy.next_searches(QUESTION, [scored(FILM, 9.0)], [QUESTION])[0]
        assert search["query"] == "Adriana Trigiani" and search["top_k"] == 1
        assert search["filters"] == {"field": "meta.title", "operator": "==", "value": "Adriana Trigiani"}
        assert "Adriana Trigiani" in search["why"]

    def test_question_titles_come_first_when_not_retrieved(self, policy):
        question = "Is Greenwich Village older than Big Stone Gap (film)?"
        search = policy.next_searches(question, [scored(FILM, 9.0)], [question])[0]
        assert search["query"] == "Greenwich Village" and search["why"].startswith("the question names")

    def test_invalid_options(self):
        with pytest.raises(ValueError):
            BridgeEntityPolicy([], first_top_k=0)
        with pytest.raises(ValueError):
            BridgeEntityPolicy([], scan_top_chunks=0)


class TestCollect:
    def test_end_to_end_with_bm25(self):
        store = InMemoryDocumentStore()
        store.write_documents(CORPUS)
        retriever = InMemoryBM25Retriever(store)
        calls = []

        def retrieve(query, top_k, filters):
            calls.append((query, top_k, filters))
            return retriever.run(query=query, top_k=top_k, filters=filters)["documents"]

        policy = BridgeEntityPolicy.from_documents(store.filter_documents(), first_top_k=1, max_follow_ups=1)
        chunks, queries = policy.collect(QUESTION, retrieve)
        assert queries == [QUESTION, "Adriana Trigiani"]
        assert queries == [call[0] for call in calls]
        assert [c.id for c in chunks] == ["film", "trigiani"]
        assert policy.max_chunks == 2
        assert calls[1][1:] == (1, {"field": "meta.title", "operator": "==", "value": "Adriana Trigiani"})
        assert calls[1][2] == {"field": "meta.title", "operator": "==", "value": "Adriana Trigiani"}

    def test_no_follow_ups_is_the_baseline(self):
        policy = BridgeEntityPolicy.from_documents(CORPUS, first_top_k=3, max_follow_ups=0)
        chunks, queries = policy.collect(QUESTION, lambda q, k, f: [scored(d, 1.0) for d in CORPUS[:k]])
        assert queries == [QUESTION]
        assert [c.id for c in chunks] == ["film", "trigiani", "town"]


class TestMerge:
    def test_dedup_keeps_highest_score_sorts_and_caps(self):
        merged = merge_chunks(
            [scored(FILM, 2.0), scored(TOWN, 0.0)],
            [scored(FILM, 5.0), scored(TRIGIANI, 1.0), Document(id="none", content="x")],
            chunk_cap=3,
        )
        assert [(d.id, d.score) for d in merged] == [("film", 5.0), ("trigiani", 1.0), ("town", 0.0)]
