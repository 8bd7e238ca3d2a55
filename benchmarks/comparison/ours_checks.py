# SPDX-License-Identifier: Apache-2.0
"""
Our loop on the comparison's rows: the packaged `pipelines/agentic_rag_ungrounded.yml` (router, evidence check,
fallback, answerer, result) loaded with `load_loop_pipeline`, its OpenAI chat generators swapped for
`ScriptedChatGenerator`s in the YAML data and its router's search policy off (the scripts decide every search after
the question), its store filled with the same HotpotQA paragraphs as the other two.

Each check shows one cell of the README table "Compared with Haystack's Agent and LangGraph"; its name says which.
`compare.py` runs them (an `AssertionError` means the cell no longer holds).
"""

import functools
import json
import tempfile
from pathlib import Path
from typing import Any

import yaml
from comparison_support import (
    FOLLOW_UP,
    GOLD,
    HOP1_WORDS,
    HOP2_WORDS,
    QUESTION,
    UNSUPPORTED,
    Check,
    environment,
    hotpot_rows,
    raises,
    recording_tracer,
)
from haystack.core.errors import BreakpointException
from haystack.dataclasses import ChatMessage
from haystack.dataclasses.breakpoints import Breakpoint

from haystack_agentic.grounding.citations import strip_markers
from haystack_agentic.indexing.hotpotqa import hotpotqa_documents
from haystack_agentic.llm.streaming import ANSWER_META, EVENT_META, ROLE_META
from haystack_agentic.loop_loading import retriever_store
from haystack_agentic.pipelines.loop_builder import load_loop_pipeline
from haystack_agentic.pipelines.loop_pipeline import loop_inputs, max_runs_for
from haystack_agentic.pipelines.snapshots import resume_from_snapshot
from haystack_agentic.resources import pipeline_path

SCRIPTED = "scripted_chat_generator.ScriptedChatGenerator"
JUDGE_ACCEPTS = [{"text": '{"sufficient": true, "reason": "the passages say it"}'}]


def scripted(script: list[dict[str, Any]], per_call: bool = False) -> dict[str, Any]:
    return {"type": SCRIPTED, "init_parameters": {"script": script, "per_call": per_call}}


def search(*queries: str) -> dict[str, Any]:
    """A scripted controller turn calling `search` once per query (several: parallel tool calls)."""
    return {"tool_calls": [{"tool_name": "search", "arguments": {"query": q}} for q in queries]}


def answer(text: str) -> dict[str, Any]:
    return {"tool_calls": [{"tool_name": "answer", "arguments": {"text": text}}]}


def give_up(reason: str) -> dict[str, Any]:
    return {"tool_calls": [{"tool_name": "give_up", "arguments": {"reason": reason}}]}


@functools.cache
def documents():
    return hotpotqa_documents(hotpot_rows(), source="hotpotqa", title_in_content=True)


def packaged(
    script: list[dict[str, Any]],
    *,
    fallback_script: list[dict[str, Any]] | None = None,
    answer_script: list[dict[str, Any]] | None = None,
    grounder_script: list[dict[str, Any]] | None = None,
    max_iterations: int | None = None,
    router: dict[str, Any] | None = None,
):
    """The packaged ungrounded pipeline with scripted LLMs, its store holding the HotpotQA paragraphs."""
    data = yaml.safe_load(pipeline_path("agentic_rag_ungrounded.yml").read_text(encoding="utf-8"))
    components = data["components"]
    # Turns by call: the router's free first search adds an assistant message without an LLM call.
    components["router"]["init_parameters"]["chat_generator"] = scripted(script, True)
    # The router as shipped, but without its search policy: its first search is the question, with no LLM call, and
    # the scripts decide the rest (the policy's own searches are tests/components/routers/test_search_policy.py's).
    components["router"]["init_parameters"].update({"search_policy": None, **(router or {})})
    components["evidence"].setdefault("init_parameters", {})["chat_generator"] = scripted(JUDGE_ACCEPTS, True)
    components["fallback"]["init_parameters"]["chat_generator"] = scripted(
        fallback_script or [{"text": "NO ANSWER"}], True
    )
    if answer_script is not None:
        components["answerer"]["init_parameters"]["chat_generator"] = scripted(answer_script, True)
    if max_iterations is not None:
        components["controller"]["init_parameters"] = {"max_iterations": max_iterations}
        data["max_runs_per_component"] = max_runs_for(max_iterations)
    if grounder_script is not None:  # the grounded YAML's place for HHEM, with the LLM judge instead
        components["grounder"] = {
            "type": "haystack_agentic.components.grounders.llm_judge_grounder.LLMJudgeGrounder",
            "init_parameters": {"chat_generator": scripted(grounder_script, True)},
        }
        data["connections"].remove({"sender": "finish.value", "receiver": "result.state"})
        data["connections"] += [
            {"sender": "finish.value", "receiver": "grounder.state"},
            {"sender": "grounder.state", "receiver": "result.state"},
        ]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "loop.yml"
        path.write_text(yaml.safe_dump(data), encoding="utf-8")
        # The package's loaders trust its components only; the scripted test LLM is this benchmark's to allow.
        with environment("HAYSTACK_DESERIALIZATION_ALLOWLIST", SCRIPTED.rsplit(".", 1)[0]):
            pipeline = load_loop_pipeline(path)
    retriever_store(pipeline).write_documents(documents())
    return pipeline


