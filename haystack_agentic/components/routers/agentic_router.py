# SPDX-License-Identifier: Apache-2.0

import json
import re
from typing import Any, Literal

from haystack import component, default_from_dict, default_to_dict, logging
from haystack.components.generators.chat.types import ChatGenerator
from haystack.dataclasses import ChatMessage, ToolCall
from haystack.tools import (
    Tool,
    ToolsType,
    deserialize_tools_or_toolset_inplace,
    flatten_tools_or_toolsets,
    serialize_tools_or_toolset,
)

from haystack_agentic.llm.calls import (
    DEFAULT_MAX_RETRIES,
    LLMCall,
    call_generator,
    call_generator_async,
    compact_messages,
    describe_error,
    format_chunks,
    generator_from_dict_inplace,
    generator_to_dict,
    render,
    warm_up_generator,
)
from haystack_agentic.evidence.feedback import refusal_note, with_refusal_feedback
from haystack_agentic.tracing import trace_turn
from haystack_agentic.dataclasses.loop_state import LoopState, PendingSearch, ToolStep

logger = logging.getLogger(__name__)

#: System prompt of the controller LLM in `tools` mode. Variables: `question`, `max_iterations`, `user_tools`.
DEFAULT_TOOLS_SYSTEM_PROMPT = """\
You answer questions from a document collection that you can only see by searching it.
Tools:
- search(query, top_k): find chunks about one thing. For a question with several hops, search the first fact,
  read the result, then search the entity it leads to (the bridge) for the next fact.
- answer(text): give the final answer when the chunks found support it. Be short and specific.
- give_up(reason): say why, when the collection does not hold the answer after a few different searches.
{% if user_tools %}
Other tools: {{ user_tools | join(", ") }}.
{% endif %}
Use only facts from search results. You have at most {{ max_iterations }} turns; one tool call per turn is best.
"""

#: Prompt of the controller LLM in `json` mode, sent fresh each turn. Variables: `question`, `chunks`,
#: `history`, `draft`, `iteration`, `max_iterations`, `refusal` (why the evidence check refused the last answer).
DEFAULT_JSON_PROMPT = """\
You decide the next step of a search for the answer to a question.
Question: {{ question }}
Turn {{ iteration }} of {{ max_iterations }}.
{% if history %}
Steps so far:
{% for step in history %}
- {{ step.action }}{% if step.query %}: "{{ step.query }}" ({{ step.returned_chunk_ids | length }} chunks){% endif %}
{% endfor %}
{% endif %}
{% if chunks %}
Chunks found:
{{ chunks }}
{% else %}
No chunks found yet.
{% endif %}
{% if draft %}
Current draft answer: {{ draft }}
{% endif %}
{% if refusal %}
{{ refusal }}
{% endif %}
Reply with one JSON object and nothing else:
{"action": "search", "query": "<what to search next>", "reasoning": "<why>"}
or {"action": "reflect", "reasoning": "<what to check in the draft>"}
or {"action": "generate", "reasoning": "<why the chunks suffice>"}
"""

#: Default most prompt tokens of one controller call.
DEFAULT_CONTEXT_BUDGET_TOKENS = 16000

ANSWER_TOOL_NAME = "answer"
SEARCH_TOOL_NAME = "search"
GIVE_UP_TOOL_NAME = "give_up"
_BUILTIN_TOOL_NAMES = (SEARCH_TOOL_NAME, ANSWER_TOOL_NAME, GIVE_UP_TOOL_NAME)
_JSON_ACTIONS = ("search", "reflect", "generate")

_EMPTY_REPLY_NUDGE = (
    "Your reply was empty. Call one tool: search(query) to look something up, answer(text) to answer, "
    "or give_up(reason)."
)


def _not_invoked(**kwargs: Any) -> str:
    # The router handles the built-in tools itself; this function only gives each Tool a callable.
    raise RuntimeError("Built-in loop tools are handled by AgenticRouter, not invoked directly.")


