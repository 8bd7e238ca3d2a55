# SPDX-License-Identifier: Apache-2.0
"""Citations in every answer path (tools, json, answerer, fallback, embedded short answers), their checks, the
grounders' agreement with them, and `AgenticRAG`'s `GeneratedAnswer`s feeding Haystack's evaluators."""

import json

from conftest import DOC_TEXT, DOCS, QUESTION, decide, search, tool_turn
from haystack import Document
from haystack.components.evaluators import AnswerExactMatchEvaluator, DocumentRecallEvaluator
from haystack.dataclasses import GeneratedAnswer
from scripted_chat_generator import ScriptedChatGenerator

from haystack_agentic import AgenticRAG, Answerer, LLMJudgeGrounder, LoopState, ToolStep
from haystack_agentic.components.extractors.short_answer_extractor import ShortAnswerExtractor, extract_short_answer
from haystack_agentic.grounding.citations import DROPPED_KEY, UNCITED_KEY, cite, offline_support, strip_markers
from haystack_agentic.presentation import unsupported_note

#: The contract's keys (notes/citations_shape.md), in this order.
KEYS = ["n", "document_id", "title", "quote", "start", "end", "claim", "search", "supported", "check"]


def answer_with(text, sources):
    return tool_turn("answer", {"text": text, "sources": sources})


def check_shape(result):
    """Every citation follows the contract: its quote is its chunk's content[start:end], one number per chunk."""
    by_id = {d["id"]: d for d in result["documents"]}
    numbers = {c["document_id"]: c["n"] for c in result["citations"]}
    assert len(set(numbers.values())) == len(numbers) and all(
        c["n"] == numbers[c["document_id"]] >= 1 for c in result["citations"]
    )
    for citation in result["citations"]:
        assert list(citation) == KEYS
        assert by_id[citation["document_id"]]["content"][citation["start"] : citation["end"]] == citation["quote"]
        assert f"[{citation['n']}]" in result["answer"]
    json.dumps(result, allow_nan=False)  # strict JSON


def test_tools_mode_cites_the_answer_tools_sources_and_drops_unknown_ids(build_loop):
    loop = build_loop(
        [
            search("Big Stone Gap director"),
            search("Adriana Trigiani based"),
            answer_with("Greenwich Village", ["trigiani", "no-such-chunk"]),
        ]
    )
    result = loop.run()
    check_shape(result)
    assert result["answer"] == "Greenwich Village [1]"
    [citation] = result["citations"]
    assert citation["document_id"] == "trigiani" and citation["title"] == "Adriana Trigiani"
    assert citation["quote"] == "Trigiani is based in Greenwich Village, New York City."
    assert citation["claim"] == "Greenwich Village"
    assert citation["search"] == {"iteration": 1, "query": "Big Stone Gap director"}  # the first search found it
    assert (citation["supported"], citation["check"]) == (True, "offline")
    assert [d["cited"] for d in result["metadata"][DROPPED_KEY]] == ["no-such-chunk"]


def test_tools_mode_markers_are_dropped_and_recorded_and_the_claim_is_still_cited(build_loop):
    loop = build_loop([search("Adriana Trigiani based"), tool_turn("answer", {"text": "Greenwich Village [4]"})])
    result = loop.run()
    check_shape(result)
    assert result["answer"] == "Greenwich Village [1]" and result["citations"][0]["document_id"] == "trigiani"
    assert result["metadata"][DROPPED_KEY] == [
        {"cited": "[4]", "reason": "no numbered chunks were shown here; cite ids"}
    ]


def test_sources_that_are_not_ids_are_dropped_not_fatal(build_loop):
    loop = build_loop([search("Adriana Trigiani based"), answer_with("Greenwich Village", [7, {"id": "x"}, ""])])
    result = loop.run()
    check_shape(result)
    assert result["terminated_by"] == "answered" and result["citations"][0]["document_id"] == "trigiani"
    assert [d["cited"] for d in result["metadata"][DROPPED_KEY]] == ["7", "{'id': 'x'}"]
    one = build_loop([search("Adriana Trigiani based"), answer_with("Greenwich Village", 42)]).run()
    assert one["metadata"][DROPPED_KEY][0]["cited"] == "42" and one["citations"]


def test_json_mode_answer_is_asked_in_words_and_cited_from_the_chunks_not_the_models_numbers(build_loop):
    loop = build_loop(
        [decide("search", query="Adriana Trigiani"), decide("generate")],
        mode="json",
        answer_script=[{"text": "Trigiani is based in Greenwich Village [3][7]."}],
    )
    result = loop.run()
    check_shape(result)
    prompt = loop.answer_llm.calls[0][0][-1].text
    assert "[1] Adriana Trigiani\n" in prompt and "short phrase" in prompt and "e.g. [1]" not in prompt
    # The model's numbers ([3] was never shown, [7] does not exist) are not kept: the loop cites the chunk saying it.
    assert result["answer"] == "Trigiani is based in Greenwich Village. [1]"
    [citation] = result["citations"]
    assert (citation["n"], citation["document_id"], citation["supported"]) == (1, "trigiani", True)