def result_of(output: dict[str, Any]) -> dict[str, Any]:
    """The loop's result dict (`result.result`)."""
    result = output["result"]
    return result.get("result", result) if "terminated_by" not in result else result


def run(pipeline, query: str = QUESTION, **kwargs) -> dict[str, Any]:
    return result_of(pipeline.run(loop_inputs(pipeline, query, **kwargs)))


def llm(pipeline, name: str = "router"):
    """The scripted chat generator of a component."""
    return pipeline.get_component(name).chat_generator


# --- streaming ----------------------------------------------------------------------------------------------


def ours_streams_tokens_tagged_by_role_and_steps_as_events_without_text():
    long_answer = "The director, Adriana Trigiani, is based in Greenwich Village, New York City."
    pipeline = packaged(
        [search("Big Stone Gap director"), search("Adriana Trigiani"), answer(GOLD)],
        answer_script=[{"text": long_answer}],
    )
    chunks = []
    result = run(pipeline, streaming_callback=chunks.append)
    streamed = "".join(c.content for c in chunks if c.meta.get(ANSWER_META)).strip()
    assert streamed == result["answer"]  # the answer's own chunks, apart from every other call's (markers included)
    assert strip_markers(result["answer"]) == long_answer
    assert {c.meta[ROLE_META] for c in chunks if c.tool_calls} == {"controller"}
    assert {c.meta[ROLE_META] for c in chunks if EVENT_META not in c.meta} == {"controller", "answer"}
    events = [c.meta[EVENT_META] for c in chunks if EVENT_META in c.meta]
    assert events[:4] == ["search", "documents", "search", "documents"]
    assert all(c.content == "" for c in chunks if EVENT_META in c.meta)  # steps never mix into the text


# --- history ------------------------------------------------------------------------------------------------


def ours_takes_the_conversation_and_the_controller_sees_all_of_it():
    history = [
        ChatMessage.from_system("Answer from Wikipedia."),
        ChatMessage.from_user(QUESTION),
        ChatMessage.from_assistant(GOLD),
        ChatMessage.from_user(FOLLOW_UP),
    ]
    pipeline = packaged([search("Adriana Trigiani"), answer("She attended Vassar College.")])
    result = run(pipeline, None, messages=history)
    assert result["terminated_by"] == "answered"
    loop_system, *conversation = llm(pipeline).calls[0][0]
    assert loop_system.is_from("system")  # the loop's own prompt, then the whole conversation, system included
    assert [(m.role, m.text) for m in conversation[: len(history)]] == [(m.role, m.text) for m in history]
    assert [m.role for m in conversation[len(history) :]] == ["assistant", "tool"]  # then the free first search
    assert strip_markers(result["answer"]) == "She attended Vassar College."


# --- tools --------------------------------------------------------------------------------------------------


