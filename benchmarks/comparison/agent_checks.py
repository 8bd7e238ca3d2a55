# SPDX-License-Identifier: Apache-2.0
"""
Haystack's own `Agent` (haystack.components.agents.Agent, haystack-ai 3.x) on the comparison's rows, with a scripted
chat generator and a `ComponentTool` over Haystack's BM25 retriever on real HotpotQA paragraphs.

Each check shows one cell of the README table "Compared with Haystack's Agent and LangGraph"; its name says which.
`compare.py` runs them (an `AssertionError` means the cell no longer holds).
"""

from comparison_support import (
    FOLLOW_UP,
    GOLD,
    HOP1_WORDS,
    HOP2_WORDS,
    QUESTION,
    UNSUPPORTED,
    Check,
    bm25,
    raises,
    recording_tracer,
    shared_store,
)
from haystack import Pipeline
from haystack.components.agents import Agent
from haystack.core.errors import BreakpointException
from haystack.dataclasses import ChatMessage, ChatRole
from haystack.dataclasses.breakpoints import Breakpoint
from haystack.tools import ComponentTool
from scripted_chat_generator import ScriptedChatGenerator


def search(*queries: str) -> dict:
    """A scripted turn calling the `search` tool once per query (several: parallel tool calls)."""
    return {"tool_calls": [{"tool_name": "search", "arguments": {"query": q}} for q in queries]}


def search_tool():
    """The retriever as a tool, the way Haystack's docs give an Agent a retriever."""
    return ComponentTool(component=bm25(shared_store()), name="search", description="Search Wikipedia paragraphs.")


def agent_with(script, **kwargs):
    llm = ScriptedChatGenerator(script, per_call=True)  # turn = call count (earlier turns may be in the history)
    return Agent(chat_generator=llm, tools=[search_tool()], **kwargs), llm


def the_corpus_holds_both_hops():
    retriever = bm25(shared_store())
    assert HOP1_WORDS in retriever.run(query="Big Stone Gap director")["documents"][0].content
    assert HOP2_WORDS in retriever.run(query="Adriana Trigiani")["documents"][0].content


# --- streaming ----------------------------------------------------------------------------------------------


def agent_streams_llm_tokens_tool_call_deltas_and_tool_results_on_one_callback():
    agent, _ = agent_with([search("Adriana Trigiani"), {"text": GOLD}])
    chunks = []
    out = agent.run(messages=[ChatMessage.from_user(QUESTION)], streaming_callback=chunks.append)
    text = "".join(c.content for c in chunks)
    assert text == out["last_message"].text == GOLD  # only the answer call wrote text here
    assert any(c.tool_calls for c in chunks)  # the tool call's delta
    results = [c for c in chunks if c.tool_call_result is not None]
    assert len(results) == 1 and HOP2_WORDS in results[0].tool_call_result.result  # the tool's result too
    # no tag tells the answer's chunks from a controller's prose: every chunk is the same generator's
    assert {c.component_info.type for c in chunks if c.component_info} <= {
        "scripted_chat_generator.ScriptedChatGenerator"
    }


# --- history ------------------------------------------------------------------------------------------------


def agent_takes_the_conversation_as_messages_and_returns_it_extended():
    history = [
        ChatMessage.from_system("Answer from the search results."),
        ChatMessage.from_user(QUESTION),
        ChatMessage.from_assistant(GOLD),
        ChatMessage.from_user(FOLLOW_UP),
    ]
    agent, llm = agent_with([search("Adriana Trigiani education"), {"text": "Boston"}])
    out = agent.run(messages=history)
    first_prompt = llm.calls[0][0]
    assert [m.text for m in first_prompt] == [m.text for m in history]  # the whole conversation, system included
    assert out["messages"][: len(history)] == history
    assert [m.role for m in out["messages"][len(history) :]] == [ChatRole.ASSISTANT, ChatRole.TOOL, ChatRole.ASSISTANT]


# --- tools --------------------------------------------------------------------------------------------------


