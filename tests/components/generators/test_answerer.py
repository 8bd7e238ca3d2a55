# SPDX-License-Identifier: Apache-2.0
"""Answerer: draft rewrite, answer from chunks, reflect (critique + improve), first drafts; unit and pipeline."""

import copy

import pytest
from conftest import DOC_TEXT, QUESTION, actions, answer, calls, give_up, search
from haystack import Document
from scripted_chat_generator import ScriptedChatGenerator

from haystack_agentic import Answerer, LoopState, ToolStep
from haystack_agentic.components.generators.answerer import (
    DEFAULT_ANSWER_PROMPT,
    DEFAULT_ANSWER_SYSTEM_PROMPT,
    prompt_chunks,
)
from haystack_agentic.grounding.citations import strip_markers
from haystack_agentic.llm.loop_tools import USER_TOOLS_KEY
from haystack_agentic.llm.refused_turns import FORCED_AT_CAP

CHUNKS = (
    Document(id="trigiani", content=DOC_TEXT["trigiani"], meta={"title": "Adriana Trigiani"}, score=2.0),
    Document(id="bsg", content=DOC_TEXT["bsg"], meta={"title": "Big Stone Gap (film)"}, score=1.0),
)


def _state(action: str | None = "answer", draft: str | None = "Greenwich", chunks=CHUNKS, iteration: int = 2):
    return LoopState(question=QUESTION, chunks=chunks, draft=draft, pending_action=action, iteration=iteration)


def _llm(*turns) -> ScriptedChatGenerator:
    return ScriptedChatGenerator(list(turns), per_call=True)


def _prompt(llm: ScriptedChatGenerator, index: int = 0) -> str:
    return llm.calls[index][0][-1].text


# --- answer with a draft (tools mode) ------------------------------------------------------------------------


def test_without_an_answer_llm_the_draft_is_the_answer():
    out = Answerer().run(state=_state())
    assert set(out) == {"finished"}
    done = out["finished"]
    assert (done.outcome.terminated_by, strip_markers(done.outcome.answer), done.outcome.error) == (
        "answered",
        "Greenwich",
        None,
    )
    assert done.usage == {}


def test_answer_llm_rewrites_the_draft():
    llm = _llm({"text": "  Greenwich Village, New York City  "})
    done = Answerer(chat_generator=llm).run(state=_state())["finished"]
    assert (done.outcome.terminated_by, strip_markers(done.outcome.answer)) == (
        "answered",
        "Greenwich Village, New York City",
    )
    assert done.usage["answer"]["calls"] == 1
    prompt = _prompt(llm)
    assert "Draft answer: Greenwich" in prompt
    assert f"Question: {QUESTION}" in prompt
    assert "[1] Adriana Trigiani\n" + DOC_TEXT["trigiani"] in prompt
    assert "[2] Big Stone Gap (film)\n" + DOC_TEXT["bsg"] in prompt
    assert llm.calls[0][2] is None  # no tools for the answer role


@pytest.mark.parametrize("turn", [{"raise": "answer model down"}, {"text": "   "}, {"empty": True}])
def test_answer_llm_error_or_blank_reply_keeps_the_draft(turn):
    llm = _llm(turn)
    done = Answerer(chat_generator=llm).run(state=_state())["finished"]
    assert (done.outcome.terminated_by, strip_markers(done.outcome.answer), done.outcome.error) == (
        "answered",
        "Greenwich",
        None,
    )
    assert done.usage["answer"]["calls"] == 1
    assert len(llm.calls) == 1


def test_answer_llm_error_keeps_the_draft_in_the_pipeline(build_loop):
    loop = build_loop([search("Adriana Trigiani"), answer("Greenwich Village")], answer_script=[{"raise": "boom"}])
    result = loop.run()
    assert (result["terminated_by"], strip_markers(result["answer"]), result["error"]) == (
        "answered",
        "Greenwich Village",
        None,
    )
    assert calls(result, "answer") == 1 and calls(result, "controller") == 2


def test_answer_llm_blank_keeps_the_draft_in_the_pipeline(build_loop):
    loop = build_loop([answer("Greenwich Village")], answer_script=[{"text": " "}])
    result = loop.run()
    assert (result["terminated_by"], strip_markers(result["answer"])) == ("answered", "Greenwich Village")
    assert calls(result, "answer") == 1


