# SPDX-License-Identifier: Apache-2.0
"""
LangGraph's agentic-RAG recipe (the docs tutorial's graph, rebuilt in `agentic_rag_recipe.py`) on the comparison's
rows, with scripted LangChain chat models and a retriever tool over real HotpotQA paragraphs.

Each check shows one cell of the README table "Compared with Haystack's Agent and LangGraph"; its name says which.
`compare.py` runs them (an `AssertionError` means the cell no longer holds). langgraph is in the `compare` extra.
"""

from agentic_rag_recipe import (
    RecordingCallbacks,
    ScriptedChatModel,
    build_recipe,
    grade,
    retrieve,
    retriever_tool,
)
from comparison_support import (
    FOLLOW_UP,
    GOLD,
    HOP1_WORDS,
    HOP2_WORDS,
    QUESTION,
    UNSUPPORTED,
    Check,
    raises,
    shared_store,
)
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.errors import GraphRecursionError


class Recipe:
    """The compiled recipe with handles on its two scripted models."""

    def __init__(self, responses, grades, **compile_kwargs):
        self.response_model = ScriptedChatModel(script=responses)
        self.grader_model = ScriptedChatModel(script=grades)
        tool = retriever_tool(shared_store())
        self.graph = build_recipe(self.response_model, self.grader_model, tool, **compile_kwargs)

    def invoke(self, question=QUESTION, **kwargs):
        return self.graph.invoke({"messages": [{"role": "user", "content": question}]}, **kwargs)


def user(text):
    return {"messages": [{"role": "user", "content": text}]}


# --- streaming ----------------------------------------------------------------------------------------------


def langgraph_streams_every_models_tokens_tagged_by_node():
    recipe = Recipe([retrieve("Adriana Trigiani"), AIMessage(content=GOLD)], [grade("yes")])
    events = list(recipe.graph.stream(user(QUESTION), stream_mode="messages"))
    by_node = {}
    for message, metadata in events:
        by_node.setdefault(metadata["langgraph_node"], []).append(message)
    answer = "".join(m.content for m in by_node["generate_answer"] if isinstance(m, AIMessageChunk))
    assert answer == GOLD
    # the same stream carries the retrieve call's tool-call chunks, the grader's structured output (as a tool-call
    # chunk, under the node of its conditional edge: `retrieve`) and the tool's result: filter by node
    assert any(m.tool_call_chunks for m in by_node["generate_query_or_respond"])
    grader = [m for m in by_node["retrieve"] if isinstance(m, AIMessageChunk) and m.tool_call_chunks]
    assert grader and grader[0].tool_call_chunks[0]["name"] == "GradeDocuments"
    assert any(isinstance(m, ToolMessage) and HOP2_WORDS in m.content for m in by_node["retrieve"])


# --- history ------------------------------------------------------------------------------------------------


def langgraph_keeps_history_per_thread_but_grades_and_answers_the_first_question():
    recipe = Recipe(
        [
            retrieve("Adriana Trigiani"),
            AIMessage(content=GOLD),
            retrieve("Adriana Trigiani education"),
            AIMessage(content="Boston University"),
        ],
        [grade("yes")],
        checkpointer=InMemorySaver(),
    )
    thread = {"configurable": {"thread_id": "t1"}}
    recipe.graph.invoke(user(QUESTION), thread)
    out = recipe.graph.invoke(user(FOLLOW_UP), thread)
    # the follow-up's first call saw the whole first exchange (MessagesState appends; the checkpointer keeps it)
    follow_up_call = recipe.response_model.calls[2][0]
    assert follow_up_call[0].content == QUESTION and follow_up_call[-1].content == FOLLOW_UP
    assert any(isinstance(m, ToolMessage) for m in follow_up_call)
    # ...but grade_documents and generate_answer take messages[0] as the question: the first turn's, not the follow-up
    answer_prompt = recipe.response_model.calls[3][0][0].content
    grade_prompt = recipe.grader_model.calls[1][0][0].content
    for prompt in (answer_prompt, grade_prompt):
        assert QUESTION in prompt and FOLLOW_UP not in prompt
    assert out["messages"][-1].content == "Boston University"


# --- tools --------------------------------------------------------------------------------------------------


def langgraph_runs_parallel_calls_but_grades_and_answers_from_the_last_tool_message_only():
    recipe = Recipe([retrieve("Big Stone Gap director", "Adriana Trigiani"), AIMessage(content=GOLD)], [grade("yes")])
    out = recipe.invoke()
    results = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert len(results) == 2  # ToolNode ran both calls
    first, second = results[0].content, results[1].content
    assert HOP1_WORDS in first and HOP2_WORDS in second
    answer_prompt = recipe.response_model.calls[1][0][0].content
    grade_prompt = recipe.grader_model.calls[0][0][0].content
    for prompt in (answer_prompt, grade_prompt):
        assert second in prompt and first not in prompt  # the first search's paragraphs never reach the answer
    assert set(out) == {"messages"}  # the documents are text in tool messages, not a state key


# --- exit reasons -------------------------------------------------------------------------------------------


def langgraph_ends_on_a_direct_reply_or_after_generate_answer_and_says_neither():
    direct = Recipe([AIMessage(content="Hello! Ask me about Wikipedia.")], [grade("yes")]).invoke("hello")
    answered = Recipe([retrieve("Adriana Trigiani"), AIMessage(content=GOLD)], [grade("yes")]).invoke()
    for out in (direct, answered):
        assert set(out) == {"messages"} and isinstance(out["messages"][-1], AIMessage)  # no exit-reason field
    assert not any(isinstance(m, ToolMessage) for m in direct["messages"])  # only the messages tell them apart
    assert answered["messages"][-1].content == GOLD