def agent_runs_every_tool_call_of_a_turn_and_the_model_reads_documents_as_json():
    agent, _llm = agent_with([search("Big Stone Gap director", "Adriana Trigiani"), {"text": GOLD}])
    out = agent.run(messages=[ChatMessage.from_user(QUESTION)])
    assert out["tool_call_counts"] == {"search": 2}
    results = [m.tool_call_result for m in out["messages"] if m.tool_call_result is not None]
    assert [r.origin.arguments["query"] for r in results] == ["Big Stone Gap director", "Adriana Trigiani"]
    assert results[0].result.startswith('{"documents": [{')  # the retriever's output serialised as JSON
    assert HOP1_WORDS in results[0].result and HOP2_WORDS in results[1].result
    # the documents are not an output of the run: only messages and counters
    assert set(out) == {"messages", "last_message", "step_count", "token_usage", "tool_call_counts", "exit_reason"}


def agent_collects_tool_documents_only_through_a_declared_state_schema():
    tool = ComponentTool(
        component=bm25(shared_store()),
        name="search",
        description="Search Wikipedia paragraphs.",
        outputs_to_state={"documents": {"source": "documents"}},
    )
    llm = ScriptedChatGenerator([search("Big Stone Gap director", "Adriana Trigiani"), {"text": GOLD}], per_call=True)
    agent = Agent(chat_generator=llm, tools=[tool], state_schema={"documents": {"type": list}})
    out = agent.run(messages=[ChatMessage.from_user(QUESTION)])
    titles = [doc.meta["title"] for doc in out["documents"]]
    assert "Big Stone Gap (film)" in titles and "Adriana Trigiani" in titles
    assert len(titles) > len(set(titles))  # the default list handler appends: a paragraph found twice is kept twice


# --- exit reasons -------------------------------------------------------------------------------------------


def agent_exit_reasons_text_tool_and_max_agent_steps():
    agent, _ = agent_with([search("Adriana Trigiani"), {"text": GOLD}])
    assert agent.run(messages=[ChatMessage.from_user(QUESTION)])["exit_reason"] == "text"

    agent, _ = agent_with([search("Adriana Trigiani")], exit_conditions=["search"])
    assert agent.run(messages=[ChatMessage.from_user(QUESTION)])["exit_reason"] == "search"

    agent, _ = agent_with([search("Big Stone Gap")], max_agent_steps=2)
    assert agent.run(messages=[ChatMessage.from_user(QUESTION)])["exit_reason"] == "max_agent_steps"


def agent_has_no_give_up_or_error_exit_a_generator_failure_raises():
    agent, _ = agent_with([search("Adriana Trigiani"), {"raise": "endpoint down"}])
    with raises(Exception, match="endpoint down"):
        agent.run(messages=[ChatMessage.from_user(QUESTION)])


# --- fallback at the cap ------------------------------------------------------------------------------------


def agent_at_max_agent_steps_returns_the_messages_without_an_answer():
    agent, llm = agent_with([search("Big Stone Gap director")], max_agent_steps=3)
    out = agent.run(messages=[ChatMessage.from_user(QUESTION)])
    assert out["exit_reason"] == "max_agent_steps" and out["step_count"] == 3
    assert len(llm.calls) == 3  # no extra call to answer from what was found
    assert out["last_message"].role == ChatRole.TOOL  # the last search result, not an answer
    assert not any(m.text for m in out["messages"] if m.role == ChatRole.ASSISTANT)


# --- budget -------------------------------------------------------------------------------------------------


def agent_bounds_steps_not_prompt_tokens_every_tool_result_stays_in_the_prompt():
    queries = ["Big Stone Gap", "Adriana Trigiani", "Greenwich Village", "Virginia", "New York", "film director"]
    agent, llm = agent_with([search(q) for q in queries] + [{"text": GOLD}])
    out = agent.run(messages=[ChatMessage.from_user(QUESTION)])
    last_prompt = llm.calls[-1][0]
    assert sum(1 for m in last_prompt if m.tool_call_result is not None) == len(queries)  # nothing compacted
    replies = [m for m in out["messages"] if m.role == ChatRole.ASSISTANT]
    prompt_tokens = [reply.meta["usage"]["prompt_tokens"] for reply in replies]
    assert prompt_tokens == sorted(prompt_tokens) and prompt_tokens[-1] > 4 * prompt_tokens[0]  # grows every step
    assert out["token_usage"]["prompt_tokens"] == sum(prompt_tokens)  # reported after the fact, summed