def _builtin_tools(max_top_k: int) -> list[Tool]:
    return [
        Tool(
            name=SEARCH_TOOL_NAME,
            description="Search the document collection. Returns numbered chunks with their ids.",
            parameters={
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "What to look for: one entity or fact."},
                    "top_k": {
                        "type": "integer",
                        "description": f"How many chunks to return (1-{max_top_k}).",
                        "minimum": 1,
                        "maximum": max_top_k,
                    },
                },
                "required": ["query"],
            },
            function=_not_invoked,
        ),
        Tool(
            name=ANSWER_TOOL_NAME,
            description="Give the final answer to the question, based on the chunks found.",
            parameters={
                "type": "object",
                "properties": {"text": {"type": "string", "description": "The answer."}},
                "required": ["text"],
            },
            function=_not_invoked,
        ),
        Tool(
            name=GIVE_UP_TOOL_NAME,
            description="Stop without an answer, saying why the collection cannot answer the question.",
            parameters={
                "type": "object",
                "properties": {"reason": {"type": "string", "description": "Why no answer can be given."}},
                "required": ["reason"],
            },
            function=_not_invoked,
        ),
    ]


class _InvalidArguments(ValueError):
    pass


def _parse_arguments(tool_call: ToolCall) -> dict[str, Any]:
    """Return the tool call's arguments as a dict, or raise `_InvalidArguments` saying what is wrong."""
    arguments: Any = tool_call.arguments
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError as exc:
            raise _InvalidArguments(f"arguments are not valid JSON ({exc.msg})") from exc
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise _InvalidArguments(f"arguments must be a JSON object, got {type(arguments).__name__}")
    return arguments


def _required_text(arguments: dict[str, Any], name: str) -> str:
    value = arguments.get(name)
    if not isinstance(value, str) or not value.strip():
        raise _InvalidArguments(f"'{name}' is required and must be a non-empty string")
    return value.strip()


def parse_json_decision(text: str) -> dict[str, Any] | None:
    """
    Find the routing decision in a json-mode reply, leniently.

    Accepts a bare JSON object, one inside a Markdown code fence, or one with prose around it (the first
    object that parses and has an `action` key wins).

    :param text: The model's reply.
    :returns: The decision as a dict, or `None` when no JSON object with an `action` is found.
    """
    if not text:
        return None
    candidates = [m.group(1) for m in re.finditer(r"```(?:json)?\s*(.*?)```", text, flags=re.DOTALL)]
    candidates.append(text)
    decoder = json.JSONDecoder()
    for candidate in candidates:
        for start in [m.start() for m in re.finditer(r"\{", candidate)]:
            try:
                value, _ = decoder.raw_decode(candidate[start:])
            except json.JSONDecodeError:
                continue
            if isinstance(value, dict) and "action" in value:
                return value
    return None


