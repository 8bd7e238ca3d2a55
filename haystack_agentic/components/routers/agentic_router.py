# SPDX-License-Identifier: Apache-2.0

import dataclasses
from typing import Any, Literal

from haystack import component, default_from_dict, logging
from haystack.components.generators.chat.types import ChatGenerator
from haystack.core.serialization import component_to_dict
from haystack.dataclasses import ChatMessage, ChatRole, StreamingCallbackT, ToolCall
from haystack.tools import (
    Tool,
    ToolsType,
    deserialize_tools_or_toolset_inplace,
    flatten_tools_or_toolsets,
    serialize_tools_or_toolset,
)
from haystack.utils.deserialization import deserialize_component_inplace

from haystack_agentic.components.routers.bridge_entity_router import BridgeEntityRouter
from haystack_agentic.dataclasses.loop_state import LoopState, ToolStep, count_final_turn
from haystack_agentic.dataclasses.pending_search import SEARCH_PLACEHOLDER
from haystack_agentic.evidence.feedback import with_refusal_feedback
from haystack_agentic.llm.calls import LLMCall, describe_error
from haystack_agentic.llm.generator_checks import check_chat_generator
from haystack_agentic.llm.json_decisions import (
    controller_call,
    controller_call_async,
    json_messages,
    route_json_decision,
)
from haystack_agentic.llm.loop_tools import (
    BUILTIN_TOOL_NAMES,
    PLACEHOLDER_TEXT,
    SEARCH_TOOL_NAME,
    USER_TOOLS_KEY,
    builtin_tools,
    planned_search,
    route_tool_calls,
    send_queued,
    send_searches,
)
from haystack_agentic.llm.prompts import DEFAULT_TOOLS_SYSTEM_PROMPT, fit_turns, render
from haystack_agentic.llm.refused_turns import (
    FORCED_AT_CAP,
    SUGGESTED_SEARCH_REASON,
    absorb_refusals,
    suggested_search,
    with_refused_turn_note,
)
from haystack_agentic.llm.result_digests import digest_older_results
from haystack_agentic.llm.retries import DEFAULT_MAX_RETRIES
from haystack_agentic.llm.serialization import generator_from_dict_inplace, role_to_dict, warm_up_generator
from haystack_agentic.llm.streaming import (
    CallTextHold,
    emit,
    emit_async,
    held_text,
    pick_callback,
    role_callback,
    role_callback_async,
    routed_state,
    step_chunks,
)
from haystack_agentic.llm.text_tool_calls import call_text
from haystack_agentic.llm.tokens import TokenCounter, compact_messages, token_counter_for
from haystack_agentic.tracing import iteration_span, trace_turn

logger = logging.getLogger(__name__)

#: Default most prompt tokens of one controller call.
DEFAULT_CONTEXT_BUDGET_TOKENS = 16000
#: The smallest `context_budget_tokens` (a turn's prompt must fit the question, state and tools).
MIN_CONTEXT_BUDGET_TOKENS = 256
#: Tool call id and step reasoning of the run's first search (the question, sent without an LLM call).
QUESTION_SEARCH_ID = "search-question"
QUESTION_SEARCH_REASON = "the question itself, searched first without an LLM call"
#: Step reasoning prefix of a search of the router's `search_policy` (no LLM call).
POLICY_SEARCH_REASON = "search policy, without an LLM call: "