def test_answer_llm_rewrite_in_the_pipeline(build_loop):
    loop = build_loop(
        [search("Adriana Trigiani"), {"text": "greenwich"}], answer_script=[{"text": "Greenwich Village, NYC"}]
    )
    result = loop.run()
    assert (result["terminated_by"], strip_markers(result["answer"])) == ("answered", "Greenwich Village, NYC")
    assert actions(result) == ["search", "answer"]
    assert "Draft answer: greenwich" in _prompt(loop.answer_llm)
    assert DOC_TEXT["trigiani"] in _prompt(loop.answer_llm)


def test_give_up_never_reaches_the_answer_llm(build_loop):
    loop = build_loop([give_up("nothing relevant")], answer_script=[{"text": "REWRITTEN"}])
    result = loop.run()
    assert (result["terminated_by"], strip_markers(result["answer"])) == (
        "gave_up",
        "I could not find an answer: nothing relevant",
    )
    assert loop.answer_llm.calls == [] and calls(result, "answer") == 0


# --- answer from the chunks (json generate) ------------------------------------------------------------------


def test_generate_writes_the_answer_from_the_chunks():
    llm = _llm({"text": "Greenwich Village"})
    done = Answerer(chat_generator=llm).run(state=_state(draft=None))["finished"]
    assert (done.outcome.terminated_by, strip_markers(done.outcome.answer)) == ("answered", "Greenwich Village")
    prompt = _prompt(llm)
    assert "Draft answer" not in prompt and DOC_TEXT["trigiani"] in prompt and QUESTION in prompt


def test_generate_failure_ends_with_an_error():
    done = Answerer(chat_generator=_llm({"raise": "quota"})).run(state=_state(draft=None))["finished"]
    assert (done.outcome.terminated_by, strip_markers(done.outcome.answer), done.outcome.error) == (
        "error",
        None,
        "Answer LLM failed: RuntimeError: quota",
    )


def test_generate_blank_ends_with_an_error():
    done = Answerer(chat_generator=_llm({"text": ""})).run(state=_state(draft=None))["finished"]
    assert (done.outcome.terminated_by, strip_markers(done.outcome.answer), done.outcome.error) == (
        "error",
        None,
        "Answer LLM returned no answer in words (blank, or only citation markers or tool-call text).",
    )


@pytest.mark.parametrize(
    "reply", ["[5]", "[5][6]", " \u200b ", '<tool_call>{"name": "answer", "arguments": {}}</tool_call>']
)
def test_generate_without_words_of_its_own_is_no_answer(reply):
    done = Answerer(chat_generator=_llm({"text": reply})).run(state=_state(draft=None))["finished"]
    assert done.outcome.terminated_by == "error" and done.outcome.answer is None
    assert "no answer in words" in done.outcome.error


def test_an_answer_written_as_json_that_names_no_tool_of_the_run_is_an_answer():
    reply = '{"name": "Greenwich Village", "country": "United States"}'
    done = Answerer(chat_generator=_llm({"text": reply})).run(state=_state(draft=None))["finished"]
    assert (done.outcome.terminated_by, strip_markers(done.outcome.answer)) == ("answered", reply)


def test_a_call_of_a_user_tool_the_run_offers_is_no_answer():
    reply = '{"name": "film_year", "arguments": {"title": "Big Stone Gap"}}'
    state = _state(draft=None).evolve(metadata={USER_TOOLS_KEY: ["film_year"]})
    done = Answerer(chat_generator=_llm({"text": reply})).run(state=state)["finished"]
    assert done.outcome.terminated_by == "error" and "no answer in words" in done.outcome.error


def test_an_answer_forced_at_the_turn_limit_says_so():
    state = _state(draft=None).evolve(metadata={FORCED_AT_CAP: True})
    done = Answerer(chat_generator=_llm({"text": "Greenwich Village"})).run(state=state)["finished"]
    assert done.outcome.terminated_by == "max_iterations" and strip_markers(done.outcome.answer) == "Greenwich Village"


def test_generate_without_an_answer_llm_is_an_error():
    done = Answerer().run(state=_state(draft=None))["finished"]
    assert done.outcome.terminated_by == "error"
    assert "no chat_generator" in done.outcome.error


def test_pending_action_none_means_answer():
    done = Answerer(chat_generator=_llm({"text": "x"})).run(state=_state(action=None, draft=None))["finished"]
    assert (done.outcome.terminated_by, strip_markers(done.outcome.answer)) == ("answered", "x")