def test_a_marker_whose_citation_is_dropped_does_not_stay_in_the_answer():
    state = LoopState(question=QUESTION, chunks=tuple(DOCS))
    out = cite(state, "Trigiani is based in Greenwich Village [1, 7][9].", shown=DOCS[1:2])
    assert out.outcome.answer == "Trigiani is based in Greenwich Village [1]."
    assert [d["cited"] for d in out.metadata[DROPPED_KEY]] == ["[7]", "[9]"]


def test_the_answerers_rewrite_is_cited_sentence_by_sentence_from_the_chunks(build_loop):
    loop = build_loop(
        [search("Big Stone Gap film"), search("Adriana Trigiani based"), answer_with("x", [])],
        answer_script=[{"text": "Adriana Trigiani directed Big Stone Gap [2]. She is based in Greenwich Village [1]."}],
    )
    result = loop.run()
    check_shape(result)
    assert (
        strip_markers(result["answer"]) == "Adriana Trigiani directed Big Stone Gap. She is based in Greenwich Village."
    )
    cited = {c["claim"]: c["document_id"] for c in result["citations"]}
    assert cited == {
        "Adriana Trigiani directed Big Stone Gap.": "bsg",
        "She is based in Greenwich Village.": "trigiani",
    }


def test_a_sentence_without_a_marker_is_cited_by_the_loop_after_the_text():
    state = LoopState(question=QUESTION, chunks=tuple(DOCS))
    out = cite(
        state, "Adriana Trigiani directed Big Stone Gap [1]. She is based in Greenwich Village.", shown=(DOCS[0],)
    )
    assert out.outcome.answer == "Adriana Trigiani directed Big Stone Gap [1]. She is based in Greenwich Village. [2]"
    assert [(c["n"], c["document_id"]) for c in out.outcome.citations] == [(1, "bsg"), (2, "trigiani")]
    # An earlier sentence the LLM left unmarked: the text is kept as written, the loop's marker goes at its end.
    out = cite(
        state, "She is based in Greenwich Village. Adriana Trigiani directed Big Stone Gap [1].", shown=(DOCS[0],)
    )
    assert out.outcome.answer == "She is based in Greenwich Village. Adriana Trigiani directed Big Stone Gap [1]. [2]"
    assert [(c["n"], c["claim"]) for c in out.outcome.citations] == [
        (2, "She is based in Greenwich Village."),
        (1, "Adriana Trigiani directed Big Stone Gap."),
    ]
    # Nothing marked: numbered 1, 2, ... in claim order, one number per chunk, all after the text.
    out = cite(state, "She is based in Greenwich Village.\nTrigiani directed Big Stone Gap.\n", shown=DOCS)
    assert out.outcome.answer == "She is based in Greenwich Village.\nTrigiani directed Big Stone Gap.\n[1][2]"


def test_a_sentence_no_chunk_backs_is_named_in_the_result_and_in_the_note():
    state = LoopState(question=QUESTION, chunks=tuple(DOCS))
    out = cite(state, "She is based in Greenwich Village, New York City. She likes kiwis.", shown=DOCS)
    result = out.to_result()
    assert [c["claim"] for c in result["citations"]] == ["She is based in Greenwich Village, New York City."]
    assert result["metadata"][UNCITED_KEY] == ["She likes kiwis."]
    assert unsupported_note(result).endswith(
        'No chunk backs "She likes kiwis.": unsupported, check it before relying on it.'
    )
    # Every sentence backed: no such key, no note.
    out = cite(out, "She is based in Greenwich Village, New York City.", shown=DOCS)
    assert UNCITED_KEY not in out.metadata and unsupported_note(out.to_result()) is None


def test_the_fallback_cites_its_markers(build_loop):
    loop = build_loop(
        [search("Adriana Trigiani based")] * 2, max_iterations=1, fallback_script=[{"text": "Greenwich Village [1]"}]
    )
    result = loop.run()
    assert result["terminated_by"] == "max_iterations"
    check_shape(result)
    assert result["citations"][0]["document_id"] == result["documents"][0]["id"]


def test_a_give_up_has_no_citations(build_loop):
    result = build_loop([tool_turn("give_up", {"reason": "nothing"})]).run()
    assert result["terminated_by"] == "gave_up" and result["citations"] == []


