"""
The loop against a real llama.cpp server (xllamacpp, the packaged SmolLM2-135M GGUF) through Haystack's
`OpenAIChatGenerator`: tools mode, json mode with the schema grammar, streaming, `run_async`, `/props`, and
`haystack-agentic serve` in front of it. Few turns and small `max_tokens`: CI runs these on 2 cores.
"""

import asyncio

import pytest
from haystack.dataclasses import ChatMessage

from haystack_agentic import AgenticRouter, LoopController
from haystack_agentic.llm.json_decisions import STRUCTURED_OUTPUT_REFUSED
from haystack_agentic.llm.server_info import read_server_info

pytestmark = pytest.mark.integration

QUESTION = "The director of the romantic comedy Big Stone Gap is based in what New York city?"
ROUTES = {"query", "loop", "answer", "finished"}


def first_state(max_iterations: int = 4):
    return LoopController(max_iterations=max_iterations).run(query=QUESTION)["state"]


def test_props_report_the_template_and_the_context(llamacpp):
    info = read_server_info(llamacpp.base_url)
    assert info.supports_tools is False  # SmolLM2's chat template has no tools
    assert info.n_ctx == 4096
    assert info.prompt_budget(16000) == 4096 - 512


def test_a_server_without_props_gives_nothing(llamacpp):
    info = read_server_info(f"http://127.0.0.1:{llamacpp.port}/nothing-here/v1")
    assert (info.supports_tools, info.n_ctx) == (None, None)


def test_tools_mode_request_is_accepted_and_routed(llamacpp_generator):
    router = AgenticRouter(chat_generator=llamacpp_generator(), mode="tools", search_question_first=False)
    routed = router.run(state=first_state())
    assert set(routed) & ROUTES
    state = next(routed[s] for s in ("loop", "answer", "finished") if s in routed)
    assert state.outcome.terminated_by != "error", state.outcome.error
    assert state.usage["controller"]["calls"] == 1


def test_the_servers_reply_is_routed_by_its_tool_calls(llamacpp_generator):
    # SmolLM2's template has no tools, so llama.cpp mostly returns prose; whichever it returns is routed by it.
    router = AgenticRouter(chat_generator=llamacpp_generator(64), mode="tools", search_question_first=False)
    routed = router.run(state=first_state())
    state = next(routed[s] for s in ("loop", "answer", "finished") if s in routed)
    assert state.outcome.error is None
    reply = next(m for m in reversed(state.messages) if m.role.value == "assistant")
    if reply.tool_calls:
        assert state.tool_history[0].tool_name == reply.tool_calls[0].tool_name
    else:
        assert state.tool_history[0].action == "answer" and state.draft == reply.text.strip()


def test_the_controller_streams_token_by_token(llamacpp_generator):
    chunks = []
    router = AgenticRouter(chat_generator=llamacpp_generator(24), mode="tools", search_question_first=False)
    router.run(state=first_state(), streaming_callback=chunks.append)
    streamed = [c for c in chunks if getattr(c, "content", None)]
    assert len(streamed) > 3


def test_run_async_against_the_server(llamacpp_generator):
    router = AgenticRouter(chat_generator=llamacpp_generator(), mode="json", search_question_first=False)
    routed = asyncio.run(router.run_async(state=first_state()))
    state = next(routed[s] for s in ("loop", "answer") if s in routed)
    assert state.tool_history[-1].action in {"search", "reflect", "generate"}


def test_json_mode_with_the_grammar_gives_valid_decisions(llamacpp_generator):
    router = AgenticRouter(chat_generator=llamacpp_generator(128), mode="json", search_question_first=False)
    state = first_state(max_iterations=4)
    for _ in range(3):
        routed = router.run(state=state)
        state = routed.get("loop") or routed.get("answer")
        assert state is not None and state.outcome.error is None
        step = state.tool_history[-1]  # the reply parsed as a decision (a repeated search is refused after parsing)
        assert step.arguments.get("action") in {"search", "reflect", "generate"}, step
        assert step.result is None or "JSON" not in step.result
        if "answer" in routed:
            break
        state = state.evolve(iteration=state.iteration + 1, pending=None)
    assert STRUCTURED_OUTPUT_REFUSED not in (state.metadata or {})


def test_a_prompt_over_the_context_is_not_retried_and_names_the_fix(llamacpp_generator):
    router = AgenticRouter(
        chat_generator=llamacpp_generator(8), mode="json", max_retries=2, search_question_first=False
    )
    state = first_state().evolve(question="word " * 5000)  # over the server's 4096-token context
    finished = router.run(state=state)["finished"]
    assert finished.outcome.terminated_by == "error"
    assert finished.usage["controller"]["calls"] == 1  # a 400 is not retried
    assert "fix:" in finished.outcome.error and "-c" in finished.outcome.error


def test_a_conversation_reaches_the_server(llamacpp_generator):
    llm = llamacpp_generator(8)
    replies = llm.run(messages=[ChatMessage.from_user("Say yes.")])["replies"]
    assert replies and replies[0].meta.get("usage", {}).get("prompt_tokens", 0) > 0
