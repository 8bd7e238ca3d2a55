# SPDX-License-Identifier: Apache-2.0
"""The scored bridge-entity rules on real paragraphs: tests/data/bridge_cases.jsonl holds five
questions of the shared samples with all their paragraphs (HotpotQA: CC BY-SA 4.0; MuSiQue: CC BY 4.0)."""

from pathlib import Path

import pytest
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.document_stores.in_memory import InMemoryDocumentStore

from benchmarks.harness.gold import gold_document_ids
from haystack_agentic.components.extractors.short_answer_extractor import extract_short_answer
from haystack_agentic.indexing.hotpotqa import hotpotqa_documents, load_hotpotqa_questions
from haystack_agentic.policies.bridge_entities import BridgeEntityPolicy
from haystack_agentic.policies.entity_scoring import PageIndex, generic_specificity
from haystack_agentic.policies.mention_search import entity_names

CASES = {row["id"]: row for row in load_hotpotqa_questions(Path(__file__).parents[1] / "data" / "bridge_cases.jsonl")}
TI_AUTOMOTIVE = "5a75642c5542996c70cfaeed"  # HotpotQA: "... investment firm that acquired TI Automotive ..."
GMINA = "2hop__341176_711757"  # MuSiQue: "What other district is found in the same county as Gmina Stężyca?"
TADAKHA = "5a74ee175542996c70cfae41"  # HotpotQA: "... best known for his role in the film Tadakha ..."
HAGOOD = "4hop1__819901_32392_823060_610794"  # MuSiQue: "... the capitol of the state where Johnson Hagood died?"
EXAMPLES = Path(__file__).parents[2] / "examples" / "data" / "hotpotqa_dev_sample.jsonl"


def _setup(case_id: str, **kwargs):
    row = CASES[case_id]
    docs = hotpotqa_documents([row], title_in_content=True)
    store = InMemoryDocumentStore()
    store.write_documents(docs)
    retriever = InMemoryBM25Retriever(store)

    def retrieve(query, top_k, filters):
        return retriever.run(query=query, top_k=top_k, filters=filters)["documents"]

    return row, docs, retrieve, BridgeEntityPolicy.from_documents(docs, **kwargs)


def test_scored_ranking_follows_the_page_that_answers_not_the_first_mention():
    row, _docs, retrieve, scored = _setup(TI_AUTOMOTIVE)
    first = retrieve(row["question"], 4, None)
    searched = [row["question"]]
    # The first chunk names Walbro before Bain Capital; only Bain Capital's page says "investment firm".
    best = scored.next_searches(row["question"], first, searched)[0]
    assert best["filters"]["value"] == "Bain Capital"
    assert "Bain Capital" in best["why"] and "investment" in best["why"]  # the trace says why


def test_candidates_carry_lookahead_and_specificity():
    row, _docs, retrieve, scored = _setup(TI_AUTOMOTIVE)
    first = retrieve(row["question"], 4, None)
    by_title = {c.title: c for c in scored.scored_candidates(row["question"], first, [row["question"]])}
    assert by_title["Bain Capital"].lookahead > by_title["Walbro"].lookahead
    assert "investment" in by_title["Bain Capital"].shared


def test_specificity_is_low_for_common_words():
    row = CASES[GMINA]
    index = PageIndex((d.meta["title"], d.content) for d in hotpotqa_documents([row], title_in_content=True))
    assert index.specificity(["ryki"]) > index.specificity(["county"])


def test_mentions_search_reaches_a_page_that_is_not_the_entitys_own():
    row, docs, retrieve, scored = _setup(GMINA, mentions=True)
    chunks, queries = scored.collect(row["question"], retrieve)
    assert set(gold_document_ids(row)) <= {c.id for c in chunks}
    assert any(q.startswith("Ryki County") for q in queries[1:])
    # Without the mentions rule, the policy stops at the first hop.
    plain = BridgeEntityPolicy.from_documents(docs, mentions=False)
    chunks, _ = plain.collect(row["question"], retrieve)
    assert not set(gold_document_ids(row)) <= {c.id for c in chunks}


def test_mentions_search_excludes_the_pages_already_retrieved():
    row, _docs, retrieve, scored = _setup(GMINA, mentions=True)
    first = retrieve(row["question"], 4, None)
    search = next(s for s in scored.next_searches(row["question"], first, [row["question"]]) if "mentions" in s["why"])
    assert search["filters"]["operator"] == "not in"
    assert set(search["filters"]["value"]) == {c.meta["title"] for c in first}


def test_entity_names_skip_the_question_and_numbers():
    row = CASES[GMINA]
    docs = hotpotqa_documents([row], title_in_content=True)
    index = PageIndex((d.meta["title"], d.content) for d in docs)
    gmina = [d for d in docs if d.meta["title"] == "Gmina Stężyca, Lublin Voivodeship"]
    names = [e.name for e in entity_names(index, row["question"], gmina, scan=1)]
    assert "Ryki County" in names
    assert not any(n.isdigit() for n in names) and not any("Stężyca" in n for n in names)


