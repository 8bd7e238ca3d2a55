# SPDX-License-Identifier: Apache-2.0
"""Token streaming through the loop: the answer, reflect and fallback calls stream; controller prose streams; step
events travel on the same callback without any text, so the answer's chunks concatenate to the answer."""

import itertools

import pytest
from conftest import QUESTION, answer, decide, search
from haystack.components.generators.utils import print_streaming_chunk
from haystack.dataclasses import ChatMessage, StreamingChunk
from hypothesis import given, settings
from hypothesis import strategies as st
from scripted_chat_generator import ScriptedChatGenerator

from haystack_agentic import AgenticRouter, Answerer, FallbackSynthesizer
from haystack_agentic.grounding.citations import strip_markers
from haystack_agentic.grounding.markers import append_markers
from haystack_agentic.llm.streaming import ANSWER_META, EVENT_META, ROLE_META, STEP_META, AnswerTextHold
from haystack_agentic.pipelines.loop_pipeline import loop_inputs

LONG_ANSWER = "Adriana Trigiani is based in Greenwich Village, New York City."


def answer_text(chunks: list[StreamingChunk]) -> str:
    """The text of the chunks that belong to the final answer."""
    return "".join(c.content for c in chunks if c.meta.get(ANSWER_META)).strip()


def events(chunks: list[StreamingChunk]) -> list[tuple[str, dict]]:
    return [(c.meta[EVENT_META], c.meta[STEP_META]) for c in chunks if EVENT_META in c.meta]


def test_scripted_generator_streams_its_text_in_pieces_and_its_tool_calls_as_deltas():
    chunks: list[StreamingChunk] = []
    llm = ScriptedChatGenerator([{"text": LONG_ANSWER}, search("Adriana Trigiani")], per_call=True)
    reply = llm.run(messages=[ChatMessage.from_user("q")], streaming_callback=chunks.append)["replies"][0]
    texts = [c.content for c in chunks if c.content]
    assert len(texts) > 5 and "".join(texts) == reply.text == LONG_ANSWER
    assert chunks[-1].finish_reason == "stop"
    chunks.clear()
    reply = llm.run(messages=[ChatMessage.from_user("q")], streaming_callback=chunks.append)["replies"][0]
    deltas = [d for c in chunks for d in (c.tool_calls or [])]
    assert [(d.tool_name, d.id) for d in deltas] == [("search", reply.tool_calls[0].id)]
    assert '"Adriana Trigiani"' in deltas[0].arguments
    assert chunks[-1].finish_reason == "tool_calls"


async def test_scripted_generator_streams_to_an_async_callback():
    chunks: list[StreamingChunk] = []

    async def collect(chunk: StreamingChunk) -> None:
        chunks.append(chunk)

    llm = ScriptedChatGenerator([{"text": LONG_ANSWER}])
    await llm.run_async(messages=[ChatMessage.from_user("q")], streaming_callback=collect)
    assert "".join(c.content for c in chunks) == LONG_ANSWER and len(chunks) > 5


def test_answer_tokens_stream_and_steps_are_events_without_text(build_loop):
    loop = build_loop([search("Adriana Trigiani"), answer("Greenwich Village")], answer_script=[{"text": LONG_ANSWER}])
    chunks: list[StreamingChunk] = []
    result = loop.pipeline.run(loop_inputs(loop.pipeline, query=QUESTION, streaming_callback=chunks.append))
    result = result["result"]
    assert strip_markers(result["answer"]) == LONG_ANSWER
    assert answer_text(chunks) == result["answer"]  # the answer's tokens, then the marker the loop added
    assert len([c for c in chunks if c.meta.get(ANSWER_META) and c.content]) > 5  # token by token, not one piece
    found = events(chunks)
    assert [kind for kind, _ in found] == ["search", "documents", "answer"]
    assert found[0][1]["query"] == "Adriana Trigiani"
    assert found[1][1]["returned_chunk_ids"][0] == "trigiani"
    assert all(c.content == "" for c in chunks if EVENT_META in c.meta)
    # The controller's tool calls stream as deltas from the controller role, never as answer text.
    assert {c.meta[ROLE_META] for c in chunks if c.tool_calls} == {"controller"}