@pytest.mark.parametrize(
    ("system_prompt", "action", "expected"),
    [
        (None, "answer", [DEFAULT_ANSWER_SYSTEM_PROMPT]),  # the short-answer instruction by default
        (None, None, [DEFAULT_ANSWER_SYSTEM_PROMPT]),  # also when the answer is written from the chunks
        ("", "answer", []),  # "" sends no system message
        ("Answer in French.", "answer", ["Answer in French."]),
        (None, "reflect", []),  # a critique is no short answer: no default system message
    ],
)
def test_the_answer_roles_system_message(system_prompt, action, expected):
    llm = _llm({"text": "Greenwich Village\nImproved answer: Greenwich Village"})
    draft = "Greenwich" if action else None
    Answerer(chat_generator=llm, system_prompt=system_prompt).run(state=_state(action=action, draft=draft))
    assert [m.text for m in llm.calls[0][0] if m.is_from("system")] == expected


def test_chunks_reach_the_prompt_as_blocks_or_lines():
    llm = _llm({"text": "a"})
    template = "{{ chunk_blocks }}|{{ chunks }}"
    Answerer(chat_generator=llm, generate_prompt=template).run(state=_state(action=None, draft=None))
    blocks, lines = _prompt(llm).split("|")
    assert blocks.split("\n\n") == [
        f"[1] Adriana Trigiani\n{DOC_TEXT['trigiani']}",
        f"[2] Big Stone Gap (film)\n{DOC_TEXT['bsg']}",
    ]
    assert lines.splitlines() == [
        f"[1] (Adriana Trigiani) {DOC_TEXT['trigiani']}",
        f"[2] (Big Stone Gap (film)) {DOC_TEXT['bsg']}",
    ]


# --- reflect and first drafts (json mode) --------------------------------------------------------------------


def test_reflect_replaces_the_draft_with_the_improved_answer():
    reply = "The draft lacks the city.\nImproved answer: Greenwich Village, New York City"
    llm = _llm({"text": reply})
    out = Answerer(chat_generator=llm).run(state=_state(action="reflect"))
    assert set(out) == {"state"}
    state = out["state"]
    assert state.draft == "Greenwich Village, New York City"
    assert state.pending_action is None and state.outcome.terminated_by is None
    assert state.tool_history[-1] == ToolStep(iteration=3, action="reflect", result=reply)
    prompt = _prompt(llm)
    assert "Draft answer: Greenwich" in prompt and "Improved answer:" in prompt and DOC_TEXT["trigiani"] in prompt


@pytest.mark.parametrize(
    "turn, result",
    [
        ({"text": "Looks fine to me."}, "Looks fine to me."),
        ({"text": "Improved answer:   "}, "Improved answer:"),
        ({"raise": "down"}, "RuntimeError: down"),
    ],
)
def test_reflect_without_an_improved_answer_keeps_the_draft(turn, result):
    state = Answerer(chat_generator=_llm(turn)).run(state=_state(action="reflect"))["state"]
    assert state.draft == "Greenwich"
    assert state.tool_history[-1].action == "reflect"
    assert state.tool_history[-1].result == result
    assert state.usage["answer"]["calls"] == 1


def test_reflect_without_an_answer_llm_keeps_the_draft_and_goes_on():
    state = Answerer().run(state=_state(action="reflect"))["state"]
    assert (state.draft, state.pending_action, state.usage) == ("Greenwich", None, {})


def test_draft_writes_a_first_draft_and_goes_on():
    state = Answerer(chat_generator=_llm({"text": "Greenwich"})).run(state=_state(action="draft", draft=None))["state"]
    assert (state.draft, state.pending_action, state.outcome.terminated_by) == ("Greenwich", None, None)


def test_draft_failure_ends_with_an_error():
    done = Answerer(chat_generator=_llm({"raise": "x"})).run(state=_state(action="draft", draft=None))["finished"]
    assert done.outcome.terminated_by == "error" and done.outcome.error == "Answer LLM failed: RuntimeError: x"


# --- prompts, limits, temperature ----------------------------------------------------------------------------


def test_custom_prompts_are_rendered():
    answerer = Answerer(
        chat_generator=_llm({"text": "a"}, {"text": "b"}, {"text": "Improved answer: c"}),
        answer_prompt="REWRITE {{ draft }} FOR {{ question }}",
        generate_prompt="GENERATE FROM {{ chunks }}",
        reflect_prompt="REFLECT ON {{ draft }}",
        max_chunks=1,
    )
    answerer.run(state=_state())
    answerer.run(state=_state(draft=None))
    answerer.run(state=_state(action="reflect"))
    llm = answerer.chat_generator
    assert _prompt(llm, 0) == f"REWRITE Greenwich FOR {QUESTION}"
    assert _prompt(llm, 1) == f"GENERATE FROM [1] (Adriana Trigiani) {DOC_TEXT['trigiani']}"
    assert _prompt(llm, 2) == "REFLECT ON Greenwich"