@pytest.mark.parametrize(
    ("question", "reply", "chunks", "expected"),
    [
        (
            'The director of the romantic comedy "Big Stone Gap" is based in what New York city?',
            "The director of Big Stone Gap is based in Greenwich Village, New York City.",
            ["Adriana Trigiani is an Italian American author based in Greenwich Village, New York City."],
            "Greenwich Village",
        ),
        ("Were Scott Derrickson and Ed Wood of the same nationality?", "Yes, they were both American.", [], "yes"),
        ("Is the Bain Capital headquarters in Chicago?", "No, it is in Boston.", [], "no"),
        ("Who was born first, Bob Dylan or John Lennon?", "John Lennon was born first.", [], "John Lennon"),
        ("In what year did the film premiere?", "The film premiered in 1962.", [], "1962"),
        ("Where is Bain Capital?", "Bain Capital", [], "Bain Capital"),
    ],
)
def test_short_answer_span(question, reply, chunks, expected):
    assert extract_short_answer(question, reply, chunks).text == expected


def test_named_first_scans_the_page_the_question_names_even_when_it_ranks_low():
    row, docs, _, named_first = _setup(TADAKHA, mentions=True, scan_named_first=True)
    by_title = {d.meta["title"]: d for d in docs}
    others = [d for d in docs if d.meta["title"] not in {"Tadakha", "Naga Chaitanya"}][:3]
    chunks = [*others, by_title["Tadakha"]]  # the first search of the full store: the named page ranks 4th
    plain = BridgeEntityPolicy.from_documents(docs, scan_named_first=False)
    assert "Naga Chaitanya" not in plain.next_searches(row["question"], chunks, [row["question"]])[0]["why"]
    best = named_first.next_searches(row["question"], chunks, [row["question"]])[0]
    assert best["filters"]["value"] == "Naga Chaitanya"
    assert "named in chunk 1 ('Tadakha')" in best["why"]  # the trace says it was scanned first


def test_stop_when_the_last_follow_up_says_every_open_question_word():
    row, docs, _, stopping = _setup(TI_AUTOMOTIVE, mentions=True, stop_when_covered=True)
    ti = [d for d in docs if d.meta["title"] == "TI Automotive"]
    others = [d for d in docs if d.meta["title"] not in {"TI Automotive", "Bain Capital"}][:3]
    going_on = BridgeEntityPolicy.from_documents(docs, stop_when_covered=False)
    assert going_on.next_searches(row["question"], [*others, *ti], [row["question"]], latest=[ti[0].id])
    assert stopping.next_searches(row["question"], [*others, *ti], [row["question"]], latest=[ti[0].id]) == []
    # Without a last follow-up (the first search only), nothing stops.
    assert stopping.next_searches(row["question"], [*others, *ti], [row["question"]])


@pytest.fixture(scope="module")
def pooled_hagood():
    """The Hagood question's 20 MuSiQue paragraphs in a store with the 3,572 shipped HotpotQA paragraphs."""
    row = CASES[HAGOOD]
    docs = hotpotqa_documents(load_hotpotqa_questions(EXAMPLES), title_in_content=True)
    docs += hotpotqa_documents([row], title_in_content=True)
    store = InMemoryDocumentStore()
    store.write_documents(docs)
    retriever = InMemoryBM25Retriever(store)
    first = retriever.run(query=row["question"], top_k=4)["documents"]
    return row, docs, PageIndex((d.meta.get("title"), d.content or "") for d in docs), first


def test_generic_pages_wait_behind_the_mentions_search(pooled_hagood):
    row, docs, pages, first = pooled_hagood
    kwargs = {"pages": pages}
    before = BridgeEntityPolicy.from_documents(docs, **kwargs, generic_share=None).next_searches(
        row["question"], first, [row["question"]]
    )
    # 'John Doby Kennedy' names the United States; its page says none of the question's open words.
    assert before[0]["filters"] == {"field": "meta.title", "operator": "==", "value": "United States"}
    after = BridgeEntityPolicy.from_documents(docs, **kwargs, generic_share=0.05).next_searches(
        row["question"], first, [row["question"]]
    )
    assert after[0]["why"].startswith("mentions of ") and "before generic pages ['United States'" in after[0]["why"]
    assert after[0]["filters"]["operator"] == "not in"
    assert {"field": "meta.title", "operator": "==", "value": "United States"} in [s["filters"] for s in after[1:]]


def test_nothing_is_generic_in_a_small_store():
    assert generic_specificity(0.05, 100_000) == pytest.approx(3.0445, abs=1e-3)  # log(1 + 1 / 0.05)
    assert generic_specificity(0.05, 20) == pytest.approx(0.693, abs=1e-3)  # words in every chunk only
    assert generic_specificity(0.05, 0) == 0.0
    with pytest.raises(ValueError, match="generic_share"):
        generic_specificity(1.5, 100)
    row, docs, retrieve, plain = _setup(HAGOOD, generic_share=None)
    generic = BridgeEntityPolicy.from_documents(docs, generic_share=0.05)
    first = retrieve(row["question"], 4, None)
    assert generic.next_searches(row["question"], first, [row["question"]]) == plain.next_searches(
        row["question"], first, [row["question"]]
    )