@component
class AgenticRouter:
    """
    Decides each turn of the agentic loop with one LLM call: search again, reflect, answer, or give up.

    It routes the `LoopState` to a search, another turn, the answerer, or the end (give-up, generator error).

    `mode="tools"`: native tool calling with `search(query, top_k?)`, `answer(text, sources?)`, `give_up(reason)`,
    `read_chunk(id)` and any user `tools`; every call of a reply runs, in call order (searches through the
    pipeline's retriever, user tools inline); `answer` or `give_up` ends the turn; unknown tools and bad arguments
    go back to the model as tool errors; a reply with text and no tool call is an answer, unless the text is nothing
    but calls to the offered tools with valid arguments (fenced JSON, `{"name": ..., "arguments": ...}`, `<tool_call>`
    tags: `llm.text_tool_calls`), as small local models write them: those run as calls, are counted in
    `metadata["recovered_tool_calls"]`, and are not streamed as text. `mode="json"`, for models without tool calling:
    the model replies `{"action": "search|reflect|generate", "reasoning": ..., "query": ...}`,
    parsed leniently; an invalid reply is an `invalid` step.

    ### Usage example
    ```python
    from haystack.components.generators.chat import OpenAIChatGenerator
    from haystack_agentic import AgenticRouter, LoopController

    router = AgenticRouter(chat_generator=OpenAIChatGenerator(model="gpt-4o-mini"), mode="tools")
    state = LoopController().run(query="Who directed Big Stone Gap?")["state"]
    out = router.run(state=state)  # turn 1 searches the question itself, no LLM call: {"query": "Who directed ..."}
    ```
    """

    def __init__(
        self,
        chat_generator: ChatGenerator,
        mode: Literal["tools", "json"] = "tools",
        tools: ToolsType | None = None,
        system_prompt: str | None = None,
        json_prompt: str | None = None,
        temperature: float | None = None,
        generation_kwargs: dict[str, Any] | None = None,
        default_top_k: int | None = None,
        max_top_k: int = 20,
        context_budget_tokens: int = DEFAULT_CONTEXT_BUDGET_TOKENS,
        max_retries: int = DEFAULT_MAX_RETRIES,
        timeout: float | None = None,
        streaming_callback: StreamingCallbackT | None = None,
        result_digests: bool = True,
        structured_output: bool = True,
        strict: bool = False,
        search_question_first: bool = True,
        search_policy: BridgeEntityRouter | None = None,
    ) -> None:
        """
        Create an AgenticRouter.

        :param chat_generator: Any Haystack chat generator (the controller LLM); with tool calling in `tools` mode.
        :param mode: `"tools"` (native tool calling) or `"json"` (the JSON routing protocol).
        :param tools: Extra Haystack tools for `tools` mode (not named like the loop's own); their Documents join the
            run's chunks.
        :param system_prompt: Jinja template replacing `DEFAULT_TOOLS_SYSTEM_PROMPT` (tools mode).
        :param json_prompt: Jinja template replacing `DEFAULT_JSON_PROMPT` (json mode).
        :param temperature: Sampling temperature of the controller role (`None`: the generator's default).
        :param generation_kwargs: Extra generation kwargs for every controller call.
        :param default_top_k: Chunks per search when the model gives no `top_k`; `None` (default): the retriever's
            own `top_k` (the router sends `top_k=None`).
        :param max_top_k: Upper bound on a model-chosen `top_k`. Default 20.
        :param context_budget_tokens: Most prompt tokens of one call (>= 256; the model's tokenizer, else a
            conservative estimate): older results are compacted, then the lowest-ranked chunks left out. Default 16000.
        :param max_retries: Retries of a transient LLM failure (timeout, connection error, HTTP 429/5xx). Default 2.
        :param timeout: Seconds one LLM call may take (`None`: no limit).
        :param streaming_callback: Gets the controller's chunks (role `controller`) and step events; the run input
            wins over it.
        :param result_digests: Tools mode: send search results older than the latest reply as digests (the model
            reads a chunk with `read_chunk(id)`). Default `True`.
        :param structured_output: Json mode, OpenAI-compatible generator: send the decision's JSON schema as
            `response_format` (dropped for the run when the server refuses it). Default `True`.
        :param strict: Json mode: raise `ValueError` (with the raw reply) on a reply that is not a valid decision,
            instead of recording an `invalid` step and going on. Default `False`.
        :param search_question_first: The run's first search is the user's question itself, sent without an LLM call
            (the LLM decides from its result on); `False`: the LLM decides the first search too. Default `True`.
        :param search_policy: A `BridgeEntityRouter` whose searches come first, each without an LLM call: the question,
            then the bridge entities its chunks name (pages of the policy's store). When the policy has no search
            left, the LLM decides from the chunks found. It replaces `search_question_first`. A small model picks
            follow-up searches worse than the policy (issue 38: all gold paragraphs seen in 32/40 HotpotQA runs of
            Qwen2.5-Coder-1.5B against the policy's 36/40). Default `None` (the LLM decides every search after the
            question).
        :raises ValueError: On an unknown mode, a user tool named like a built-in tool, bad top_k bounds or budget.
        :raises TypeError: If `chat_generator` is not a chat generator, or in tools mode takes no `tools`; if
            `search_policy` is not a `BridgeEntityRouter`.
        """
        if mode not in ("tools", "json"):
            msg = f"mode must be 'tools' or 'json', got {mode!r}"
            raise ValueError(msg)
        check_chat_generator(chat_generator, "AgenticRouter(chat_generator=...)", needs_tools=mode == "tools")
        if max_top_k < 1 or (default_top_k is not None and not 1 <= default_top_k <= max_top_k):
            msg = f"need 1 <= default_top_k <= max_top_k, got {default_top_k} and {max_top_k}"
            raise ValueError(msg)
        if context_budget_tokens < MIN_CONTEXT_BUDGET_TOKENS:
            msg = f"context_budget_tokens must be at least 256, got {context_budget_tokens}"
            raise ValueError(msg)
        if search_policy is not None and not isinstance(search_policy, BridgeEntityRouter):
            msg = f"search_policy must be a BridgeEntityRouter, got {type(search_policy).__name__}"
            raise TypeError(msg)
        user_tools = flatten_tools_or_toolsets(tools) if tools else []
        clashes = [t.name for t in user_tools if t.name in BUILTIN_TOOL_NAMES]
        if clashes:
            msg = f"User tools may not be named {clashes}: those names are the loop's own tools."
            raise ValueError(msg)
        self.chat_generator = chat_generator
        self.mode = mode
        self.tools = tools
        self.system_prompt = system_prompt
        self.json_prompt = json_prompt
        self.temperature = temperature
        self.generation_kwargs = generation_kwargs
        self.default_top_k = default_top_k
        self.max_top_k = max_top_k
        self.context_budget_tokens = context_budget_tokens
        self.max_retries = max_retries
        self.timeout = timeout
        self.streaming_callback = streaming_callback
        self.result_digests = result_digests
        self.structured_output = structured_output
        self.strict = strict
        self.search_question_first = search_question_first
        self.search_policy = search_policy
        self._user_tools = {t.name: t for t in user_tools}
        self._all_tools = [*builtin_tools(max_top_k), *user_tools]

    def warm_up(self) -> None:
        """Warm up the chat generator (and user tools that need it), and find how to count its tokens."""
        warm_up_generator(self.chat_generator)
        if self.search_policy is not None:
            self.search_policy.warm_up()
        self._token_counter()  # loads a tiktoken encoding now, if one applies, rather than in the first turn
        for tool in self._user_tools.values():
            if hasattr(tool, "warm_up"):
                tool.warm_up()

    @component.output_types(
        query=str, filters=dict[str, Any] | None, top_k=int | None, loop=LoopState, answer=LoopState, finished=LoopState
    )
    def run(self, state: LoopState, streaming_callback: StreamingCallbackT | None = None) -> dict[str, Any]:
        """
        Take one turn of the loop.

        :param state: The run's state from the controller.
        :param streaming_callback: A sync callback for this turn's chunks and step events (wins over the init one).
        :returns: Exactly one route:
            - search: `query` (str), `filters` (dict or None), `top_k` (int; None: the retriever's own) for the
              retriever, and `loop` (LoopState with the pending search) for the controller; a reply's further
              searches wait in `state.queued` and go out on the next visits without an LLM call;
            - another turn without a search: `loop`;
            - answer or reflect: `answer` (LoopState with `pending_action`);
            - the end: `finished` (LoopState with `terminated_by` set: `gave_up` or `error`).
        :raises ValueError: If the callback is an async function (use `run_async`); in json mode with `strict=True`,
            if the reply is not a valid decision.
        """
        callback = pick_callback(self.streaming_callback, streaming_callback, is_async=False)
        hold = self._call_text_hold(callback)
        if state.queued:
            routed = send_queued(state)
        else:
            with iteration_span(state) as turn_state:  # the turn's span: its LLM call and user tools nest under it
                prepared = self._start_turn(turn_state)
                if not isinstance(prepared, dict):
                    stream = role_callback(callback, "controller", answer=False, hold=hold)
                    prepared = self._route(controller_call(self, *prepared, stream))
                routed = prepared
        emit(callback, [*held_text(hold, state, routed), *step_chunks(state, routed_state(routed))])
        return routed

    @component.output_types(
        query=str, filters=dict[str, Any] | None, top_k=int | None, loop=LoopState, answer=LoopState, finished=LoopState
    )
    async def run_async(self, state: LoopState, streaming_callback: StreamingCallbackT | None = None) -> dict[str, Any]:
        """Async twin of `run`: awaits the chat generator's `run_async`; the callback may be sync or async."""
        callback = pick_callback(self.streaming_callback, streaming_callback, is_async=True)
        hold = self._call_text_hold(callback)
        if state.queued:
            routed = send_queued(state)
        else:
            with iteration_span(state) as turn_state:
                prepared = self._start_turn(turn_state)
                if not isinstance(prepared, dict):
                    stream = role_callback_async(callback, "controller", answer=False, hold=hold)
                    prepared = self._route(await controller_call_async(self, *prepared, stream))
                routed = prepared
        await emit_async(callback, [*held_text(hold, state, routed), *step_chunks(state, routed_state(routed))])
        return routed

    def _call_text_hold(self, callback: Any) -> CallTextHold | None:
        """In tools mode, with a callback: a hold on the reply's text while it could be tool calls written as text."""
        return CallTextHold() if self.mode == "tools" and callback is not None else None

    def _token_counter(self) -> TokenCounter:
        return token_counter_for(self.chat_generator)

    def _start_turn(self, state: LoopState) -> dict[str, Any] | tuple[LoopState, list[ChatMessage], Any]:
        """`_prepare`, but a first question's first searches (the question, or the policy's) go without an LLM call."""
        if self.search_policy is not None and not _is_follow_up(state):
            routed = self._policy_search(state)
            if routed is not None:
                return routed
        elif self.search_question_first and not state.tool_history and not state.messages and state.pending is None:
            return self._free_search(state, state.question, QUESTION_SEARCH_REASON, QUESTION_SEARCH_ID)
        return self._prepare(state)

    def _policy_search(self, state: LoopState) -> dict[str, Any] | None:
        """
        The search policy's next search as this router's own, while every step so far is the policy's.

        :returns: The search route, or `None` once the LLM has taken a turn or the policy would answer or give up.
        """
        if state.pending is not None or any(
            not (step.reasoning or "").startswith(POLICY_SEARCH_REASON) for step in state.tool_history
        ):
            return None
        assert self.search_policy is not None  # noqa: S101 - the caller checked
        routed = self.search_policy.decide(state)  # inside this router's own turn span
        if "query" not in routed:
            return None
        step = routed["loop"].tool_history[-1]  # the policy's own step: its reason, top_k and page filter
        return self._free_search(
            state,
            routed["query"],
            POLICY_SEARCH_REASON + (step.reasoning or "bridge entity"),
            f"search-policy-{state.iteration + 1}",
            top_k=routed["top_k"],
            filters=routed["filters"],
            narrowed=(step.arguments or {}).get("filters"),
        )

    def _opening(self, state: LoopState) -> LoopState:
        """Tools mode: the state with the system prompt and the run's conversation (else the question) first."""
        if state.messages:
            return state
        system = render(
            self.system_prompt or DEFAULT_TOOLS_SYSTEM_PROMPT,
            question=state.question,
            max_iterations=state.limits.max_iterations,
            user_tools=list(self._user_tools),
        )
        # The run's starting conversation (its oldest turns left out beyond half the budget), else the question.
        earlier = fit_turns(state.conversation[:-1], self.context_budget_tokens // 2, self._token_counter())
        conversation = (*earlier, *state.conversation[-1:]) or (ChatMessage.from_user(state.question),)
        if self._user_tools:  # the answer roles tell calls of these tools written as text from answers
            state = state.evolve(metadata={**(state.metadata or {}), USER_TOOLS_KEY: list(self._user_tools)})
        return state.with_messages(ChatMessage.from_system(system), *conversation)

    def _prepare(self, state: LoopState) -> dict[str, Any] | tuple[LoopState, list[ChatMessage], Any]:
        """Return an early route, or (state, messages, tools) for the LLM call."""
        turn = state.iteration + 1
        if self.mode == "json" and state.is_last_iteration:
            step = ToolStep(iteration=turn, action="generate", result="last iteration: generate without a call")
            forced = state.with_step(step).evolve(metadata={**(state.metadata or {}), FORCED_AT_CAP: True})
            routed = {"answer": forced.evolve(pending_action="answer")}
            return trace_turn("AgenticRouter", count_final_turn(routed, turn))
        suggested = suggested_search(state)  # a refused turn: the chunks' next search instead of another call
        if suggested is not None:
            if self.mode == "tools":  # say why before the search (json mode's prompt lists the refused step)
                state = with_refused_turn_note(self._opening(state))
            return self._free_search(state, suggested, SUGGESTED_SEARCH_REASON, f"search-suggested-{turn}")
        if self.mode == "json":
            return (
                state,
                json_messages(state, self.json_prompt, self.context_budget_tokens, self._token_counter()),
                None,
            )
        state = with_refusal_feedback(state)  # an answer the evidence check refused: tell the model why
        state = with_refused_turn_note(self._opening(state))  # a refused turn the chunks suggest nothing after: why
        tools = self._offered_tools(state)
        sent = digest_older_results(state.messages) if self.result_digests else state.messages
        return state, compact_messages(sent, self.context_budget_tokens, tools, self._token_counter()), tools

    def _route(self, call: LLMCall) -> dict[str, Any]:
        state = call.state
        turn = state.iteration + 1
        if call.error is not None:
            step = ToolStep(iteration=turn, action="error", result=describe_error(call.error))
            routed = {"finished": state.with_step(step).finish("error", error=describe_error(call.error))}
        elif self.mode == "json":
            routed = route_json_decision(state, call.text, turn, strict=self.strict, default_top_k=self.default_top_k)
        else:
            routed = route_tool_calls(
                state,
                call,
                turn,
                offered=self._offered_tools(state),
                user_tools=self._user_tools,
                default_top_k=self.default_top_k,
                max_top_k=self.max_top_k,
            )
        return trace_turn("AgenticRouter", count_final_turn(absorb_refusals(routed, turn), turn))

    def _offered_tools(self, state: LoopState) -> list[Tool]:
        """The tools of a tools-mode call: the loop's own (a scoped run's `search` takes a `collection`), the user's."""
        if state.collections:
            return [*builtin_tools(self.max_top_k, state.collections), *self._user_tools.values()]
        return self._all_tools

    def _free_search(
        self,
        state: LoopState,
        query: str,
        reason: str,
        call_id: str,
        top_k: int | None = None,
        filters: dict[str, Any] | None = None,
        narrowed: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """
        The route of a search the loop makes without an LLM call.

        That is the question first, the search policy's, or the chunks' suggestion after a refused decision; in tools
        mode it enters the conversation as a `search` call with id `call_id`. `top_k` (default `default_top_k`) and
        `filters` (the run's own filters already in them; default the run's) are the policy's; `narrowed` is the
        filter that narrows the policy's search to one page (kept in the step's arguments: the model may still search
        the same words over the whole store).
        """
        turn = state.iteration + 1
        arguments: dict[str, Any] = {"query": query}
        if top_k is not None:
            arguments["top_k"] = top_k
        tool_call = None
        if self.mode == "tools":
            tool_call = ToolCall(tool_name=SEARCH_TOOL_NAME, arguments=arguments, id=call_id)
        top_k = self.default_top_k if top_k is None else top_k
        step_arguments = {**arguments, "filters": narrowed} if narrowed else arguments
        pending, step = planned_search(state, turn, query, top_k, None, step_arguments, reason, tool_call)
        if filters is not None:
            pending = dataclasses.replace(pending, filters=filters)
        state = state.with_step(step)
        if tool_call is not None:
            held = ChatMessage.from_tool(PLACEHOLDER_TEXT, origin=tool_call, meta={SEARCH_PLACEHOLDER: True})
            call = ChatMessage.from_assistant(call_text([tool_call]), tool_calls=[tool_call])
            state = self._opening(state).with_messages(call, held)
        return send_searches(state, [pending])

    def to_dict(self) -> dict[str, Any]:
        """Serialize the component to a dictionary."""
        data = role_to_dict(
            self,
            "mode",
            "json_prompt",
            "default_top_k",
            "max_top_k",
            "result_digests",
            "structured_output",
            "strict",
            "search_question_first",
        )
        data["init_parameters"]["tools"] = serialize_tools_or_toolset(self.tools)
        data["init_parameters"]["search_policy"] = (
            None if self.search_policy is None else component_to_dict(self.search_policy, "search_policy")
        )
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "AgenticRouter":
        """Deserialize the component from a dictionary."""
        init_params = data.get("init_parameters", {})
        generator_from_dict_inplace(init_params)
        deserialize_tools_or_toolset_inplace(init_params, key="tools")
        if init_params.get("search_policy") is not None:
            deserialize_component_inplace(init_params, key="search_policy")
        return default_from_dict(cls, data)


def _is_follow_up(state: LoopState) -> bool:
    """Whether the question follows a conversation's earlier turns (a user or assistant message before it)."""
    # "Where is she based?": the policy follows the question's own words; a follow-up is the model's, which sees them.
    return any(message.role in (ChatRole.USER, ChatRole.ASSISTANT) for message in state.conversation[:-1])