def test_the_short_answer_reports_where_it_was_taken_from():
    chunks = [DOC_TEXT["bsg"], DOC_TEXT["trigiani"]]
    short = extract_short_answer(QUESTION, "The director is based in Greenwich Village, New York City.", chunks)
    assert short.text == "Greenwich Village, New York City"
    index, start, end = short.location
    assert index == 1 and chunks[1][start:end] == short.text
    read = extract_short_answer("Where is Adriana Trigiani based?", "The answer is:", chunks)  # read off a chunk
    assert read.location is not None and chunks[read.location[0]][read.location[1] : read.location[2]] == read.text
    assert extract_short_answer("Is Paris in France?", "Yes it is.", chunks).location is None


def test_a_short_answer_found_in_several_chunks_is_cited_from_the_sentence_that_answers_the_question():
    by_id = {d.id: d for d in DOCS}
    shown = (by_id["greenwich"], by_id["trigiani"])
    state = LoopState(question=QUESTION, chunks=shown)
    at = DOC_TEXT["greenwich"].index("Greenwich Village")
    # Read from the neighbourhood's page, which names it; the director's page says she is based there.
    [citation] = cite(
        state, "Greenwich Village", shown=shown, located=(0, at, at + len("Greenwich Village"))
    ).outcome.citations
    assert citation["document_id"] == "trigiani"
    assert citation["quote"] == "Trigiani is based in Greenwich Village, New York City."
    assert citation["supported"] is True
    # No other sentence says more of the question: the sentence it was read from stands.
    only = (by_id["greenwich"],)
    [kept] = cite(
        LoopState(question=QUESTION, chunks=only),
        "Greenwich Village",
        shown=only,
        located=(0, at, at + len("Greenwich Village")),
    ).outcome.citations
    assert kept["document_id"] == "greenwich"


def test_the_embedded_answerer_cites_the_sentence_its_short_answer_came_from():
    docs = tuple(d for d in DOCS if d.id in ("bsg", "trigiani"))
    state = LoopState(
        question=QUESTION,
        chunks=docs,
        pending_action="answer",
        tool_history=(ToolStep(1, "search", query="q", returned_chunk_ids=("bsg", "trigiani")),),
    )
    llm = ScriptedChatGenerator([{"text": "The director is based in Greenwich Village."}], per_call=True)
    answered = Answerer(chat_generator=llm, stream_answer=False).run(state=state)["finished"]
    done = ShortAnswerExtractor().run(state=answered)["state"]
    assert done.outcome.answer == "Greenwich Village [1]"
    [citation] = done.outcome.citations
    assert citation["document_id"] == "trigiani"
    assert citation["quote"] == "Trigiani is based in Greenwich Village, New York City."
    assert DOC_TEXT["trigiani"][citation["start"] : citation["end"]] == citation["quote"]


def test_the_offline_check_flags_a_claim_its_sentence_does_not_support():
    question = "Who directed Big Stone Gap?"
    assert offline_support("Adriana Trigiani", DOC_TEXT["bsg"], question)
    # the name is there, but the sentence is not about the question
    assert not offline_support("Adriana Trigiani", "Adriana Trigiani is an Italian American author.", question)
    assert not offline_support("Ashley Judd", DOC_TEXT["bsg"], question)  # the name is not in it
    assert not offline_support("It was filmed in Virginia in 2013", DOC_TEXT["bsg"], question)  # half the words
    # a wrong answer read from a chunk: cited, and flagged
    state = LoopState(question=question, chunks=tuple(DOCS))
    out = cite(state, "Wise County")
    assert out.outcome.citations[0]["document_id"] == "bsg-town" and out.outcome.citations[0]["supported"] is False


def test_the_judge_grounder_and_the_citations_are_one_record(build_loop):
    verdicts = {
        "claims": [{"sentence": 1, "supported": True, "chunks": [0]}, {"sentence": 2, "supported": True, "chunks": [0]}]
    }
    grounder = LLMJudgeGrounder(chat_generator=ScriptedChatGenerator([{"text": json.dumps(verdicts)}], per_call=True))
    loop = build_loop(
        [
            search("Big Stone Gap film"),
            search("Adriana Trigiani based"),
            answer_with("Adriana Trigiani directed it. She is based in Greenwich Village.", ["bsg", "trigiani"]),
        ]
    )
    pipeline = loop.pipeline
    pipeline.remove_component("result")  # put the judge in front of the result
    from haystack_agentic import LoopResultBuilder

    pipeline.add_component("grounder", grounder)
    pipeline.add_component("result", LoopResultBuilder())
    pipeline.connect("finish.value", "grounder.state")
    pipeline.connect("grounder.state", "result.state")
    result = pipeline.run({"controller": {"query": QUESTION}})["result"]
    check_shape(result)
    assert [(c["document_id"], c["check"]) for c in result["citations"]] == [
        ("bsg", "llm_judge"),
        ("trigiani", "llm_judge"),
    ]
    # the judge shows the cited chunks first: index 0 is bsg, so only the first citation holds
    assert [c["supported"] for c in result["citations"]] == [True, False]
    grounding = result["grounding"]
    assert [s["citations"] for s in grounding["faithful_spans"]] == [[1]]
    assert [s["citations"] for s in grounding["hallucinated_spans"]] == [[2]]
    assert grounding["faithful_spans"][0]["chunk_ids"] == ["bsg"]
    for span in grounding["faithful_spans"] + grounding["hallucinated_spans"]:
        assert result["answer"][span["start"] : span["end"]] == span["text"]


