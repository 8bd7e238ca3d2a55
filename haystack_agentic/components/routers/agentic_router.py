# SPDX-License-Identifier: Apache-2.0

from typing import Any, Literal

from haystack import component, default_from_dict, logging
from haystack.components.generators.chat.types import ChatGenerator
from haystack.dataclasses import StreamingCallbackT
from haystack.tools import (
    ToolsType,
    deserialize_tools_or_toolset_inplace,
    flatten_tools_or_toolsets,
    serialize_tools_or_toolset,
)

# The prompts, parse_json_decision and count_final_turn are public names of this module too.
from haystack_agentic.components.routers._call_preparation import (  # noqa: F401
    DEFAULT_CONTEXT_BUDGET_TOKENS,
    DEFAULT_JSON_PROMPT,
    DEFAULT_TOOLS_SYSTEM_PROMPT,
    _CallPreparation,
    _refused,
    count_final_turn,
)
from haystack_agentic.components.routers._json_decision import parse_json_decision  # noqa: F401
from haystack_agentic.components.routers._reply_routing import _ReplyRouting
from haystack_agentic.components.routers._tool_arguments import _BUILTIN_TOOL_NAMES, _builtin_tools
from haystack_agentic.llm.calls import (
    LLMCall,
    call_generator,
    call_generator_async,
    describe_error,
    role_options,
)
from haystack_agentic.llm.streaming import (
    emit,
    emit_async,
    pick_callback,
    role_callback,
    role_callback_async,
    routed_state,
    step_chunks,
)
from haystack_agentic.llm.generator_checks import check_chat_generator
from haystack_agentic.llm.retries import DEFAULT_MAX_RETRIES
from haystack_agentic.llm.serialization import generator_from_dict_inplace, role_to_dict, warm_up_generator
from haystack_agentic.tracing import iteration_span, trace_turn
from haystack_agentic.dataclasses.loop_state import LoopState, ToolStep

logger = logging.getLogger(__name__)