# --- grounding ----------------------------------------------------------------------------------------------


def agent_returns_an_unsupported_answer_as_is_without_a_grounding_output():
    agent, _ = agent_with([search("Adriana Trigiani"), {"text": f"{GOLD}. {UNSUPPORTED}"}])
    out = agent.run(messages=[ChatMessage.from_user(QUESTION)])
    assert out["last_message"].text.endswith(UNSUPPORTED)
    assert "grounding" not in out


# --- tracing ------------------------------------------------------------------------------------------------


def agent_traces_run_step_llm_and_tool_spans():
    with recording_tracer() as tracer:
        agent, _ = agent_with([search("Big Stone Gap director", "Adriana Trigiani"), {"text": GOLD}])
        agent.run(messages=[ChatMessage.from_user(QUESTION)])
    paths = [tuple(span.path()) for span in tracer.spans]
    run, step = "haystack.agent.run", "haystack.agent.step"
    llm, tool = "haystack.agent.step.llm", "haystack.agent.step.tool"
    assert paths == [
        (run,),
        (run, step),
        (run, step, llm),
        (run, step, tool),
        (run, step, tool),
        (run, step),
        (run, step, llm),
    ]
    llm_span = next(span for span in tracer.spans if span.name == llm)
    assert "haystack.agent.step.llm.input" in llm_span.tags and "haystack.agent.step.llm.output" in llm_span.tags
    assert [s.tags["haystack.tool.name"] for s in tracer.spans if s.name == tool] == ["search", "search"]


# --- breakpoints --------------------------------------------------------------------------------------------


def agent_has_no_step_breakpoint_a_pipeline_breakpoint_stops_before_it_and_resumes():
    from haystack.dataclasses import breakpoints

    # haystack-ai 3.x: no breakpoint inside the Agent (no `break_point` input, no `AgentBreakpoint`)
    assert "break_point" not in Agent.run.__code__.co_varnames and not hasattr(breakpoints, "AgentBreakpoint")
    agent, llm = agent_with([search("Adriana Trigiani"), {"text": GOLD}])
    pipeline = Pipeline()
    pipeline.add_component("agent", agent)
    data = {"agent": {"messages": [ChatMessage.from_user(QUESTION)]}}
    with raises(BreakpointException) as stopped:
        pipeline.run(data, break_point=Breakpoint(component_name="agent", visit_count=0))
    assert llm.calls == []  # stopped before the agent's first step, not between steps
    snapshot = stopped.value.pipeline_snapshot
    out = pipeline.run(data={}, pipeline_snapshot=snapshot)["agent"]
    assert out["last_message"].text == GOLD and out["exit_reason"] == "text"


#: (aspect, check) for `compare.py`, in the README table's order.
CHECKS: list[Check] = [
    ("Corpus", the_corpus_holds_both_hops),
    ("Streaming", agent_streams_llm_tokens_tool_call_deltas_and_tool_results_on_one_callback),
    ("History", agent_takes_the_conversation_as_messages_and_returns_it_extended),
    ("Tools", agent_runs_every_tool_call_of_a_turn_and_the_model_reads_documents_as_json),
    ("Tools", agent_collects_tool_documents_only_through_a_declared_state_schema),
    ("Exit reasons", agent_exit_reasons_text_tool_and_max_agent_steps),
    ("Exit reasons", agent_has_no_give_up_or_error_exit_a_generator_failure_raises),
    ("Fallback at the cap", agent_at_max_agent_steps_returns_the_messages_without_an_answer),
    ("Budget", agent_bounds_steps_not_prompt_tokens_every_tool_result_stays_in_the_prompt),
    ("Grounding", agent_returns_an_unsupported_answer_as_is_without_a_grounding_output),
    ("Tracing", agent_traces_run_step_llm_and_tool_spans),
    ("Breakpoints", agent_has_no_step_breakpoint_a_pipeline_breakpoint_stops_before_it_and_resumes),
]
