# SPDX-License-Identifier: Apache-2.0
"""`[n]` markers are chunk numbers: a number in brackets that cannot number a chunk of the run (a year, "[1990,
1991]") is answer text in every path that takes markers out (the answer roles, citations, streaming, the result)."""

import pytest
from conftest import DOC_TEXT, QUESTION, answer, search
from haystack import Document
from haystack.dataclasses import StreamingChunk
from scripted_chat_generator import ScriptedChatGenerator

from haystack_agentic import Answerer, FallbackSynthesizer, LoopState
from haystack_agentic.grounding.citations import DROPPED_KEY, cite
from haystack_agentic.grounding.markers import MAX_MARKER, strip_markers
from haystack_agentic.llm.streaming import ANSWER_META
from haystack_agentic.pipelines.loop_pipeline import loop_inputs

CHUNKS = (
    Document(id="trigiani", content=DOC_TEXT["trigiani"], meta={"title": "Adriana Trigiani"}, score=2.0),
    Document(id="bsg", content=DOC_TEXT["bsg"], meta={"title": "Big Stone Gap (film)"}, score=1.0),
)


@pytest.mark.parametrize(
    ("text", "count", "expected"),
    [
        ("Greenwich Village [1]", None, "Greenwich Village"),
        ("Greenwich Village [1, 2][3].", None, "Greenwich Village."),
        ("It opened in [2004]", None, "It opened in [2004]"),
        ("[1990, 1991]", None, "[1990, 1991]"),
        ("In [1990, 1991] [2]", None, "In [1990, 1991]"),
        ("Chapter [0]", None, "Chapter [0]"),
        (f"Page [{MAX_MARKER + 1}]", None, f"Page [{MAX_MARKER + 1}]"),
        ("Greenwich Village [2]", 2, "Greenwich Village"),
        ("Greenwich Village [7]", 6, "Greenwich Village [7]"),  # no chunk 7 was shown: not a marker here
        ("Greenwich Village [1, 7]", 6, "Greenwich Village [1, 7]"),
    ],
)
def test_only_numbers_that_can_be_chunk_numbers_are_markers(text, count, expected):
    assert strip_markers(text, count) == expected


def test_cite_keeps_a_year_in_brackets_as_answer_text():
    state = LoopState(question=QUESTION, chunks=CHUNKS).finish("answered", answer="x")
    cited = cite(state, "The film came out in [2014] [2].", shown=CHUNKS)
    assert "[2014]" in cited.outcome.answer and not (cited.metadata or {}).get(DROPPED_KEY)


@pytest.mark.parametrize("component", ["answerer", "fallback"])
def test_the_answer_roles_keep_a_year_in_brackets(component):
    reply = "Released in [1990, 1991] [1]"
    llm = ScriptedChatGenerator([{"text": reply}], per_call=True)
    if component == "answerer":
        state = LoopState(question=QUESTION, chunks=CHUNKS, pending_action="answer", iteration=1)
        done = Answerer(chat_generator=llm).run(state=state)["finished"]
    else:
        state = LoopState(question=QUESTION, chunks=CHUNKS)
        done = FallbackSynthesizer(chat_generator=llm).run(state=state)["finished"]
    assert strip_markers(done.outcome.answer).startswith("Released in [1990, 1991]")


def test_a_year_in_brackets_streams_and_reaches_the_result(build_loop):
    written = "Big Stone Gap came out in [2014]."
    loop = build_loop([search("Adriana Trigiani"), answer("2014")], answer_script=[{"text": written}])
    chunks: list[StreamingChunk] = []
    out = loop.pipeline.run(loop_inputs(loop.pipeline, query=QUESTION, streaming_callback=chunks.append))["result"]
    assert out["answer"].startswith("Big Stone Gap came out in [2014]")
    assert "".join(c.content for c in chunks if c.meta.get(ANSWER_META)) == out["answer"]
    assert out["messages"][-1].text.startswith("Big Stone Gap came out in [2014]")