# --- fallback at the cap ------------------------------------------------------------------------------------


def langgraph_at_the_recursion_limit_raises_graph_recursion_error_without_an_answer():
    # every pass: retrieve -> graded "no" -> rewrite -> retrieve again (the response model alternates call/rewrite)
    loop = [retrieve("Big Stone Gap"), AIMessage(content="Who directed Big Stone Gap?")] * 20
    recipe = Recipe(loop, [grade("no")], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "cap"}, "recursion_limit": 9}
    with raises(GraphRecursionError):
        recipe.invoke(config=config)
    state = recipe.graph.get_state(config).values  # what a checkpointer kept: the loop's messages, no answer
    assert isinstance(state["messages"][-1], (HumanMessage, ToolMessage, AIMessage))
    assert not any(isinstance(m, AIMessage) and m.content and not m.tool_calls for m in state["messages"])
    assert recipe.grader_model.calls  # the documents were graded, and never answered from


# --- budget -------------------------------------------------------------------------------------------------


def langgraph_bounds_super_steps_not_prompt_tokens_the_messages_grow():
    rewrites = [retrieve("Big Stone Gap"), AIMessage(content="Who directed Big Stone Gap?")] * 3
    recipe = Recipe(
        [*rewrites, retrieve("Adriana Trigiani"), AIMessage(content=GOLD)], [grade("no")] * 3 + [grade("yes")]
    )
    out = recipe.invoke(config={"recursion_limit": 50})
    assert out["messages"][-1].content == GOLD
    query_calls = [messages for messages, tools in recipe.response_model.calls if tools == ["retrieve_paragraphs"]]
    sizes = [sum(len(str(m.content)) for m in messages) for messages in query_calls]
    assert len(query_calls) == 4 and sizes == sorted(sizes) and sizes[-1] > 3 * sizes[0]
    assert sum(isinstance(m, ToolMessage) for m in query_calls[-1]) == 3  # every earlier result, uncompacted


# --- grounding ----------------------------------------------------------------------------------------------


def langgraph_grades_document_relevance_never_the_answer():
    recipe = Recipe([retrieve("Adriana Trigiani"), AIMessage(content=f"{GOLD}. {UNSUPPORTED}")], [grade("yes")])
    out = recipe.invoke()
    assert out["messages"][-1].content.endswith(UNSUPPORTED)  # returned as written
    assert len(recipe.grader_model.calls) == 1  # one grading call, before the answer existed
    assert UNSUPPORTED not in recipe.grader_model.calls[0][0][0].content


# --- tracing ------------------------------------------------------------------------------------------------


def langgraph_traces_graph_node_model_and_tool_runs_through_callbacks():
    recipe = Recipe(
        [
            retrieve("Big Stone Gap"),
            AIMessage(content="Who directed Big Stone Gap?"),
            retrieve("Adriana Trigiani"),
            AIMessage(content=GOLD),
        ],
        [grade("no"), grade("yes")],
    )
    callbacks = RecordingCallbacks()
    recipe.invoke(config={"callbacks": [callbacks]})
    nodes = [path[1] for path in callbacks.paths("chain") if len(path) == 2]
    assert nodes == [
        "generate_query_or_respond",
        "retrieve",
        "rewrite_question",
        "generate_query_or_respond",
        "retrieve",
        "generate_answer",
    ]
    # a run per node visit under the graph's run: no span groups one pass of the loop
    assert ["LangGraph", "retrieve", "retrieve_paragraphs"] in callbacks.paths("tool")
    llm_parents = [path[1] for path in callbacks.paths("llm")]
    assert llm_parents == [
        "generate_query_or_respond",
        "retrieve",
        "rewrite_question",
        "generate_query_or_respond",
        "retrieve",
        "generate_answer",
    ]  # the grader runs inside `retrieve`'s edge


# --- breakpoints --------------------------------------------------------------------------------------------


def langgraph_interrupts_before_a_node_and_resumes_from_the_checkpoint():
    recipe = Recipe(
        [retrieve("Adriana Trigiani"), AIMessage(content=GOLD)],
        [grade("yes")],
        checkpointer=InMemorySaver(),
        interrupt_before=["retrieve"],
    )
    thread = {"configurable": {"thread_id": "pause"}}
    recipe.graph.invoke(user(QUESTION), thread)
    paused = recipe.graph.get_state(thread)
    assert paused.next == ("retrieve",)
    assert paused.values["messages"][-1].tool_calls[0]["args"] == {"query": "Adriana Trigiani"}
    assert recipe.grader_model.calls == []  # nothing after the interrupt ran
    out = recipe.graph.invoke(None, thread)  # resume
    assert out["messages"][-1].content == GOLD


#: (aspect, check) for `compare.py`, in the README table's order.
CHECKS: list[Check] = [
    ("Streaming", langgraph_streams_every_models_tokens_tagged_by_node),
    ("History", langgraph_keeps_history_per_thread_but_grades_and_answers_the_first_question),
    ("Tools", langgraph_runs_parallel_calls_but_grades_and_answers_from_the_last_tool_message_only),
    ("Exit reasons", langgraph_ends_on_a_direct_reply_or_after_generate_answer_and_says_neither),
    ("Fallback at the cap", langgraph_at_the_recursion_limit_raises_graph_recursion_error_without_an_answer),
    ("Budget", langgraph_bounds_super_steps_not_prompt_tokens_the_messages_grow),
    ("Grounding", langgraph_grades_document_relevance_never_the_answer),
    ("Tracing", langgraph_traces_graph_node_model_and_tool_runs_through_callbacks),
    ("Breakpoints", langgraph_interrupts_before_a_node_and_resumes_from_the_checkpoint),
]