def test_agentic_rag_answers_feed_haystacks_evaluators(build_loop):
    loop = build_loop(
        [
            search("Big Stone Gap director"),
            search("Adriana Trigiani based"),
            answer_with("Greenwich Village", ["trigiani"]),
        ]
    )
    out = AgenticRAG(pipeline=loop.pipeline).run(query=QUESTION)
    [generated] = out["answers"]
    assert isinstance(generated, GeneratedAnswer)
    assert (generated.data, generated.query) == ("Greenwich Village", QUESTION)
    assert [d.id for d in generated.documents] == ["trigiani"]
    assert generated.meta["answer"] == out["answer"] == "Greenwich Village [1]"
    assert generated.meta["terminated_by"] == "answered" and generated.meta["citations"] == out["result"]["citations"]
    exact = AnswerExactMatchEvaluator().run(
        ground_truth_answers=["Greenwich Village"], predicted_answers=[generated.data]
    )
    gold = [Document(id="trigiani", content=DOC_TEXT["trigiani"])]
    recall = DocumentRecallEvaluator().run(ground_truth_documents=[gold], retrieved_documents=[generated.documents])
    assert exact["score"] == 1.0 and recall["score"] == 1.0
    assert "answers" not in out["result"]  # the JSON result stays JSON
    json.dumps(out["result"], allow_nan=False)
    assert strip_markers(out["messages"][-1].text) == out["messages"][-1].text  # no markers carried on


def test_agentic_rag_without_an_answer_has_no_generated_answer(build_loop):
    out = AgenticRAG(pipeline=build_loop([tool_turn("give_up", {"reason": "nothing"})]).pipeline).run(query=QUESTION)
    assert [a.data for a in out["answers"]] == ["I could not find an answer: nothing"]
    assert out["answers"][0].documents == [] and out["result"]["citations"] == []


def test_citations_read_the_sentence_spans_stored_with_a_chunk():
    from haystack_agentic.components.preprocessors.sentence_span_annotator import SentenceSpanAnnotator
    from haystack_agentic.grounding.sentence_splitter import SENTENCE_SPANS_KEY

    text = "Big Stone Gap\nBig Stone Gap is a 2014 film. It was directed by Adriana Trigiani. It is set in Virginia."
    plain_doc = Document(id="bsg", content=text, meta={"title": "Big Stone Gap"})
    (annotated,) = SentenceSpanAnnotator().run(documents=[plain_doc])["documents"]
    answer = "Big Stone Gap was directed by Adriana Trigiani."

    def quotes(doc):
        state = LoopState(question="Who directed Big Stone Gap?", chunks=(doc,))
        return [c["quote"] for c in cite(state, answer, shown=(doc,)).outcome.citations]

    assert quotes(annotated) == quotes(plain_doc) == ["It was directed by Adriana Trigiani."]
    # The stored spans are what is cited: two sentences stored as one are quoted as one.
    start, end = text.index("It was"), len(text)
    joined = Document(id="bsg", content=text, meta={"title": "Big Stone Gap", SENTENCE_SPANS_KEY: [14, 43, start, end]})
    assert quotes(joined) == [text[start:end]]


def test_stored_spans_that_do_not_fit_the_chunk_are_ignored_with_a_warning(caplog):
    from haystack_agentic.grounding.sentence_splitter import SENTENCE_SPANS_KEY

    text = "Big Stone Gap\nBig Stone Gap is a 2014 film. It was directed by Adriana Trigiani."
    answer = "Big Stone Gap was directed by Adriana Trigiani."
    for bad in ([0, 500], [0, "13"], "0-13", {"a": 1}, [[0, 13]], [3, 13]):
        doc = Document(id="bsg", content=text, meta={"title": "Big Stone Gap", SENTENCE_SPANS_KEY: bad})
        state = LoopState(question="Who directed Big Stone Gap?", chunks=(doc,))
        citations = cite(state, answer, shown=(doc,)).outcome.citations
        assert [c["quote"] for c in citations] == ["It was directed by Adriana Trigiani."], bad
    # Reported once per chunk text and spans (all malformed ones count as the same), not at every claim.
    assert caplog.text.count("'sentence_spans' do not fit its text") == 3