@component
class AgenticRouter:
    """
    Decides each turn of the agentic loop with one LLM call: search again, reflect, answer, or give up.

    It routes the `LoopState` to exactly one path: a search (`query`, `filters`, `top_k` to the retriever and
    `loop` back to the controller), another turn without a search (`loop`), the answerer (`answer`), or the end
    (`finished`, for give-up and generator errors).

    - `mode="tools"` uses native tool calling. The model sees `search(query, top_k?)`, `answer(text)`,
      `give_up(reason)` and any user `tools` (run inline; they never end the loop). Unknown tools and bad
      arguments go back to the model as tool errors and the run goes on. A reply with text and no tool call is
      an answer; an empty reply is not (the model is told and the loop goes on).
    - `mode="json"` is for models without tool calling: each turn the model replies
      `{"action": "search|reflect|generate", "reasoning": ..., "query": ...}`, parsed leniently (code fences,
      prose around it). Invalid output (no JSON object, unknown action) is recorded as an `invalid` step and
      the loop goes on, or raises `ValueError` with the raw text when `strict=True`. On the last iteration it
      routes to generate without calling the LLM.

    A generator exception ends the run with `terminated_by="error"` and the error kept.

    When the loop's `EvidenceChecker` refuses an answer (the chunks do not support one) and sends the run back, the
    next turn tells the model why: the result of its `answer` tool call (tools mode) or a line in the prompt (json
    mode), so it searches again or gives up instead of answering from the same chunks.

    ### Usage example
    ```python
    from haystack.components.generators.chat import OpenAIChatGenerator
    from haystack_agentic import AgenticRouter, LoopController

    router = AgenticRouter(chat_generator=OpenAIChatGenerator(model="gpt-4o-mini"), mode="tools")
    state = LoopController().run(query="Who directed Big Stone Gap?")["state"]
    out = router.run(state=state)  # e.g. {"query": "Big Stone Gap film director", "filters": None, "top_k": 5, "loop": ...}
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
        default_top_k: int = 5,
        max_top_k: int = 20,
        strict: bool = False,
        chunk_preview_chars: int = 600,
        context_budget_tokens: int = DEFAULT_CONTEXT_BUDGET_TOKENS,
        max_retries: int = DEFAULT_MAX_RETRIES,
        timeout: float | None = None,
    ) -> None:
        """
        Create an AgenticRouter.

        :param chat_generator: Any Haystack chat generator (the controller LLM). In `tools` mode it must support
            tool calling.
        :param mode: `"tools"` (native tool calling) or `"json"` (the JSON routing protocol).
        :param tools: Extra Haystack tools the model may call in `tools` mode; they run inline and their result
            goes back to the model. Names must differ from `search`, `answer`, `give_up`.
        :param system_prompt: Jinja template replacing `DEFAULT_TOOLS_SYSTEM_PROMPT` (tools mode).
        :param json_prompt: Jinja template replacing `DEFAULT_JSON_PROMPT` (json mode).
        :param temperature: Sampling temperature of the controller role (`None`: the generator's default).
        :param generation_kwargs: Extra generation kwargs for every controller call.
        :param default_top_k: Chunks per search when the model gives no `top_k`. Default 5.
        :param max_top_k: Upper bound on a model-chosen `top_k`. Default 20.
        :param strict: In json mode, raise `ValueError` (with the raw reply) on output that is not a valid
            decision, instead of recording it and going on.
        :param chunk_preview_chars: Most characters of each chunk in the json-mode prompt. Default 600.
        :param context_budget_tokens: Most prompt tokens of one controller call (estimated at 4 characters per
            token). Tools mode compacts older search results into one-line digests, then cuts the latest one from
            its lowest-ranked end; json mode leaves out the lowest-ranked chunks. Default 16000.
        :param max_retries: Retries of a transient LLM failure (timeout, connection error, HTTP 429/5xx), with
            exponential backoff from 0.5 s. Default 2.
        :param timeout: Seconds one LLM call may take (`None`: no limit); a timeout counts as transient.
        :raises ValueError: On an unknown mode, a user tool named like a built-in tool, or bad top_k bounds.
        """
        if mode not in ("tools", "json"):
            raise ValueError(f"mode must be 'tools' or 'json', got {mode!r}")
        if not 1 <= default_top_k <= max_top_k:
            raise ValueError(f"need 1 <= default_top_k <= max_top_k, got {default_top_k} and {max_top_k}")
        user_tools = flatten_tools_or_toolsets(tools) if tools else []
        clashes = [t.name for t in user_tools if t.name in _BUILTIN_TOOL_NAMES]
        if clashes:
            raise ValueError(f"User tools may not be named {clashes}: those names are the loop's own tools.")
        self.chat_generator = chat_generator
        self.mode = mode
        self.tools = tools
        self.system_prompt = system_prompt
        self.json_prompt = json_prompt
        self.temperature = temperature
        self.generation_kwargs = generation_kwargs
        self.max_retries = max_retries
        self.timeout = timeout
        self.default_top_k = default_top_k
        self.max_top_k = max_top_k
        self.strict = strict
        self.chunk_preview_chars = chunk_preview_chars
        if context_budget_tokens < 256:
            raise ValueError(f"context_budget_tokens must be at least 256, got {context_budget_tokens}")
        self.context_budget_tokens = context_budget_tokens
        self._user_tools = {t.name: t for t in user_tools}
        self._all_tools = [*_builtin_tools(max_top_k), *user_tools]

    def warm_up(self) -> None:
        """Warm up the chat generator (and user tools that need it)."""
        warm_up_generator(self.chat_generator)
        for tool in self._user_tools.values():
            if hasattr(tool, "warm_up"):
                tool.warm_up()

    @component.output_types(
        query=str, filters=dict[str, Any] | None, top_k=int, loop=LoopState, answer=LoopState, finished=LoopState
    )
    def run(self, state: LoopState) -> dict[str, Any]:
        """
        Take one turn of the loop.

        :param state: The run's state from the controller.
        :returns: Exactly one route:
            - search: `query` (str), `filters` (dict or None), `top_k` (int) for the retriever, and `loop`
              (LoopState with the pending search) for the controller;
            - another turn without a search: `loop`;
            - answer or reflect: `answer` (LoopState with `pending_action`);
            - the end: `finished` (LoopState with `terminated_by` set: `gave_up` or `error`).
        :raises ValueError: In json mode with `strict=True`, when the reply is not a valid decision.
        """
        prepared = self._prepare(state)
        if isinstance(prepared, dict):
            return prepared
        state, messages, tools = prepared
        call = call_generator(
            self.chat_generator,
            state,
            "controller",
            messages,
            temperature=self.temperature,
            generation_kwargs=self.generation_kwargs,
            max_retries=self.max_retries,
            timeout=self.timeout,
            tools=tools,
        )
        return self._route(call)

    @component.output_types(
        query=str, filters=dict[str, Any] | None, top_k=int, loop=LoopState, answer=LoopState, finished=LoopState
    )
    async def run_async(self, state: LoopState) -> dict[str, Any]:
        """
        Async twin of `run`: awaits the chat generator's `run_async` when it has one.

        :param state: The run's state from the controller.
        :returns: The same routes as `run`.
        """
        prepared = self._prepare(state)
        if isinstance(prepared, dict):
            return prepared
        state, messages, tools = prepared
        call = await call_generator_async(
            self.chat_generator,
            state,
            "controller",
            messages,
            temperature=self.temperature,
            generation_kwargs=self.generation_kwargs,
            max_retries=self.max_retries,
            timeout=self.timeout,
            tools=tools,
        )
        return self._route(call)

    # --- preparing the call -------------------------------------------------------------------------------

    def _prepare(self, state: LoopState) -> dict[str, Any] | tuple[LoopState, list[ChatMessage], Any]:
        """Return an early route, or (state, messages, tools) for the LLM call."""
        if self.mode == "json":
            if state.is_last_iteration:
                turn = state.iteration + 1
                step = ToolStep(iteration=turn, action="generate", result="last iteration: generate without a call")
                return trace_turn(
                    "AgenticRouter",
                    count_final_turn({"answer": state.with_step(step).evolve(pending_action="answer")}, turn),
                )
            prompt = render(
                self.json_prompt or DEFAULT_JSON_PROMPT,
                question=state.question,
                # Half the budget for the chunks leaves room for the question, the history and the reply.
                chunks=format_chunks(state.chunks, self.chunk_preview_chars, self.context_budget_tokens // 2),
                history=state.tool_history,
                draft=state.draft,
                iteration=state.iteration + 1,
                max_iterations=state.max_iterations,
                refusal=refusal_note(state),
            )
            return state, [ChatMessage.from_user(prompt)], None
        state = with_refusal_feedback(state)  # an answer the evidence check refused: tell the model why
        if not state.messages:
            system = render(
                self.system_prompt or DEFAULT_TOOLS_SYSTEM_PROMPT,
                question=state.question,
                max_iterations=state.max_iterations,
                user_tools=list(self._user_tools),
            )
            state = state.with_messages(ChatMessage.from_system(system), ChatMessage.from_user(state.question))
        return state, compact_messages(state.messages, self.context_budget_tokens, self._all_tools), self._all_tools

    # --- routing the reply --------------------------------------------------------------------------------

    def _route(self, call: LLMCall) -> dict[str, Any]:
        state = call.state
        turn = state.iteration + 1
        if call.error is not None:
            step = ToolStep(iteration=turn, action="error", result=describe_error(call.error))
            routed = {"finished": state.with_step(step).finish("error", error=describe_error(call.error))}
        elif self.mode == "json":
            routed = self._route_json(state, call, turn)
        else:
            routed = self._route_tools(state, call, turn)
        return trace_turn("AgenticRouter", count_final_turn(routed, turn))

    def _route_json(self, state: LoopState, call: LLMCall, turn: int) -> dict[str, Any]:
        decision = parse_json_decision(call.text)
        action = str(decision.get("action", "")).strip().lower() if decision else ""
        reasoning = decision.get("reasoning") if decision else None
        reasoning = reasoning if isinstance(reasoning, str) else None
        if action not in _JSON_ACTIONS:
            problem = "no JSON object with an 'action'" if decision is None else f"unknown action {action!r}"
            if self.strict:
                raise ValueError(f"AgenticRouter (json mode, strict) got {problem} in the reply: {call.text!r}")
            logger.warning("Invalid json-mode decision ({problem}); going on to the next turn", problem=problem)
            step = ToolStep(iteration=turn, action="invalid", arguments=decision or {}, result=problem)
            return {"loop": state.with_step(step)}
        if action == "search":
            query = decision.get("query") if isinstance(decision.get("query"), str) else ""
            query = query.strip() or (state.question if state.question not in state.queries_tried else "")
            query = query or (reasoning or "").strip()
            if not query:
                step = ToolStep(iteration=turn, action="invalid", arguments=decision, result="search without query")
                return {"loop": state.with_step(step)}
            if state.already_searched(query):
                step = ToolStep(
                    iteration=turn,
                    action="invalid",
                    query=query,
                    arguments=decision,
                    reasoning=reasoning,
                    result=f'already searched for "{query}"',
                )
                return {"loop": state.with_step(step)}
            return self._search(state, turn, query, self.default_top_k, None, decision, reasoning)
        if action == "reflect" and not state.draft:
            # Nothing to reflect on yet: the answerer writes a first draft instead.
            pending = "draft"
        else:
            pending = "reflect" if action == "reflect" else "answer"
        step = ToolStep(iteration=turn, action=action, arguments=decision, reasoning=reasoning)
        return {"answer": state.with_step(step).evolve(pending_action=pending)}

    def _route_tools(self, state: LoopState, call: LLMCall, turn: int) -> dict[str, Any]:
        reply = call.replies[0] if call.replies else None
        tool_calls = list(reply.tool_calls) if reply is not None else []
        text = call.text
        if reply is not None:
            state = state.with_messages(reply)
        if not tool_calls:
            if text:
                step = ToolStep(iteration=turn, action="answer", result="plain-text reply", reasoning=None)
                return {"answer": state.with_step(step).evolve(draft=text, pending_action="answer")}
            if reply is None:
                state = state.with_messages(ChatMessage.from_assistant(""))
            # Reasoning models may think without a final text: that is an empty reply too.
            thought = reply.reasoning.reasoning_text if reply is not None and reply.reasoning else None
            return self._empty_reply(state, turn, "empty reply" + (" (reasoning only)" if thought else ""), None)

        search: tuple[ToolCall, str, int, dict[str, Any]] | None = None
        for tool_call in tool_calls:
            name = tool_call.tool_name
            try:
                arguments = _parse_arguments(tool_call)
                if name == ANSWER_TOOL_NAME:
                    if isinstance(arguments.get("text"), str) and not arguments["text"].strip():
                        # A blank answer is an empty reply: it counts towards the nudge-once limit.
                        problem = "'text' is required and must be a non-empty string (blank answer)"
                        return self._empty_reply(state, turn, f"Error in answer: {problem}.", tool_call)
                    answer = _required_text(arguments, "text")
                    step = ToolStep(iteration=turn, action="answer", tool_name=name, arguments=arguments)
                    return {"answer": state.with_step(step).evolve(draft=answer, pending_action="answer")}
                if name == GIVE_UP_TOOL_NAME:
                    reason = _required_text(arguments, "reason")
                    step = ToolStep(iteration=turn, action="give_up", tool_name=name, arguments=arguments)
                    answer = f"I could not find an answer: {reason}"
                    return {"finished": state.with_step(step).finish("gave_up", answer=answer)}
                if name == SEARCH_TOOL_NAME:
                    query = _required_text(arguments, "query")
                    top_k = self._top_k(arguments.get("top_k"))
                    if search is not None:
                        raise _InvalidArguments("only one search runs per turn; search again next turn")
                    if state.already_searched(query):
                        message = (
                            f'You already searched for "{query}"; its chunks are above. '
                            "Search for something else, or answer."
                        )
                        state = state.with_messages(ChatMessage.from_tool(message, origin=tool_call))
                        state = state.with_step(
                            ToolStep(turn, "invalid", query=query, tool_name=name, arguments=arguments, result=message)
                        )
                        continue
                    search = (tool_call, query, top_k, arguments)
                    continue
                if name in self._user_tools:
                    state = self._invoke_user_tool(state, turn, tool_call, arguments)
                    continue
                known = ", ".join([*_BUILTIN_TOOL_NAMES, *self._user_tools])
                raise _InvalidArguments(f"unknown tool '{name}'; the tools are: {known}")
            except _InvalidArguments as exc:
                message = f"Error in {name}: {exc}."
                state = state.with_messages(ChatMessage.from_tool(message, origin=tool_call, error=True))
                state = state.with_step(
                    ToolStep(turn, "invalid", tool_name=name, arguments=_safe_arguments(tool_call), result=message)
                )
        if search is not None:
            tool_call, query, top_k, arguments = search
            return self._search(state, turn, query, top_k, tool_call, arguments, None)
        return {"loop": state}

    @staticmethod
    def _empty_reply(state: LoopState, turn: int, what: str, tool_call: ToolCall | None) -> dict[str, Any]:
        """An empty reply or a blank answer is never an answer: nudge the model once, then go to the fallback."""
        state = state.evolve(empty_replies=state.empty_replies + 1)
        step = ToolStep(
            iteration=turn,
            action="invalid",
            tool_name=tool_call.tool_name if tool_call else None,
            arguments=_safe_arguments(tool_call) if tool_call else {},
            result=what,
        )
        state = state.with_step(step)
        if tool_call is not None:
            state = state.with_messages(ChatMessage.from_tool(what, origin=tool_call, error=True))
        if state.empty_replies > 1:
            logger.warning("The controller LLM replied with nothing twice; handing over to the fallback.")
            return {"loop": state.evolve(stop_reason=f"controller LLM gave no usable reply twice ({what})")}
        if tool_call is not None:  # the tool error above is the nudge
            return {"loop": state}
        return {"loop": state.with_messages(ChatMessage.from_user(_EMPTY_REPLY_NUDGE))}

    def _top_k(self, value: Any) -> int:
        if value is None:
            return self.default_top_k
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise _InvalidArguments(f"'top_k' must be an integer from 1 to {self.max_top_k}")
        try:
            top_k = int(value)
        except ValueError as exc:
            raise _InvalidArguments(f"'top_k' must be an integer from 1 to {self.max_top_k}") from exc
        return max(1, min(self.max_top_k, top_k))

    def _search(
        self,
        state: LoopState,
        turn: int,
        query: str,
        top_k: int,
        tool_call: ToolCall | None,
        arguments: dict[str, Any],
        reasoning: str | None,
    ) -> dict[str, Any]:
        filters = dict(state.filters) if state.filters else None
        step = ToolStep(
            iteration=turn,
            action="search",
            query=query,
            tool_name=tool_call.tool_name if tool_call else None,
            arguments=arguments,
            reasoning=reasoning,
        )
        state = state.with_step(step).evolve(
            pending=PendingSearch(query=query, top_k=top_k, filters=filters, tool_call=tool_call),
            queries_tried=(*state.queries_tried, query),
        )
        return {"query": query, "filters": filters, "top_k": top_k, "loop": state}

    def _invoke_user_tool(
        self, state: LoopState, turn: int, tool_call: ToolCall, arguments: dict[str, Any]
    ) -> LoopState:
        tool = self._user_tools[tool_call.tool_name]
        try:
            result = tool.invoke(**arguments)
            text = result if isinstance(result, str) else json.dumps(result, default=str)
            error = False
        except Exception as exc:  # noqa: BLE001 - a failing user tool is reported to the model
            text, error = f"Error in {tool.name}: {describe_error(exc)}", True
        step = ToolStep(turn, "tool", tool_name=tool.name, arguments=arguments, result=text)
        return state.with_step(step).with_messages(ChatMessage.from_tool(text, origin=tool_call, error=error))

    # --- serialisation ------------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """
        Serialize the component to a dictionary.

        :returns: Dictionary with serialized data.
        """
        return default_to_dict(
            self,
            chat_generator=generator_to_dict(self.chat_generator),
            mode=self.mode,
            tools=serialize_tools_or_toolset(self.tools),
            system_prompt=self.system_prompt,
            json_prompt=self.json_prompt,
            temperature=self.temperature,
            generation_kwargs=self.generation_kwargs,
            max_retries=self.max_retries,
            timeout=self.timeout,
            default_top_k=self.default_top_k,
            max_top_k=self.max_top_k,
            strict=self.strict,
            chunk_preview_chars=self.chunk_preview_chars,
            context_budget_tokens=self.context_budget_tokens,
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "AgenticRouter":
        """
        Deserialize the component from a dictionary.

        :param data: Dictionary to deserialize from.
        :returns: The component.
        """
        init_params = data.get("init_parameters", {})
        generator_from_dict_inplace(init_params)
        deserialize_tools_or_toolset_inplace(init_params, key="tools")
        return default_from_dict(cls, data)


def count_final_turn(routed: dict[str, Any], turn: int) -> dict[str, Any]:
    """
    Count the router's turn in `iteration` when it leaves the loop for good.

    The controller counts a turn when the state comes back around the loop. A turn that ends the run (an answer,
    a give-up, an error) never comes back, so the router counts it here; reflect and draft turns come back
    through the answerer and are counted by the controller.

    :param routed: The router's output dict.
    :param turn: The 1-based turn just taken.
    :returns: The output dict, with the leaving state's `iteration` set to `turn`.
    """
    for socket in ("answer", "finished"):
        state = routed.get(socket)
        if state is not None and (socket == "finished" or state.pending_action == "answer"):
            routed[socket] = state.evolve(iteration=max(state.iteration, turn))
    return routed


def _safe_arguments(tool_call: ToolCall) -> dict[str, Any]:
    arguments = tool_call.arguments
    return arguments if isinstance(arguments, dict) else {"raw": arguments}