def test_max_chunks_and_chunk_chars_limit_the_prompt():
    llm = _llm({"text": "a"})
    Answerer(chat_generator=llm, max_chunks=1, chunk_chars=20).run(state=_state())
    prompt = _prompt(llm)
    assert f"[1] Adriana Trigiani\n{DOC_TEXT['trigiani'][:20].rstrip()} [...]" in prompt
    assert "[2]" not in prompt


def test_temperature_and_generation_kwargs_reach_the_answer_llm():
    llm = _llm({"text": "a"})
    Answerer(chat_generator=llm, temperature=0.2, generation_kwargs={"max_tokens": 50}).run(state=_state())
    assert llm.calls[0][1] == {"max_tokens": 50, "temperature": 0.2}
    plain = _llm({"text": "a"})
    Answerer(chat_generator=plain).run(state=_state())
    assert plain.calls[0][1] is None


async def test_run_async_matches_run():
    for state in (_state(), _state(draft=None), _state(action="reflect"), _state(action="draft", draft=None)):
        script = [{"text": "x\nImproved answer: y"}]
        sync = Answerer(chat_generator=_llm(*script)).run(state=state)
        asynchronous = await Answerer(chat_generator=_llm(*script)).run_async(state=state)
        assert {k: v.to_dict() for k, v in sync.items()} == {k: v.to_dict() for k, v in asynchronous.items()}
    no_llm = await Answerer().run_async(state=_state())
    assert strip_markers(no_llm["finished"].outcome.answer) == "Greenwich"


def test_bad_limits_are_rejected():
    with pytest.raises(ValueError, match="max_chunks"):
        Answerer(max_chunks=0)
    with pytest.raises(ValueError, match="chunk_chars"):
        Answerer(chunk_chars=0)


def test_serialisation_round_trip(allow_deserialization):
    answerer = Answerer(
        chat_generator=_llm({"text": "a"}),
        temperature=0.3,
        generation_kwargs={"seed": 1},
        answer_prompt=DEFAULT_ANSWER_PROMPT + "!",
        max_chunks=3,
        chunk_chars=99,
    )
    data = answerer.to_dict()
    restored = Answerer.from_dict(copy.deepcopy(data))
    assert restored.to_dict() == data
    assert restored.chat_generator.per_call is True
    assert Answerer.from_dict(Answerer().to_dict()).chat_generator is None


def test_chunks_per_search_keeps_each_hops_best_chunks_in_search_order():
    from haystack import Document

    from haystack_agentic.dataclasses.loop_state import LoopState, ToolStep

    docs = [Document(id=i, content=f"text {i}", score=s) for i, s in (("a", 9.0), ("b", 8.0), ("c", 7.0), ("z", 1.0))]
    state = LoopState(question="q", chunks=tuple(docs)).evolve(
        tool_history=(
            ToolStep(1, "search", query="q", returned_chunk_ids=("a", "b", "c")),
            ToolStep(2, "search", query="bridge", returned_chunk_ids=("z",)),
        )
    )
    assert [d.id for d in prompt_chunks(state, max_chunks=6, chunks_per_search=2)] == ["a", "b", "z"]
    assert [d.id for d in prompt_chunks(state, max_chunks=2, chunks_per_search=2)] == ["a", "b"]
    assert [d.id for d in prompt_chunks(state, max_chunks=3)] == ["a", "b", "c"]
    with pytest.raises(ValueError):
        Answerer(chunks_per_search=0)


@pytest.mark.parametrize("title", [7, ["a", "list"], {"a": 1}, None, 2.5])
def test_a_chunk_title_of_any_json_type_is_cited_without_it(title):
    chunk = Document(id="trigiani", content=DOC_TEXT["trigiani"], meta={"title": title}, score=1.0)
    llm = _llm({"text": "Greenwich Village, New York City"})
    done = Answerer(chat_generator=llm).run(state=_state(action=None, draft=None, chunks=(chunk,)))["finished"]
    assert done.outcome.terminated_by == "answered"
    assert [c["title"] for c in done.outcome.citations] == [None]
