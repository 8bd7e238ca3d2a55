# SPDX-License-Identifier: Apache-2.0

"""How AgenticRouter prepares the controller's call: its prompts, the messages and tools of a turn, the options."""

from typing import Any

from haystack import logging
from haystack.dataclasses import ChatMessage

from haystack_agentic.components.routers._json_decision import STRUCTURED_OUTPUT_REFUSED, decision_response_format
from haystack_agentic.components.routers._tool_arguments import _builtin_tools
from haystack_agentic.dataclasses.loop_state import LoopState, ToolStep
from haystack_agentic.evidence.feedback import refusal_note, with_refusal_feedback
from haystack_agentic.llm.calls import CallOptions, LLMCall, role_options, sends_openai_requests
from haystack_agentic.llm.prompts import fit_turns, format_chunks, render
from haystack_agentic.llm.result_digests import digest_older_results
from haystack_agentic.llm.retries import refuses_response_format
from haystack_agentic.llm.tokens import TokenCounter, compact_messages, token_counter_for
from haystack_agentic.tracing import trace_turn

logger = logging.getLogger(__name__)

#: System prompt of the controller LLM in `tools` mode. Variables: `question`, `max_iterations`, `user_tools`.
DEFAULT_TOOLS_SYSTEM_PROMPT = """\
You answer questions from a document collection that you can only see by searching it.
Tools:
- search(query, top_k): find chunks about one thing. For a question with several hops, search the first fact,
  read the result, then search the entity it leads to (the bridge) for the next fact.
- answer(text, sources): give the final answer when the chunks found support it. Be short and specific. In
  sources, list the ids (id=...) of the chunks the answer rests on.
- give_up(reason?): say why, when the collection does not hold the answer after a few different searches.
- read_chunk(id): the full text of a chunk found earlier (older results are shortened to ids and titles).
{% if user_tools %}
Other tools: {{ user_tools | join(", ") }}.
{% endif %}
Use only facts from search results. You have at most {{ max_iterations }} turns; searches for independent facts can
go in one turn (several search calls), a search that needs an earlier result waits for it.
"""

#: Prompt of the controller LLM in `json` mode, sent fresh each turn. Variables: `question`, `chunks`,
#: `history`, `draft`, `iteration`, `max_iterations`, `refusal` (why the evidence check refused the last answer),
#: `collections` (name -> description of the collections in the run's scope, or None).
DEFAULT_JSON_PROMPT = """\
You decide the next step of a search for the answer to a question.
Question: {{ question }}
Turn {{ iteration }} of {{ max_iterations }}.
{% if history %}
Steps so far:
{% for step in history %}
- {{ step.action }}{% if step.query %}: "{{ step.query }}" ({{ step.returned_chunk_ids | length }} chunks){% endif %}\
{% if step.action == "invalid" and step.result %} ({{ step.result }}){% endif %}
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
{% if collections %}
Collections you may search (add "collection": "<name>" to a search to search only that one; leave it out to search all):
{% for name, description in collections.items() %}
- {{ name }}{% if description %}: {{ description }}{% endif %}
{% endfor %}
{% endif %}
Reply with one JSON object and nothing else, with these keys:
- "action": "search" to look something up, "reflect" to check the draft, or "generate" when the chunks answer the
  question;
- "query": for a search, a few words naming the one fact or entity to look up next, taken from the question or the
  chunks (not a sentence about searching); otherwise "";
- "reasoning": one short sentence on why.
"""

#: Default most prompt tokens of one controller call.
DEFAULT_CONTEXT_BUDGET_TOKENS = 16000


class _CallPreparation:
    """`AgenticRouter`'s call preparation (a mixin using its mode, generator, prompts, budget and tools)."""

    def _call_options(self, state: LoopState) -> CallOptions:
        """The role's call options, with the decision's `response_format` in json mode with structured output."""
        options = role_options(self)
        if (
            self.mode == "json"
            and self.structured_output
            and sends_openai_requests(self.chat_generator)
            and not (state.metadata or {}).get(STRUCTURED_OUTPUT_REFUSED)
        ):
            response_format = decision_response_format(state.collections)
            options["generation_kwargs"] = {**(self.generation_kwargs or {}), "response_format": response_format}
        return options

    @staticmethod
    def _without_response_format(call: LLMCall, options: CallOptions) -> bool:
        """Whether the call sent `response_format` and the server refused it."""
        sent = "response_format" in (options.get("generation_kwargs") or {})
        if sent and call.error is not None and refuses_response_format(call.error):
            logger.warning(
                "The server refused response_format ({error}); this run's decisions are sent without it.",
                error=repr(call.error),
            )
            return True
        return False

    def _token_counter(self) -> TokenCounter:
        """The controller model's tokenizer when known (after warm-up), else a conservative estimate."""
        return token_counter_for(self.chat_generator)

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
                chunks=format_chunks(
                    state.chunks, self.chunk_preview_chars, self.context_budget_tokens // 2, self._token_counter()
                ),
                history=state.tool_history,
                draft=state.draft,
                iteration=state.iteration + 1,
                max_iterations=state.limits.max_iterations,
                refusal=refusal_note(state),
                collections=state.collections,
            )
            # A quarter of the budget for the conversation's earlier turns (the chunks take half).
            earlier = fit_turns(state.conversation[:-1], self.context_budget_tokens // 4, self._token_counter())
            return state, [*earlier, ChatMessage.from_user(prompt)], None
        state = with_refusal_feedback(state)  # an answer the evidence check refused: tell the model why
        if not state.messages:
            system = render(
                self.system_prompt or DEFAULT_TOOLS_SYSTEM_PROMPT,
                question=state.question,
                max_iterations=state.limits.max_iterations,
                user_tools=list(self._user_tools),
            )
            # The run's starting conversation (its oldest turns left out beyond half the budget), else the question.
            earlier = fit_turns(state.conversation[:-1], self.context_budget_tokens // 2, self._token_counter())
            conversation = (*earlier, *state.conversation[-1:]) or (ChatMessage.from_user(state.question),)
            state = state.with_messages(ChatMessage.from_system(system), *conversation)
        tools = self._tools_for(state)
        sent = digest_older_results(state.messages) if self.result_digests else state.messages
        messages = compact_messages(sent, self.context_budget_tokens, tools, self._token_counter())
        return state, messages, tools

    def _tools_for(self, state: LoopState) -> list[Any]:
        """The tools of this run: `search` gets a `collection` argument when the run is scoped to collections."""
        if not state.collections:
            return self._all_tools
        return [*_builtin_tools(self.max_top_k, state.collections), *self._user_tools.values()]


def _refused(state: LoopState) -> LoopState:
    """The state noting that the server refused `response_format` (the run's later decisions go without it)."""
    return state.evolve(metadata={**(state.metadata or {}), STRUCTURED_OUTPUT_REFUSED: True})


def count_final_turn(routed: dict[str, Any], turn: int) -> dict[str, Any]:
    """
    Count the router's turn in `iteration` when it leaves the loop for good (an answer, a give-up, an error): the
    controller counts only the turns that come back around the loop.

    :param routed: The router's output dict.
    :param turn: The 1-based turn just taken.
    :returns: The output dict, with the leaving state's `iteration` set to `turn`.
    """
    for socket in ("answer", "finished"):
        state = routed.get(socket)
        if state is not None and (socket == "finished" or state.pending_action == "answer"):
            routed[socket] = state.evolve(iteration=max(state.iteration, turn))
    return routed