async def test_async_run_streams_to_an_async_callback(build_loop):
    loop = build_loop([search("Adriana Trigiani"), answer("Greenwich Village")], answer_script=[{"text": LONG_ANSWER}])
    chunks: list[StreamingChunk] = []

    async def collect(chunk: StreamingChunk) -> None:
        chunks.append(chunk)

    out = await loop.pipeline.run_async(loop_inputs(loop.pipeline, query=QUESTION, streaming_callback=collect))
    assert answer_text(chunks) == out["result"]["answer"] and strip_markers(answer_text(chunks)) == LONG_ANSWER
    assert [kind for kind, _ in events(chunks)] == ["search", "documents", "answer"]


#: An answer LLM that numbers chunks itself: its markers (and the space before them) are not in the final answer.
MARKED_ANSWER = "Adriana Trigiani is based in Greenwich Village [2], New York City [1, 2].\n"


@pytest.mark.parametrize("written", [LONG_ANSWER, MARKED_ANSWER, "[2] Greenwich Village", "[1][2]"])
def test_the_streamed_answer_is_the_final_answer_with_or_without_the_model_s_own_markers(build_loop, written):
    # The final answer is the model's words (its own markers left out) and the loop's citations; "[1][2]" has no
    # words: the controller's draft is kept, and streamed whole.
    loop = build_loop([search("Adriana Trigiani"), answer("Greenwich Village")], answer_script=[{"text": written}])
    chunks: list[StreamingChunk] = []
    result = loop.pipeline.run(loop_inputs(loop.pipeline, query=QUESTION, streaming_callback=chunks.append))
    result = result["result"]
    streamed = "".join(c.content for c in chunks if c.meta.get(ANSWER_META))
    assert streamed == result["answer"] and result["terminated_by"] == "answered"
    words = strip_markers(written) or "Greenwich Village"
    assert result["answer"].startswith(words) and result["answer"] != words  # the loop cited it
    assert all("[" not in c.content for c in chunks[:-1] if c.meta.get(ANSWER_META))  # no marker before the end


def _pieces(text: str, cuts: list[int]) -> list[str]:
    bounds = sorted({0, len(text), *(cut % (len(text) + 1) for cut in cuts)})
    return [text[a:b] for a, b in itertools.pairwise(bounds)]


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="ab ,.\t\n[]12", max_size=40), st.lists(st.integers(0, 40), max_size=12))
def test_an_answer_streamed_in_any_pieces_is_the_final_answer_s_prefix_and_rest_completes_it(text, cuts):
    hold = AnswerTextHold()
    streamed = ""
    for piece in _pieces(text, cuts):
        streamed += "".join(c.content for c in hold.accept([StreamingChunk(content=piece)]))
    words = strip_markers(text)
    assert words.startswith(hold.sent) and (hold.sent == "" or not hold.sent[-1].isspace())
    assert hold.sent.startswith(streamed)  # what is not streamed yet is held (the reply could still be calls)
    final = append_markers(words, [7]) if words else "the kept draft"
    rest = hold.rest(final, "answer")
    assert streamed + "".join(c.content for c in rest) == final == hold.sent
    assert all(c.meta[ANSWER_META] and c.meta[ROLE_META] == "answer" for c in rest)


def test_a_marker_split_across_chunks_is_held_until_it_closes_and_a_bracket_that_is_no_marker_is_passed_on():
    hold = AnswerTextHold()
    # (a second line that opens no call: the reply can no longer be tool calls written as text, so it streams)
    sent = [c.content for c in hold.accept([StreamingChunk(content=p) for p in ["Paris\nis", " [", "1", ",", " 2"]])]
    assert sent == ["Paris\nis"]
    assert [c.content for c in hold.accept([StreamingChunk(content="].")])] == ["."]
    assert [c.content for c in hold.accept([StreamingChunk(content=" [see"), StreamingChunk(content=" note]")])] == [
        " [see",
        " note]",
    ]
    assert hold.sent == "Paris\nis. [see note]"
    # A final answer that does not continue what streamed (a reply replaced after streaming): nothing more is sent.
    assert hold.rest("Another answer", "answer") == []


