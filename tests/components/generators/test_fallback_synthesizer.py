# SPDX-License-Identifier: Apache-2.0
"""FallbackSynthesizer: the answer at max_iterations; unit and through the loop pipeline."""

import copy

import pytest
from conftest import DOC_TEXT, QUESTION, actions, calls, search
from haystack import Document
from scripted_chat_generator import ScriptedChatGenerator

from haystack_agentic import FallbackSynthesizer, LoopLimits, LoopState
from haystack_agentic.grounding.citations import strip_markers

CHUNKS = (
    Document(id="trigiani", content=DOC_TEXT["trigiani"], meta={"title": "Adriana Trigiani"}, score=2.0),
    Document(id="bsg", content=DOC_TEXT["bsg"], score=1.0),
)


def _state(chunks=CHUNKS, draft=None) -> LoopState:
    return LoopState(question=QUESTION, chunks=chunks, draft=draft, iteration=3, limits=LoopLimits(max_iterations=3))


def _llm(*turns) -> ScriptedChatGenerator:
    return ScriptedChatGenerator(list(turns), per_call=True)


# --- unit ----------------------------------------------------------------------------------------------------


def test_answers_from_the_chunks_with_one_tool_less_call():
    llm = _llm({"text": " Greenwich Village "})
    out = FallbackSynthesizer(chat_generator=llm).run(state=_state(draft="Greenwich?"))
    assert set(out) == {"finished"}
    done = out["finished"]
    assert (done.outcome.terminated_by, strip_markers(done.outcome.answer), done.outcome.error) == (
        "max_iterations",
        "Greenwich Village",
        None,
    )
    assert done.usage["fallback"]["calls"] == 1
    assert len(llm.calls) == 1
    messages, generation_kwargs, tools = llm.calls[0]
    assert tools is None and generation_kwargs is None
    prompt = messages[0].text
    assert "[1] (Adriana Trigiani) " + DOC_TEXT["trigiani"] in prompt
    assert "[2] " + DOC_TEXT["bsg"] in prompt
    assert f"Question: {QUESTION}" in prompt
    assert "Draft answer so far: Greenwich?" in prompt


def test_no_chunks_no_call_no_answer():
    llm = _llm({"text": "made up"})
    done = FallbackSynthesizer(chat_generator=llm).run(state=_state(chunks=(), draft="a draft"))["finished"]
    assert (done.outcome.terminated_by, strip_markers(done.outcome.answer), done.outcome.error) == (
        "max_iterations",
        None,
        None,
    )
    assert llm.calls == [] and done.usage == {}


@pytest.mark.parametrize("kwargs", [{"enabled": False}, {"chat_generator": None}])
def test_disabled_makes_no_call_and_keeps_a_draft(kwargs):
    llm = _llm({"text": "made up"})
    fallback = FallbackSynthesizer(**{"chat_generator": llm, **kwargs})
    done = fallback.run(state=_state(draft="Greenwich"))["finished"]
    assert (done.outcome.terminated_by, strip_markers(done.outcome.answer)) == ("max_iterations", "Greenwich")
    assert fallback.run(state=_state())["finished"].outcome.answer is None
    assert llm.calls == []


def test_failure_gives_no_answer_and_keeps_the_error():
    done = FallbackSynthesizer(chat_generator=_llm({"raise": "timeout"})).run(state=_state())["finished"]
    assert (done.outcome.terminated_by, strip_markers(done.outcome.answer)) == ("max_iterations", None)
    assert done.outcome.error == "Fallback failed: RuntimeError: timeout"
    assert done.usage["fallback"]["calls"] == 1


@pytest.mark.parametrize("turn", [{"text": ""}, {"empty": True}, {"text": "NO ANSWER"}, {"text": "No answer."}])
def test_blank_or_no_answer_reply_gives_no_answer(turn):
    done = FallbackSynthesizer(chat_generator=_llm(turn)).run(state=_state())["finished"]
    assert (done.outcome.terminated_by, strip_markers(done.outcome.answer), done.outcome.error) == (
        "max_iterations",
        None,
        None,
    )


