# SPDX-License-Identifier: Apache-2.0
"""
The json-mode protocol of the controller LLM, for models without tool calling.

Here are the prompt, the decision the model writes (`{"action": "search|reflect|generate", "reasoning": ...,
"query": ...}`), read leniently, the JSON schema asked for as `response_format` (dropped for the run when the server
refuses it), and the route a decision takes.
"""

from typing import Any

from haystack import logging
from haystack.dataclasses import ChatMessage

from haystack_agentic.dataclasses.loop_state import LoopState, ToolStep
from haystack_agentic.evidence.feedback import refusal_note
from haystack_agentic.llm.calls import (
    CallOptions,
    LLMCall,
    call_generator,
    call_generator_async,
    role_options,
    sends_openai_requests,
)
from haystack_agentic.llm.loop_tools import planned_search, searched_in, send_searches
from haystack_agentic.llm.prompts import DEFAULT_JSON_PROMPT, fit_turns, format_chunks, render
from haystack_agentic.llm.refused_turns import refused_turn_note
from haystack_agentic.llm.retries import refuses_response_format
from haystack_agentic.llm.tokens import TokenCounter
from haystack_agentic.llm.tool_arguments import InvalidArgumentsError, chosen_collection
from haystack_agentic.llm.valid_text import json_objects

logger = logging.getLogger(__name__)

#: The actions a decision may take.
JSON_ACTIONS = ("search", "reflect", "generate")

#: Most characters of the decision's `query` and `reasoning` under the JSON schema: a small model that rambles would
#: otherwise run into `max_tokens` and leave the object unclosed.
QUERY_MAX_CHARS = 120
REASONING_MAX_CHARS = 160

#: The `LoopState.metadata` key recording that the server refused `response_format`.
STRUCTURED_OUTPUT_REFUSED = "structured_output_refused"
#: Most characters of each chunk in the json-mode prompt.
JSON_CHUNK_PREVIEW_CHARS = 600


