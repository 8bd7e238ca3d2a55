# SPDX-License-Identifier: Apache-2.0
import pytest
from haystack import Document
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.document_stores.in_memory import InMemoryDocumentStore

from haystack_agentic.policies.bridge_entities import BridgeEntityPolicy, merge_chunks, normalise, rank_scores, title_aliases

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


@pytest.fixture
def policy():
    return BridgeEntityPolicy.from_documents(CORPUS)


class TestTitles:
    def test_aliases_drop_parenthetical_disambiguator(self):
        assert title_aliases("Big Stone Gap (film)") == {("big", "stone", "gap", "film"), ("big", "stone", "gap")}

    def test_comma_alias_is_optional(self):
        assert ("paris",) not in title_aliases("Paris, Texas")
        assert ("paris",) in title_aliases("Paris, Texas", comma_alias=True)

    def test_stopword_only_titles_are_not_matched(self):
        assert title_aliases("The (band)") == {("the", "band")}
        assert title_aliases("It") == set()

    def test_normalise_folds_case_accents_and_entities(self):
        assert normalise("César CUI &amp; Co") == "cesar cui & co"

    def test_find_mentions_longest_match_and_capital_required(self, policy):
        text = "Directed by Adriana Trigiani in Big Stone Gap; adriana trigiani again."
        mentions = policy.find_mentions(text)
        assert [(text[m.start : m.end], m.titles) for m in mentions] == [
            ("Adriana Trigiani", ("Adriana Trigiani",)),
            ("Big Stone Gap", ("Big Stone Gap (film)",)),
        ]

    def test_from_document_store(self):
        store = InMemoryDocumentStore()
        store.write_documents(CORPUS)
        policy = BridgeEntityPolicy.from_document_store(store)
        assert policy.next_queries(QUESTION, [scored(FILM, 5.0)], [QUESTION])[0] == "Adriana Trigiani"


class TestNextQueries:
    def test_big_stone_gap_proposes_the_director_not_the_question_entity(self, policy):
        queries = policy.next_queries(QUESTION, [scored(FILM, 9.0), scored(VILLAGE, 3.0)], [QUESTION])
        assert queries[0] == "Adriana Trigiani"
        assert "Big Stone Gap" not in queries
        assert all("Big Stone Gap" not in q for q in queries)
        assert queries == ["Adriana Trigiani", "Donna Gigliotti"]  # text order within the best chunk

    def test_searched_and_retrieved_titles_are_skipped(self, policy):
        chunks = [scored(FILM, 9.0)]
        assert policy.next_queries(QUESTION, chunks, [QUESTION, "adriana TRIGIANI"]) == ["Donna Gigliotti"]
        chunks = [scored(FILM, 9.0), scored(TRIGIANI, 1.0)]  # the second chunk is scanned too
        assert policy.next_queries(QUESTION, chunks, [QUESTION]) == ["Donna Gigliotti", "Greenwich Village"]

    def test_only_top_chunks_are_scanned(self):
        policy = BridgeEntityPolicy.from_documents(CORPUS, scan_top_chunks=1, question_titles=False)
        assert policy.next_queries(QUESTION, [scored(VILLAGE, 9.0), scored(FILM, 5.0)], [QUESTION]) == []

    def test_next_searches_carry_a_title_filter(self, policy):
        searches = policy.next_searches(QUESTION, [scored(FILM, 9.0)], [QUESTION])
        assert searches[0] == {
            "query": "Adriana Trigiani",
            "filters": {"field": "meta.title", "operator": "==", "value": "Adriana Trigiani"},
            "top_k": 1,
        }
        unfiltered = BridgeEntityPolicy.from_documents(CORPUS, title_filter=False)
        assert unfiltered.next_searches(QUESTION, [scored(FILM, 9.0)], [QUESTION])[0]["filters"] is None

    def test_question_titles_come_first_when_not_retrieved(self, policy):
        question = "Is Greenwich Village older than Big Stone Gap (film)?"
        assert policy.next_queries(question, [scored(FILM, 9.0)], [question])[0] == "Greenwich Village"
        no_q = BridgeEntityPolicy.from_documents(CORPUS, question_titles=False)
        assert "Greenwich Village" not in no_q.next_queries(question, [scored(FILM, 9.0)], [question])

    def test_query_modes(self):
        full = BridgeEntityPolicy.from_documents(CORPUS, query_mode="title_full", question_titles=False)
        question = "Who produced the Virginia town's film?"
        chunks = [scored(Document(content="It is set in Big Stone Gap.", meta={"title": "x"}), 1.0)]
        assert full.next_queries(question, chunks, [question]) == ["Big Stone Gap (film)"]
        with_q = BridgeEntityPolicy.from_documents(CORPUS, query_mode="title_question")
        assert with_q.next_queries(QUESTION, [scored(FILM, 9.0)], [QUESTION])[0] == f"Adriana Trigiani {QUESTION}"

    def test_capitalised_fallback(self):
        policy = BridgeEntityPolicy.from_documents(CORPUS, capitalised_fallback=True)
        chunk = Document(content="The film was shot by Dean Cundey in Wise County.", meta={"title": "x"})
        assert policy.next_queries("Who shot it?", [chunk], ["Who shot it?"]) == ["The", "Dean Cundey", "Wise County"][1:]

    def test_invalid_options(self):
        with pytest.raises(ValueError):
            BridgeEntityPolicy([], first_top_k=0)
        with pytest.raises(ValueError):
            BridgeEntityPolicy([], candidate_order="random")
        with pytest.raises(ValueError):
            BridgeEntityPolicy([], score_mode="z")


class TestCollect:
    def test_end_to_end_with_bm25(self):
        store = InMemoryDocumentStore()
        store.write_documents(CORPUS)
        retriever = InMemoryBM25Retriever(store)
        calls = []

        def retrieve(query, top_k, filters):
            calls.append((query, top_k, filters))
            return retriever.run(query=query, top_k=top_k, filters=filters)["documents"]

        policy = BridgeEntityPolicy.from_document_store(store, first_top_k=1, max_follow_ups=1)
        chunks, queries = policy.collect(QUESTION, retrieve)
        assert queries == [QUESTION, "Adriana Trigiani"]
        assert queries == [call[0] for call in calls]
        assert [c.id for c in chunks] == ["film", "trigiani"]
        assert policy.max_chunks == 2 and policy.max_searches == 2
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

    def test_rank_scores_do_not_mutate(self):
        docs = [scored(FILM, 12.0), scored(TOWN, 7.0)]
        ranked = rank_scores(docs)
        assert [d.score for d in ranked] == [1.0, 0.5]
        assert ranked[0].meta["retrieval_score"] == 12.0
        assert docs[0].score == 12.0 and "retrieval_score" not in docs[0].meta
        assert ranked[0].id == "film"