def test_a_hostile_stream_of_brackets_digits_and_spaces_is_held_in_linear_time():
    hold = AnswerTextHold()
    pieces = ["x", " " * 50_000, "[1", *(" , 1" for _ in range(20_000)), "]"]
    for piece in pieces:
        hold.accept([StreamingChunk(content=piece)])
    assert hold.sent == "x"  # all of it was one marker
    assert hold.rest("x [1]", "answer")[0].content == " [1]"


def test_controller_prose_streams_as_controller_text(build_loop):
    loop = build_loop([search("Adriana Trigiani"), {"text": "She is based in Greenwich Village."}])
    chunks: list[StreamingChunk] = []
    result = loop.pipeline.run(loop_inputs(loop.pipeline, query=QUESTION, streaming_callback=chunks.append))
    assert strip_markers(result["result"]["answer"]) == "She is based in Greenwich Village."
    prose = "".join(c.content for c in chunks if c.meta.get(ROLE_META) == "controller")
    assert prose == "She is based in Greenwich Village."


def test_fallback_streams_its_answer_and_holds_back_no_answer(build_loop):
    loop = build_loop(
        [search("Adriana Trigiani"), search("Big Stone Gap")],
        max_iterations=2,
        fallback_script=[{"text": LONG_ANSWER}, {"text": "NO ANSWER"}],
    )
    chunks: list[StreamingChunk] = []
    result = loop.pipeline.run(loop_inputs(loop.pipeline, query=QUESTION, streaming_callback=chunks.append))
    result = result["result"]
    assert (result["terminated_by"], strip_markers(result["answer"])) == ("max_iterations", LONG_ANSWER)
    assert answer_text(chunks) == result["answer"]
    assert {c.meta[ROLE_META] for c in chunks if c.meta.get(ANSWER_META)} == {"fallback"}
    chunks.clear()
    loop.llm.reset()
    result = loop.pipeline.run(loop_inputs(loop.pipeline, query=QUESTION, streaming_callback=chunks.append))
    assert strip_markers(result["result"]["answer"]) is None
    assert answer_text(chunks) == ""  # "NO ANSWER" is the fallback's sentinel, not an answer: never streamed


def test_json_mode_reflect_streams_as_reflect_and_the_generated_answer_as_answer(build_loop):
    script = [decide("search", query="Adriana Trigiani"), decide("generate"), decide("reflect"), decide("generate")]
    loop = build_loop(
        script,
        mode="json",
        answer_script=[
            {"text": "Greenwich Village"},
            {"text": "Supported.\nImproved answer: Greenwich Village, New York City"},
            {"text": "Greenwich Village, New York City"},
        ],
    )
    loop.llm.script[1] = decide("reflect")  # first draft, then reflect, then generate
    chunks: list[StreamingChunk] = []
    result = loop.pipeline.run(loop_inputs(loop.pipeline, query=QUESTION, streaming_callback=chunks.append))
    result = result["result"]
    roles = {c.meta.get(ROLE_META) for c in chunks if c.content}
    assert {"draft", "reflect", "answer"} <= roles
    # the citation marker the loop added after the streamed answer streams too: streamed text == answer
    assert answer_text(chunks) == result["answer"] == "Greenwich Village, New York City [1]"
    assert "Improved answer" in "".join(c.content for c in chunks if c.meta.get(ROLE_META) == "reflect")


def test_a_sync_run_refuses_an_async_callback_with_a_clear_error(build_loop):
    async def collect(chunk: StreamingChunk) -> None:
        pass

    answerer = Answerer(chat_generator=ScriptedChatGenerator([{"text": "x"}]))
    from haystack_agentic import LoopState

    state = LoopState(question="q", draft="d", pending_action="answer")
    with pytest.raises(ValueError, match=r"coroutine|async"):
        answerer.run(state=state, streaming_callback=collect)