def ours_runs_every_search_of_a_turn_merges_chunks_once_and_shows_readable_text():
    pipeline = packaged([search("Big Stone Gap director", "Adriana Trigiani"), answer(GOLD)])
    result = run(pipeline)
    steps = [s for s in result["tool_history"] if s["action"] == "search"]
    assert [s["query"] for s in steps] == [QUESTION, "Big Stone Gap director", "Adriana Trigiani"]
    assert result["iterations"] == 3  # the question first, then the two searches are one turn
    ids = [doc.id if hasattr(doc, "id") else doc["id"] for doc in result["documents"]]
    assert len(ids) == len(set(ids))  # "Big Stone Gap (film)" came back from more than one search, kept once
    tool_results = [m.tool_call_result.result for m in llm(pipeline).calls[1][0] if m.tool_call_result][-2:]
    assert "[already shown]" in tool_results[0] and HOP2_WORDS in tool_results[1]  # a chunk is sent once
    assert tool_results[0].startswith('5 result(s) for "Big Stone Gap director":\n\n[1] id=')  # numbered text


# --- exit reasons -------------------------------------------------------------------------------------------


def ours_terminates_answered_gave_up_max_iterations_or_error_with_a_result():
    answered = run(packaged([search("Adriana Trigiani"), answer(GOLD)]))
    gave_up = run(packaged([search("Arthur's Magazine"), give_up("The paragraphs do not say.")]))
    capped = run(packaged([search("Big Stone Gap")], max_iterations=2, fallback_script=[{"text": GOLD}]))
    failed = run(packaged([search("Adriana Trigiani"), {"raise": "endpoint down"}]))
    assert [r["terminated_by"] for r in (answered, gave_up, capped, failed)] == [
        "answered",
        "gave_up",
        "max_iterations",
        "error",
    ]
    assert "endpoint down" in failed["error"] and failed["answer"] is None  # a result, not an exception


# --- fallback at the cap ------------------------------------------------------------------------------------


def ours_answers_from_the_chunks_at_the_iteration_cap():
    pipeline = packaged(
        [search("Big Stone Gap director"), search("Adriana Trigiani"), search("Greenwich")],
        max_iterations=3,
        fallback_script=[{"text": GOLD}],
    )
    result = run(pipeline)
    assert result["terminated_by"] == "max_iterations" and strip_markers(result["answer"]) == GOLD
    assert result["usage"]["fallback"]["calls"] == 1
    fallback_prompt = llm(pipeline, "fallback").calls[0][0][-1].text
    assert HOP1_WORDS in fallback_prompt and HOP2_WORDS in fallback_prompt  # from what the searches found
    assert llm(pipeline, "fallback").calls[0][2] is None  # a tool-less call


# --- budget -------------------------------------------------------------------------------------------------


def ours_keeps_every_controller_prompt_within_its_token_budget():
    queries = ["Big Stone Gap", "Adriana Trigiani", "Greenwich Village", "Virginia", "New York"]  # after the question
    script = [search(q) for q in queries] + [answer(GOLD)]
    budget = 600  # the default router sends older results as digests: its prompts peak at ~1,400 tokens here

    def prompt_tokens(pipeline):  # as the scripted generator counts them: 4 characters a token
        return [
            sum(len(m.text or (m.tool_call_result.result if m.tool_call_result else "")) for m in messages) // 4
            for messages, _, _ in llm(pipeline).calls
        ]

    unbounded = packaged(script, max_iterations=8)  # the default budget, 16000; turns for the question and all
    assert run(unbounded)["terminated_by"] == "answered" and max(prompt_tokens(unbounded)) > 2 * budget
    bounded = packaged(script, max_iterations=8, router={"context_budget_tokens": budget})
    result = run(bounded)
    assert result["terminated_by"] == "answered" and len(prompt_tokens(bounded)) == len(queries) + 1
    assert max(prompt_tokens(bounded)) <= budget  # older results compacted to digests, the same six calls
    assert result["usage"]["controller"]["calls"] == len(queries) + 1  # and the tokens per role, in the result
    assert result["usage"]["controller"]["prompt_tokens"] > 0


# --- grounding ----------------------------------------------------------------------------------------------


def ours_grounds_the_answer_sentence_by_sentence_and_flags_the_unsupported_one():
    verdict = {
        "claims": [
            {"sentence": 1, "claim": "based in Greenwich Village", "supported": True, "chunks": [0]},
            {"sentence": 2, "claim": "born on the Moon", "supported": False, "chunks": []},
        ]
    }
    pipeline = packaged(
        [search("Adriana Trigiani"), answer(f"{GOLD}. {UNSUPPORTED}")], grounder_script=[{"text": json.dumps(verdict)}]
    )
    result = run(pipeline)
    grounding = result["grounding"]
    assert [s["text"] for s in grounding["hallucinated_spans"]] == [UNSUPPORTED]
    assert grounding["faithful_spans"][0]["sources"][0]["query"] in (QUESTION, "Adriana Trigiani")  # what found it
    assert 0 < grounding["score"] < 1
    assert result["answer"].endswith(UNSUPPORTED)  # flagged, not rewritten