def test_custom_prompt_limits_and_temperature():
    llm = _llm({"text": "x"})
    fallback = FallbackSynthesizer(
        chat_generator=llm,
        synthesis_prompt="SYNTH {{ question }} || {{ chunks }}",
        temperature=0.3,
        generation_kwargs={"max_tokens": 20},
        max_chunks=1,
        chunk_chars=10,
    )
    fallback.run(state=_state())
    assert llm.calls[0][0][0].text == f"SYNTH {QUESTION} || [1] (Adriana Trigiani) {DOC_TEXT['trigiani'][:10]} [...]"
    assert llm.calls[0][1] == {"max_tokens": 20, "temperature": 0.3}


async def test_run_async_matches_run():
    for state, script in [(_state(), {"text": "a"}), (_state(chunks=()), {"text": "a"}), (_state(), {"raise": "x"})]:
        sync = FallbackSynthesizer(chat_generator=_llm(script)).run(state=state)["finished"]
        asynchronous = (await FallbackSynthesizer(chat_generator=_llm(script)).run_async(state=state))["finished"]
        assert sync.to_dict() == asynchronous.to_dict()


def test_bad_limits_are_rejected():
    with pytest.raises(ValueError):
        FallbackSynthesizer(max_chunks=0)
    with pytest.raises(ValueError):
        FallbackSynthesizer(chunk_chars=0)


def test_serialisation_round_trip(allow_deserialization):
    fallback = FallbackSynthesizer(chat_generator=_llm({"text": "a"}), temperature=0.0, enabled=False, max_chunks=4)
    data = fallback.to_dict()
    restored = FallbackSynthesizer.from_dict(copy.deepcopy(data))
    assert restored.to_dict() == data
    assert restored.enabled is False and restored.chat_generator.script == [{"text": "a"}]


# --- through the pipeline ------------------------------------------------------------------------------------


def test_max_iterations_with_chunks_answers_from_them(build_loop):
    loop = build_loop(
        [search("Big Stone Gap film"), search("Adriana Trigiani"), search("never run")],
        max_iterations=2,
        fallback_script=[{"text": "Greenwich Village"}],
    )
    result = loop.run()
    assert result["terminated_by"] == "max_iterations"
    assert strip_markers(result["answer"]) == "Greenwich Village"
    assert result["iterations"] == 2
    assert result["error"] is None
    assert actions(result) == ["search", "search"]
    assert calls(result, "controller") == 2 and calls(result, "fallback") == 1 and calls(result, "answer") == 0
    prompt = loop.fallback_llm.calls[0][0][0].text
    assert DOC_TEXT["trigiani"] in prompt and DOC_TEXT["bsg"] in prompt
    assert QUESTION in prompt


def test_max_iterations_without_chunks_makes_no_call(build_loop):
    loop = build_loop(
        [search("zebra quokka"), search("okapi narwhal")], max_iterations=2, fallback_script=[{"text": "made up"}]
    )
    result = loop.run()
    assert (result["terminated_by"], strip_markers(result["answer"]), result["error"]) == ("max_iterations", None, None)
    assert result["documents"] == []
    assert loop.fallback_llm.calls == [] and calls(result, "fallback") == 0


def test_only_empty_replies_nudge_once_then_hand_over_to_the_fallback(build_loop):
    loop = build_loop([{"empty": True}], max_iterations=5, fallback_script=[{"text": "made up"}])
    result = loop.run()
    # Nudged once; the second empty reply stops the loop. No chunks, so the fallback makes no call.
    assert (result["terminated_by"], strip_markers(result["answer"]), result["iterations"]) == (
        "max_iterations",
        None,
        2,
    )
    assert actions(result) == ["invalid"] * 2
    assert loop.fallback_llm.calls == []


def test_fallback_disabled_makes_no_call(build_loop):
    loop = build_loop(
        [search("Adriana Trigiani"), search("Big Stone Gap")],
        max_iterations=2,
        fallback_script=[{"text": "Greenwich Village"}],
        fallback_enabled=False,
    )
    result = loop.run()
    assert (result["terminated_by"], strip_markers(result["answer"])) == ("max_iterations", None)
    assert result["documents"]
    assert loop.fallback_llm.calls == [] and calls(result, "fallback") == 0


def test_fallback_failure_in_the_pipeline(build_loop):
    loop = build_loop([search("Adriana Trigiani")], max_iterations=1, fallback_script=[{"raise": "fallback down"}])
    result = loop.run()
    assert (result["terminated_by"], strip_markers(result["answer"])) == ("max_iterations", None)
    assert result["error"] == "Fallback failed: RuntimeError: fallback down"
    assert calls(result, "fallback") == 1