def test_streaming_callback_init_parameter_round_trips_and_is_used(allow_deserialization):
    llm = ScriptedChatGenerator([{"text": LONG_ANSWER}], per_call=True)
    for cls, kwargs in ((AgenticRouter, {}), (Answerer, {}), (FallbackSynthesizer, {})):
        component = cls(chat_generator=llm, streaming_callback=print_streaming_chunk, **kwargs)
        restored = cls.from_dict(component.to_dict())
        assert restored.streaming_callback is print_streaming_chunk
    chunks: list[StreamingChunk] = []
    fallback = FallbackSynthesizer(chat_generator=llm, streaming_callback=chunks.append)
    from haystack import Document

    from haystack_agentic import LoopState

    state = LoopState(question="q", chunks=(Document(id="a", content="text", score=1.0),))
    assert fallback.run(state=state)["finished"].outcome.answer == LONG_ANSWER
    assert answer_text(chunks) == LONG_ANSWER


def test_a_streamed_openai_call_asks_for_its_usage(monkeypatch):
    from haystack.components.generators.chat import OpenAIChatGenerator
    from haystack.utils import Secret

    from haystack_agentic import LoopState
    from haystack_agentic.llm.calls import call_generator

    sent = []

    def run(**kwargs):
        sent.append(kwargs)
        return {"replies": [ChatMessage.from_assistant("x")]}

    llm = OpenAIChatGenerator(api_key=Secret.from_token("not-used"), max_retries=0)
    monkeypatch.setattr(llm, "run", run)
    call_generator(llm, LoopState(question="q"), "answer", [ChatMessage.from_user("q")], streaming_callback=print)
    assert sent[0]["generation_kwargs"]["stream_options"] == {"include_usage": True}
    call_generator(llm, LoopState(question="q"), "answer", [ChatMessage.from_user("q")])
    assert "generation_kwargs" not in sent[1]  # not streamed: nothing added


async def test_the_offline_policy_router_streams_its_steps_too(store):
    from haystack.components.retrievers.in_memory import InMemoryBM25Retriever

    from haystack_agentic import BridgeEntityRouter, LoopController, build_loop_pipeline

    pipeline = build_loop_pipeline(
        BridgeEntityRouter(document_store=store),
        InMemoryBM25Retriever(store),
        controller=LoopController(max_iterations=4),
        answerer=Answerer(chat_generator=ScriptedChatGenerator([{"text": "Greenwich Village"}], per_call=True)),
        check_evidence=False,
    )
    chunks: list[StreamingChunk] = []
    result = await pipeline.run_async(loop_inputs(pipeline, query=QUESTION, streaming_callback=chunks.append))
    history = result["result"]["tool_history"]
    shown = [step for kind, step in events(chunks) if kind != "documents"]
    assert [s["action"] for s in shown] == [s["action"] for s in history] and history[0]["action"] == "search"
    assert answer_text(chunks) == result["result"]["answer"] == "Greenwich Village [1]"


class _SyncOnlyStreamer:
    """A chat generator with only a sync `run` that streams two pieces, failing on request after the first one."""

    def __init__(self, fail_after_first: bool = False) -> None:
        self.calls = 0
        self.fail_after_first = fail_after_first

    def run(self, messages, generation_kwargs=None, tools=None, streaming_callback=None):
        self.calls += 1
        if streaming_callback is not None:
            streaming_callback(StreamingChunk(content="Green"))
        if self.fail_after_first:
            msg = "the server went away"
            raise TimeoutError(msg)
        if streaming_callback is not None:
            streaming_callback(StreamingChunk(content="wich"))
        return {"replies": [ChatMessage.from_assistant("Greenwich")]}