# --- tracing ------------------------------------------------------------------------------------------


def ours_traces_run_iteration_llm_and_search_spans():
    with recording_tracer() as tracer:
        run(packaged([search("Big Stone Gap director", "Adriana Trigiani"), answer(GOLD)]))
    [loop_run] = [s for s in tracer.spans if s.name == "haystack_agentic.loop.run"]
    iterations = [s for s in tracer.spans if s.name == "haystack_agentic.loop.iteration"]
    assert [s.tags["haystack_agentic.iteration"] for s in iterations] == [1, 2, 3]
    assert all(s.parent is loop_run for s in iterations)
    controller_calls = [s for s in tracer.spans if s.tags.get("haystack.component.name") == "controller.chat_generator"]
    assert [s.parent for s in controller_calls] == iterations[1:]  # each LLM call under its own iteration (the
    # first, the question's search, makes none)
    assert all(s.tags["haystack.component.type"] == "ScriptedChatGenerator" for s in controller_calls)
    searches = [s for s in tracer.spans if s.name == "haystack_agentic.search"]
    assert [s.parent for s in searches] == [iterations[0], iterations[1], iterations[1]]  # both searches of turn 2


# --- breakpoints ------------------------------------------------------------------------------------------


def ours_stops_at_a_breakpoint_between_turns_and_resumes_with_the_allow_list():
    pipeline = packaged([search("Big Stone Gap director"), search("Adriana Trigiani"), answer(GOLD)])
    with raises(BreakpointException) as stopped:  # the router's third visit: the question and one LLM turn before
        pipeline.run(loop_inputs(pipeline, QUESTION), break_point=Breakpoint(component_name="router", visit_count=2))
    assert len(llm(pipeline).calls) == 1  # stopped before the second LLM turn
    with environment("HAYSTACK_DESERIALIZATION_ALLOWLIST", "haystack_agentic.*,scripted_chat_generator"):
        result = result_of(pipeline.run(data={}, pipeline_snapshot=stopped.value.pipeline_snapshot))
    assert result["terminated_by"] == "answered" and result["iterations"] == 4


def ours_resumes_from_a_snapshot_without_setting_the_allow_list():
    with environment("HAYSTACK_DESERIALIZATION_ALLOWLIST", None):
        _resume_without_the_allow_list()


def _resume_without_the_allow_list():
    pipeline = packaged([search("Big Stone Gap director"), answer(GOLD)])
    with raises(BreakpointException) as stopped:
        pipeline.run(loop_inputs(pipeline, QUESTION), break_point=Breakpoint(component_name="router", visit_count=1))
    # `resume_from_snapshot` trusts the one module of the loop's state (importing the package trusts nothing)
    result = result_of(resume_from_snapshot(pipeline, stopped.value.pipeline_snapshot))
    assert result["terminated_by"] == "answered"


#: (aspect, check) for `compare.py`, in the README table's order.
CHECKS: list[Check] = [
    ("Streaming", ours_streams_tokens_tagged_by_role_and_steps_as_events_without_text),
    ("History", ours_takes_the_conversation_and_the_controller_sees_all_of_it),
    ("Tools", ours_runs_every_search_of_a_turn_merges_chunks_once_and_shows_readable_text),
    ("Exit reasons", ours_terminates_answered_gave_up_max_iterations_or_error_with_a_result),
    ("Fallback at the cap", ours_answers_from_the_chunks_at_the_iteration_cap),
    ("Budget", ours_keeps_every_controller_prompt_within_its_token_budget),
    ("Grounding", ours_grounds_the_answer_sentence_by_sentence_and_flags_the_unsupported_one),
    ("Tracing", ours_traces_run_iteration_llm_and_search_spans),
    ("Breakpoints", ours_stops_at_a_breakpoint_between_turns_and_resumes_with_the_allow_list),
    ("Breakpoints", ours_resumes_from_a_snapshot_without_setting_the_allow_list),
]