def json_messages(state: LoopState, prompt: str | None, budget_tokens: int, counter: TokenCounter) -> list[ChatMessage]:
    """
    The messages of a json-mode call: the run's earlier turns, then the rendered `prompt`.

    The earlier turns take at most a quarter of `budget_tokens` (oldest left out first). The Jinja `prompt` (`None`:
    `DEFAULT_JSON_PROMPT`) is rendered with the question, the chunks (at most half the budget, lowest-ranked left out),
    the steps, the draft and why an answer or a turn was refused.
    """
    rendered = render(
        prompt or DEFAULT_JSON_PROMPT,
        question=state.question,
        chunks=format_chunks(state.chunks, JSON_CHUNK_PREVIEW_CHARS, budget_tokens // 2, counter),
        history=state.tool_history,
        draft=state.draft,
        iteration=state.iteration + 1,
        max_iterations=state.limits.max_iterations,
        refusal=refusal_note(state) or refused_turn_note(state),
        collections=state.collections,
    )
    return [*fit_turns(state.conversation[:-1], budget_tokens // 4, counter), ChatMessage.from_user(rendered)]


def refused_decision_format(call: LLMCall, options: CallOptions) -> bool:
    """Whether the call sent `response_format` (in `options`) and the server refused it (logged as a warning)."""
    sent = "response_format" in (options.get("generation_kwargs") or {})
    if sent and call.error is not None and refuses_response_format(call.error):
        logger.warning(
            "The server refused response_format ({error}); this run's decisions are sent without it.",
            error=repr(call.error),
        )
        return True
    return False


def without_decision_format(state: LoopState) -> LoopState:
    """The state noting that the server refused `response_format` (the run's later decisions go without it)."""
    return state.evolve(metadata={**(state.metadata or {}), STRUCTURED_OUTPUT_REFUSED: True})


def parse_json_decision(text: str) -> dict[str, Any] | None:
    """
    The routing decision in a json-mode reply, `None` when there is none.

    It is the first JSON object with an `action` key, in a code fence or among prose.
    """
    return next((value for value in json_objects(text) if "action" in value), None)


def decision_response_format(collections: Any = None) -> dict[str, Any]:
    """
    The `response_format` asking for a decision in the OpenAI structured-outputs form.

    llama.cpp's server makes it a grammar: `action` one of the allowed actions, `collection` (in a scoped run) one of
    the run's `collections`.
    """
    properties: dict[str, Any] = {
        "action": {"type": "string", "enum": list(JSON_ACTIONS)},
        "query": {"type": "string", "maxLength": QUERY_MAX_CHARS},
        "reasoning": {"type": "string", "maxLength": REASONING_MAX_CHARS},
    }
    if collections:
        properties["collection"] = {"type": "string", "enum": list(collections)}
    required = ["action", "query"]
    schema = {"type": "object", "properties": properties, "required": required, "additionalProperties": False}
    return {"type": "json_schema", "json_schema": {"name": "routing_decision", "schema": schema}}


def route_json_decision(
    state: LoopState, text: str, turn: int, *, strict: bool, default_top_k: int | None
) -> dict[str, Any]:
    """
    The route of the json-mode reply `text` of 1-based `turn`.

    A search (`default_top_k` chunks; no query: the question if not searched yet, else the reasoning), `answer`
    (generate; reflect, or draft when there is none yet), or `loop` with an `invalid` step (no decision, an unknown
    action, a search without query or repeated).

    :raises ValueError: With `strict`, if the reply holds no decision or an unknown action.
    """
    decision = parse_json_decision(text)
    action = str(decision.get("action", "")).strip().lower() if decision else ""
    reasoning = decision.get("reasoning") if decision else None
    reasoning = reasoning if isinstance(reasoning, str) else None
    if decision is None or action not in JSON_ACTIONS:
        problem = "no JSON object with an 'action'" if decision is None else f"unknown action {action!r}"
        if strict:
            msg = f"AgenticRouter (json mode, strict) got {problem} in the reply: {text!r}"
            raise ValueError(msg)
        logger.warning("Invalid json-mode decision ({problem}); going on to the next turn", problem=problem)
        step = ToolStep(iteration=turn, action="invalid", arguments=decision or {}, result=problem)
        return {"loop": state.with_step(step)}
    if action == "search":
        asked = decision.get("query")
        query = asked.strip() if isinstance(asked, str) else ""
        query = query or (state.question if state.question not in state.queries_tried else "")
        query = query or (reasoning or "").strip()
        try:
            if not query:
                msg = "search without query"
                raise InvalidArgumentsError(msg)
            collection = chosen_collection(state.collections, decision.get("collection"))
            if searched_in(state, query, collection):
                msg = f'already searched for "{query}"'
                raise InvalidArgumentsError(msg)
        except InvalidArgumentsError as exc:
            step = ToolStep(
                turn,
                "invalid",
                query=query or None,
                arguments=decision,
                reasoning=reasoning if query else None,
                result=str(exc),
            )
            return {"loop": state.with_step(step)}
        pending, step = planned_search(state, turn, query, default_top_k, collection, decision, reasoning)
        return send_searches(state.with_step(step), [pending])
    # Reflecting with no draft yet: the answerer writes a first draft instead.
    pending_action = ("reflect" if state.draft else "draft") if action == "reflect" else "answer"
    step = ToolStep(iteration=turn, action=action, arguments=decision, reasoning=reasoning)
    return {"answer": state.with_step(step).evolve(pending_action=pending_action)}


def controller_options(router: Any, state: LoopState, tools: Any, stream: Any) -> CallOptions:
    """
    The options of an `AgenticRouter`'s controller call.

    They are the role's options with `tools` and `stream`; in json mode with structured output on an OpenAI-compatible
    generator (unless refused in this run), the decision's schema as `response_format`.
    """
    options = role_options(router)
    options["tools"], options["streaming_callback"] = tools, stream
    if (
        router.mode == "json"
        and router.structured_output
        and sends_openai_requests(router.chat_generator)
        and not (state.metadata or {}).get(STRUCTURED_OUTPUT_REFUSED)
    ):
        response_format = decision_response_format(state.collections)
        options["generation_kwargs"] = {**(router.generation_kwargs or {}), "response_format": response_format}
    return options


def controller_call(router: Any, state: LoopState, messages: list[ChatMessage], tools: Any, stream: Any) -> LLMCall:
    """An `AgenticRouter`'s controller call; once more without `response_format` when the server refuses it."""
    options = controller_options(router, state, tools, stream)
    call = call_generator(router.chat_generator, state, "controller", messages, **options)
    if refused_decision_format(call, options):
        state = without_decision_format(call.state)
        options = controller_options(router, state, tools, stream)
        call = call_generator(router.chat_generator, state, "controller", messages, **options)
    return call


async def controller_call_async(
    router: Any, state: LoopState, messages: list[ChatMessage], tools: Any, stream: Any
) -> LLMCall:
    """Async twin of `controller_call`: awaits the generator's `run_async`."""
    options = controller_options(router, state, tools, stream)
    call = await call_generator_async(router.chat_generator, state, "controller", messages, **options)
    if refused_decision_format(call, options):
        state = without_decision_format(call.state)
        options = controller_options(router, state, tools, stream)
        call = await call_generator_async(router.chat_generator, state, "controller", messages, **options)
    return call