async def test_an_async_callback_reaches_a_generator_that_only_runs_sync():
    from haystack_agentic import LoopState

    chunks: list[StreamingChunk] = []

    async def collect(chunk: StreamingChunk) -> None:
        chunks.append(chunk)

    answerer = Answerer(chat_generator=_SyncOnlyStreamer())
    state = LoopState(question="q", pending_action="answer", draft="d")
    out = await answerer.run_async(state=state, streaming_callback=collect)
    assert strip_markers(out["finished"].outcome.answer) == "Greenwich" == answer_text(chunks)


def test_a_call_that_streamed_before_failing_is_not_retried():
    from haystack_agentic import LoopState
    from haystack_agentic.llm.calls import call_generator

    streamer = _SyncOnlyStreamer(fail_after_first=True)
    call = call_generator(
        streamer,
        LoopState(question="q"),
        "answer",
        [ChatMessage.from_user("q")],
        max_retries=2,
        backoff=0,
        streaming_callback=lambda chunk: None,
    )
    assert isinstance(call.error, TimeoutError) and streamer.calls == 1
    unstreamed = _SyncOnlyStreamer(fail_after_first=True)
    call_generator(
        unstreamed, LoopState(question="q"), "answer", [ChatMessage.from_user("q")], max_retries=2, backoff=0
    )
    assert unstreamed.calls == 3  # without a stream, a transient failure is retried as before


TOOL_CALL_REPLIES = [
    '{"name": "answer", "arguments": {"text": "Greenwich Village"}}',
    'Here is my answer.\n```json\n{"name": "search", "arguments": {"query": "Big Stone Gap director"}}\n```',
    '<tool_call>\n{"name": "give_up", "arguments": {"reason": "none"}}\n</tool_call>',
]


@pytest.mark.parametrize("reply", TOOL_CALL_REPLIES)
def test_an_answer_reply_of_tool_call_text_is_not_streamed_as_the_answer(build_loop, reply):
    # The answer LLM wrote calls, not words: the draft is kept, and only the draft streams as the answer.
    loop = build_loop([search("Adriana Trigiani"), answer("Greenwich Village")], answer_script=[{"text": reply}])
    chunks: list[StreamingChunk] = []
    result = loop.pipeline.run(loop_inputs(loop.pipeline, query=QUESTION, streaming_callback=chunks.append))
    result = result["result"]
    assert strip_markers(result["answer"]) == "Greenwich Village" and result["terminated_by"] == "answered"
    streamed = [c.content for c in chunks if c.meta.get(ANSWER_META)]
    assert "".join(streamed) == result["answer"]
    assert not [text for text in streamed if "{" in text or "<" in text or "`" in text]


@pytest.mark.parametrize("reply", TOOL_CALL_REPLIES)
async def test_a_fallback_reply_of_tool_call_text_streams_nothing(build_loop, reply):
    loop = build_loop(
        [search("Adriana Trigiani"), search("Big Stone Gap")], max_iterations=2, fallback_script=[{"text": reply}]
    )
    chunks: list[StreamingChunk] = []

    async def collect(chunk: StreamingChunk) -> None:
        chunks.append(chunk)

    out = await loop.pipeline.run_async(loop_inputs(loop.pipeline, query=QUESTION, streaming_callback=collect))
    assert (out["result"]["terminated_by"], out["result"]["answer"]) == ("max_iterations", None)
    assert not [c.content for c in chunks if c.meta.get(ANSWER_META) and c.content]
    assert [c for c in chunks if c.meta.get(ROLE_META) == "fallback"] == []


def test_a_short_answer_is_held_until_it_cannot_be_tool_calls_then_streams_whole(build_loop):
    loop = build_loop([search("Adriana Trigiani"), answer("Greenwich")], answer_script=[{"text": "Greenwich Village"}])
    chunks: list[StreamingChunk] = []
    result = loop.pipeline.run(loop_inputs(loop.pipeline, query=QUESTION, streaming_callback=chunks.append))
    assert answer_text(chunks) == result["result"]["answer"]
    assert strip_markers(result["result"]["answer"]) == "Greenwich Village"