@component
class AgenticRouter(_CallPreparation, _ReplyRouting):
    """
    Decides each turn of the agentic loop with one LLM call: search again, reflect, answer, or give up.

    It routes the `LoopState` to exactly one path: a search (`query`, `filters`, `top_k` to the retriever and
    `loop` back to the controller), another turn without a search (`loop`), the answerer (`answer`), or the end
    (`finished`, for give-up and generator errors).

    - `mode="tools"`: native tool calling with `search(query, top_k?)`, `answer(text, sources?)`, `give_up(reason)`,
      `read_chunk(id)` and any user `tools`. Every call of a reply runs and its result goes back in call order:
      searches one after another through the pipeline's retriever, user tools inline with Haystack's tool
      invocation (their Documents join the run's chunks). `answer` or `give_up` ends the turn; `answer`'s
      `sources` become the answer's citations. Unknown tools and bad arguments go back to the model as tool
      errors. A reply with text and no tool call is an answer; an empty reply is not.
    - `mode="json"`: for models without tool calling, each turn the model replies
      `{"action": "search|reflect|generate", "reasoning": ..., "query": ...}`, parsed leniently. An invalid reply
      is recorded as an `invalid` step (or raises `ValueError` with `strict=True`).

    A generator exception ends the run with `terminated_by="error"`. When the `EvidenceChecker` refuses an answer,
    the next turn tells the model why.

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
        streaming_callback: StreamingCallbackT | None = None,
        result_digests: bool = True,
        structured_output: bool = True,
    ) -> None:
        """
        Create an AgenticRouter.

        :param chat_generator: Any Haystack chat generator (the controller LLM); with tool calling in `tools` mode.
        :param mode: `"tools"` (native tool calling) or `"json"` (the JSON routing protocol).
        :param tools: Extra Haystack tools the model may call in `tools` mode (not named `search`, `answer`,
            `give_up` or `read_chunk`); Documents they return join the run's chunks.
        :param system_prompt: Jinja template replacing `DEFAULT_TOOLS_SYSTEM_PROMPT` (tools mode).
        :param json_prompt: Jinja template replacing `DEFAULT_JSON_PROMPT` (json mode).
        :param temperature: Sampling temperature of the controller role (`None`: the generator's default).
        :param generation_kwargs: Extra generation kwargs for every controller call.
        :param default_top_k: Chunks per search when the model gives no `top_k`. Default 5.
        :param max_top_k: Upper bound on a model-chosen `top_k`. Default 20.
        :param strict: In json mode, raise `ValueError` on a reply that is not a valid decision. Default `False`.
        :param chunk_preview_chars: Most characters of each chunk in the json-mode prompt. Default 600.
        :param context_budget_tokens: Most prompt tokens of one controller call, counted with the model's tokenizer
            when known, else a conservative estimate (`haystack_agentic.llm.tokens`); older results are compacted,
            then the lowest-ranked chunks left out. Default 16000.
        :param max_retries: Retries of a transient LLM failure (timeout, connection error, HTTP 429/5xx). Default 2.
        :param timeout: Seconds one LLM call may take (`None`: no limit).
        :param streaming_callback: Called with each `StreamingChunk` of the controller's calls (role `controller`)
            and a step event per recorded step; the `streaming_callback` run input wins over it.
        :param result_digests: Tools mode: send search results older than the latest reply as digests (ids, titles,
            first words; the model reads a chunk with `read_chunk(id)`). Default `True`.
        :param structured_output: Json mode with an OpenAI-compatible generator: send the decision's JSON schema as
            `response_format`; a server that refuses it gets the request again without it, for the rest of the run.
            Default `True`.
        :raises ValueError: On an unknown mode, a user tool named like a built-in tool, or bad top_k bounds.
        :raises TypeError: If `chat_generator` is not a chat generator, or in tools mode takes no `tools`.
        """
        if mode not in ("tools", "json"):
            raise ValueError(f"mode must be 'tools' or 'json', got {mode!r}")
        check_chat_generator(chat_generator, "AgenticRouter(chat_generator=...)", needs_tools=mode == "tools")
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
        self.streaming_callback = streaming_callback
        self.result_digests = result_digests
        self.structured_output = structured_output
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
        """Warm up the chat generator (and user tools that need it), and find how to count its tokens."""
        warm_up_generator(self.chat_generator)
        self._token_counter()  # loads a tiktoken encoding now, if one applies, rather than in the first turn
        for tool in self._user_tools.values():
            if hasattr(tool, "warm_up"):
                tool.warm_up()

    @component.output_types(
        query=str, filters=dict[str, Any] | None, top_k=int, loop=LoopState, answer=LoopState, finished=LoopState
    )
    def run(self, state: LoopState, streaming_callback: StreamingCallbackT | None = None) -> dict[str, Any]:
        """
        Take one turn of the loop.

        :param state: The run's state from the controller.
        :param streaming_callback: A sync callback for this turn's chunks and step events (wins over the init
            parameter).
        :returns: Exactly one route:
            - search: `query` (str), `filters` (dict or None), `top_k` (int) for the retriever, and `loop`
              (LoopState with the pending search) for the controller; a reply's further searches wait in
              `state.queued` and go out on the next visits without an LLM call;
            - another turn without a search: `loop`;
            - answer or reflect: `answer` (LoopState with `pending_action`);
            - the end: `finished` (LoopState with `terminated_by` set: `gave_up` or `error`).
        :raises ValueError: In json mode with `strict=True`, when the reply is not a valid decision; if the callback
            is an async function (use `run_async`).
        """
        callback = pick_callback(self.streaming_callback, streaming_callback, is_async=False)
        if state.queued:
            routed = self._dispatch_queued(state)
            emit(callback, step_chunks(state, routed_state(routed)))
            return routed
        with iteration_span(state) as turn_state:  # the turn's span: its LLM call and user tools nest under it
            prepared = self._prepare(turn_state)
            if isinstance(prepared, dict):
                emit(callback, step_chunks(state, routed_state(prepared)))
                return prepared
            started, messages, tools = prepared
            stream = role_callback(callback, "controller", answer=False)
            options = self._call_options(started)
            call = call_generator(
                self.chat_generator, started, "controller", messages, tools=tools, **options, streaming_callback=stream
            )
            if self._without_response_format(call, options):
                call = call_generator(
                    self.chat_generator, _refused(call.state), "controller", messages, tools=tools,
                    **role_options(self), streaming_callback=stream,
                )  # fmt: skip
            routed = self._route(call)
        emit(callback, step_chunks(state, routed_state(routed)))
        return routed

    @component.output_types(
        query=str, filters=dict[str, Any] | None, top_k=int, loop=LoopState, answer=LoopState, finished=LoopState
    )
    async def run_async(self, state: LoopState, streaming_callback: StreamingCallbackT | None = None) -> dict[str, Any]:
        """Async twin of `run`: awaits the chat generator's `run_async`; the callback may be sync or async."""
        callback = pick_callback(self.streaming_callback, streaming_callback, is_async=True)
        if state.queued:
            routed = self._dispatch_queued(state)
            await emit_async(callback, step_chunks(state, routed_state(routed)))
            return routed
        with iteration_span(state) as turn_state:  # the turn's span: its LLM call and user tools nest under it
            prepared = self._prepare(turn_state)
            if isinstance(prepared, dict):
                await emit_async(callback, step_chunks(state, routed_state(prepared)))
                return prepared
            started, messages, tools = prepared
            stream = role_callback_async(callback, "controller", answer=False)
            options = self._call_options(started)
            call = await call_generator_async(
                self.chat_generator, started, "controller", messages, tools=tools, **options, streaming_callback=stream
            )
            if self._without_response_format(call, options):
                call = await call_generator_async(
                    self.chat_generator, _refused(call.state), "controller", messages, tools=tools,
                    **role_options(self), streaming_callback=stream,
                )  # fmt: skip
            routed = self._route(call)
        await emit_async(callback, step_chunks(state, routed_state(routed)))
        return routed

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

    def to_dict(self) -> dict[str, Any]:
        """Serialize the component to a dictionary."""
        data = role_to_dict(
            self, "mode", "json_prompt", "default_top_k", "max_top_k", "strict", "chunk_preview_chars",
            "result_digests", "structured_output",
        )  # fmt: skip
        data["init_parameters"]["tools"] = serialize_tools_or_toolset(self.tools)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "AgenticRouter":
        """Deserialize the component from a dictionary."""
        init_params = data.get("init_parameters", {})
        generator_from_dict_inplace(init_params)
        deserialize_tools_or_toolset_inplace(init_params, key="tools")
        return default_from_dict(cls, data)
