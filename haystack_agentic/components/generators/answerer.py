# SPDX-License-Identifier: Apache-2.0

import re
from typing import Any

from haystack import Document, component, logging
from haystack.components.generators.chat.types import ChatGenerator
from haystack.dataclasses import ChatMessage, StreamingCallbackT, StreamingChunk

from haystack_agentic.dataclasses.loop_state import LoopState, ToolStep
from haystack_agentic.grounding.citations import cite, draft_sources
from haystack_agentic.grounding.markers import has_own_words, strip_markers
from haystack_agentic.llm.calls import call_generator, call_generator_async, describe_error, role_options
from haystack_agentic.llm.prompts import format_chunks, render, role_messages
from haystack_agentic.llm.refused_turns import FORCED_AT_CAP
from haystack_agentic.llm.retries import DEFAULT_MAX_RETRIES
from haystack_agentic.llm.serialization import role_from_dict, role_to_dict, warm_up_generator
from haystack_agentic.llm.streaming import (
    AnswerTextHold,
    emit,
    emit_async,
    pick_callback,
    role_callback,
    role_callback_async,
    routed_state,
    step_chunks,
)
from haystack_agentic.llm.tokens import token_counter_for

logger = logging.getLogger(__name__)

#: The answer role's system message when `system_prompt` is not given (the short-answer instruction that small
#: models follow best where it opens the conversation).
DEFAULT_ANSWER_SYSTEM_PROMPT = (
    "You answer questions from documents. Give the shortest possible answer, a few words, no explanation."
)

#: Rewrites the controller's draft into the final answer. Variables: `question`, `draft`, `chunks` (one line per
#: chunk) and `chunk_blocks` (a `[n] title` line, then the text; see `format_chunks`). The answer is written in words;
#: its `[n]` citations are added afterwards from the chunks that support it.
DEFAULT_ANSWER_PROMPT = """\
Documents:
{{ chunk_blocks }}

Question: {{ question }}
Draft answer: {{ draft }}
Correct the draft where the documents say otherwise, and keep only what they support.
Answer with a short phrase (a name, place, date or number), nothing else."""

#: Writes the answer from the chunks. Variables: `question`, `chunks`, `chunk_blocks`. The answer is written in words;
#: its `[n]` citations are added afterwards from the chunks that support it.
DEFAULT_GENERATE_PROMPT = """\
Documents:
{{ chunk_blocks }}

Question: {{ question }}
Answer with a short phrase (a name, place, date or number), nothing else."""

#: Critique and improve the draft (json mode `reflect`). Variables: `question`, `draft`, `chunks`.
DEFAULT_REFLECT_PROMPT = """\
Check the draft answer against the context: is each claim supported, and does it answer the question?
Write a one-line critique, then the improved answer on a line starting with "Improved answer:".

Context:
{{ chunks }}

Question: {{ question }}
Draft answer: {{ draft }}"""

_IMPROVED = re.compile(r"improved answer\s*:\s*(.*)", flags=re.IGNORECASE | re.DOTALL)


@component
class Answerer:
    """
    The answer role of the agentic loop: the final answer, and json mode's reflect and draft steps.

    Writes the final answer of the agentic loop in words (cited from the chunks that support it, or by the draft's
    `sources`), and the json mode's `reflect` (critique + improve) and `draft` steps.

    ### Usage example
    ```python
    from haystack.components.generators.chat import OpenAIChatGenerator
    from haystack_agentic import Answerer

    answerer = Answerer(chat_generator=OpenAIChatGenerator(model="gpt-4o-mini"), temperature=0.0)
    ```
    """

    def __init__(
        self,
        chat_generator: ChatGenerator | None = None,
        temperature: float | None = None,
        generation_kwargs: dict[str, Any] | None = None,
        system_prompt: str | None = None,
        answer_prompt: str | None = None,
        generate_prompt: str | None = None,
        reflect_prompt: str | None = None,
        max_chunks: int = 6,
        chunk_chars: int = 1200,
        chunks_per_search: int | None = None,
        context_budget_tokens: int | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
        timeout: float | None = None,
        streaming_callback: StreamingCallbackT | None = None,
        stream_answer: bool = True,
    ) -> None:
        """
        Create an Answerer.

        :param chat_generator: The answer LLM (any Haystack chat generator). `None`: drafts are kept as they are;
            answers that must be written from chunks end the run with an error saying a generator is needed.
        :param temperature: Sampling temperature of the answer role (`None`: the generator's default).
        :param generation_kwargs: Extra generation kwargs for every answer call.
        :param system_prompt: The system message (Jinja, variable `question`) sent before every prompt. `None`
            (default): `DEFAULT_ANSWER_SYSTEM_PROMPT` for the answer (none for `reflect`); `""`: none.
        :param answer_prompt: Jinja template replacing `DEFAULT_ANSWER_PROMPT` (draft rewrite).
        :param generate_prompt: Jinja template replacing `DEFAULT_GENERATE_PROMPT` (answer from chunks).
        :param reflect_prompt: Jinja template replacing `DEFAULT_REFLECT_PROMPT` (critique + improve).
        :param max_chunks: Most chunks (best first) put into a prompt. Default 6.
        :param chunk_chars: Most characters of each chunk in a prompt. Default 1200.
        :param chunks_per_search: `None` (default): the run's best `max_chunks` chunks by score. N: the best N of
            each search, in search order (at most `max_chunks`), so every hop's evidence is in the prompt.
        :param context_budget_tokens: Most tokens of the chunks in a prompt (`llm.tokens.token_counter_for`); the
            lowest-ranked chunks are left out first. `None` (default): `max_chunks` x `chunk_chars` bounds it.
        :param max_retries: Retries of a transient LLM failure (timeout, connection, HTTP 429/5xx). Default 2.
        :param timeout: Seconds one LLM call may take (`None`: no limit); a timeout counts as transient.
        :param streaming_callback: Called with each `StreamingChunk` of the answer calls, tagged with their role
            (`answer`; `draft`, `reflect`: not the answer), and with step events. The run input wins over it.
        :param stream_answer: `True` (default): the final answer's tokens stream tagged as the answer, as the final
            answer reads them (the model's own `[n]` markers left out), then the loop's citation markers. `False`
            (before a `ShortAnswerExtractor`, which streams the answer): untagged.
        :raises ValueError: If `max_chunks`, `chunk_chars` or `chunks_per_search` is below 1.
        """
        if max_chunks < 1 or chunk_chars < 1 or (chunks_per_search is not None and chunks_per_search < 1):
            msg = "max_chunks, chunk_chars and chunks_per_search must be at least 1"
            raise ValueError(msg)
        self.chat_generator = chat_generator
        self.temperature = temperature
        self.generation_kwargs = generation_kwargs
        self.context_budget_tokens = context_budget_tokens
        self.max_retries = max_retries
        self.timeout = timeout
        self.system_prompt = system_prompt
        self.answer_prompt = answer_prompt
        self.generate_prompt = generate_prompt
        self.reflect_prompt = reflect_prompt
        self.max_chunks = max_chunks
        self.chunk_chars = chunk_chars
        self.chunks_per_search = chunks_per_search
        self.streaming_callback = streaming_callback
        self.stream_answer = stream_answer

    def warm_up(self) -> None:
        """Warm up the answer LLM."""
        warm_up_generator(self.chat_generator)

    @component.output_types(state=LoopState, finished=LoopState)
    def run(self, state: LoopState, streaming_callback: StreamingCallbackT | None = None) -> dict[str, LoopState]:
        """
        Answer, reflect or draft, as `state.pending_action` says.

        :param state: The run's state from the router.
        :param streaming_callback: A sync callback for this run's chunks (wins over the init parameter).
        :returns: `{"finished": LoopState}` with the final answer (`answered`; `error` when an answer written from
            the chunks fails or is blank, while a failed draft rewrite keeps the draft), or `{"state": LoopState}`
            after a reflect/draft step, to go on with the loop.
        :raises ValueError: If the callback is an async function (use `run_async`).
        """
        callback = pick_callback(self.streaming_callback, streaming_callback, is_async=False)
        prepared = self._prepare(state)
        if isinstance(prepared, dict):
            return prepared
        role, final = self._role(state)
        hold = AnswerTextHold() if final and self.stream_answer else None
        options = role_options(self)
        options["streaming_callback"] = role_callback(callback, role, answer=hold is not None, hold=hold)
        call = call_generator(self.chat_generator, state, "answer", prepared, **options)
        outputs = self._complete(state, call.state, call.text, call.error)
        emit(callback, [*_answer_chunks(hold, outputs), *step_chunks(state, routed_state(outputs))])
        return outputs

    @component.output_types(state=LoopState, finished=LoopState)
    async def run_async(
        self, state: LoopState, streaming_callback: StreamingCallbackT | None = None
    ) -> dict[str, LoopState]:
        """Async twin of `run` (a sync or async callback)."""
        callback = pick_callback(self.streaming_callback, streaming_callback, is_async=True)
        prepared = self._prepare(state)
        if isinstance(prepared, dict):
            return prepared
        role, final = self._role(state)
        hold = AnswerTextHold() if final and self.stream_answer else None
        options = role_options(self)
        options["streaming_callback"] = role_callback_async(callback, role, answer=hold is not None, hold=hold)
        call = await call_generator_async(self.chat_generator, state, "answer", prepared, **options)
        outputs = self._complete(state, call.state, call.text, call.error)
        await emit_async(callback, [*_answer_chunks(hold, outputs), *step_chunks(state, routed_state(outputs))])
        return outputs

    @staticmethod
    def _role(state: LoopState) -> tuple[str, bool]:
        """The streaming role of this call, and whether its text is the final answer."""
        action = state.pending_action or "answer"
        if action == "reflect" and state.draft:
            return "reflect", False
        if action == "draft":
            return "draft", False
        return "answer", True

    def _prepare(self, state: LoopState) -> dict[str, LoopState] | list[ChatMessage]:
        action = state.pending_action or "answer"
        if self.chat_generator is None:
            if state.draft and action in ("answer", "reflect"):
                if action == "reflect":
                    return {"state": state.evolve(pending_action=None)}
                return {"finished": _kept_draft(state, state.draft)}
            error = "Answerer has no chat_generator, so it cannot write an answer from the chunks."
            return {"finished": state.finish("error", error=error)}
        system_prompt: str | None = DEFAULT_ANSWER_SYSTEM_PROMPT if self.system_prompt is None else self.system_prompt
        if action == "reflect" and state.draft:
            template, variables = self.reflect_prompt or DEFAULT_REFLECT_PROMPT, {"draft": state.draft}
            system_prompt = self.system_prompt  # a critique, not a short answer
        elif action == "answer" and state.draft:
            template, variables = self.answer_prompt or DEFAULT_ANSWER_PROMPT, {"draft": state.draft}
        else:
            template, variables = self.generate_prompt or DEFAULT_GENERATE_PROMPT, {}
        counter = token_counter_for(self.chat_generator)
        shown = prompt_chunks(state, self.max_chunks, self.chunks_per_search)
        # Each layout is counted against the budget only when the template uses it.
        layouts = {"chunks": False, "chunk_blocks": True}
        texts = {
            name: format_chunks(shown, self.chunk_chars, self.context_budget_tokens, counter, blocks=blocks)
            for name, blocks in layouts.items()
            if name in template
        }
        prompt = render(template, question=state.question, **texts, **variables)
        return role_messages(system_prompt, state.question, state.conversation, prompt, counter)

    def _complete(
        self, before: LoopState, state: LoopState, text: str, error: BaseException | None
    ) -> dict[str, LoopState]:
        action = before.pending_action or "answer"
        draft = before.draft
        # The answer in words: its markers go, the citations are found in the chunks (`cite`); no words is no answer.
        text = strip_markers(text) or ""
        text = text if has_own_words(text) else ""
        ended = "max_iterations" if (before.metadata or {}).get(FORCED_AT_CAP) else "answered"
        if action == "reflect" and draft:
            improved = None if error else _improved_answer(text)
            if error is not None:
                logger.warning("Reflect failed, keeping the draft: {error}", error=describe_error(error))
            result = text or (describe_error(error) if error else None)
            step = ToolStep(iteration=before.iteration + 1, action="reflect", result=result)
            return {"state": state.with_step(step).evolve(draft=improved or draft, pending_action=None)}
        shown = prompt_chunks(before, self.max_chunks, self.chunks_per_search)
        if action == "answer" and draft:
            if error is not None or not text:
                reason = describe_error(error) if error else "blank reply"
                logger.warning("Answer LLM failed ({reason}); keeping the controller's draft", reason=reason)
                return {"finished": _kept_draft(state, draft, ended)}
            finished = state.finish(ended, answer=text)
            return {"finished": cite(finished, text, shown=shown, cited_ids=draft_sources(before))}
        # Written from the chunks (json `generate`, a first `draft`, or a policy router's answer).
        if error is not None:
            return {"finished": state.finish("error", error=f"Answer LLM failed: {describe_error(error)}")}
        if not text:
            reason = "Answer LLM returned no answer in words (blank, or only citation markers or tool-call text)."
            return {"finished": state.finish("error", error=reason)}
        if action == "draft":
            return {"state": state.evolve(draft=text, pending_action=None)}
        return {"finished": cite(state.finish(ended, answer=text), text, shown=shown)}

    def to_dict(self) -> dict[str, Any]:
        """:returns: The component as a dictionary, its chat generator serialised (`role_to_dict`)."""
        return role_to_dict(
            self,
            "answer_prompt",
            "generate_prompt",
            "reflect_prompt",
            "max_chunks",
            "chunk_chars",
            "chunks_per_search",
            "stream_answer",
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Answerer":
        """:returns: The component from `to_dict()` output (`role_from_dict`)."""
        return role_from_dict(cls, data)


def _answer_chunks(hold: AnswerTextHold | None, outputs: dict[str, LoopState]) -> list[StreamingChunk]:
    """
    The streamed chunks that complete the final answer.

    What completes the streamed final answer (`AnswerTextHold.rest`): the loop's markers after the model's words,
    or the whole kept draft after a reply with no words.
    """
    finished = outputs.get("finished")
    if hold is None or finished is None or finished.outcome.answer is None:
        return []
    return hold.rest(finished.outcome.answer, "answer")


def _kept_draft(state: LoopState, draft: str, ended: str = "answered") -> LoopState:
    """End the run with the controller's draft as the answer, cited by the chunk ids its `answer` call gave."""
    return cite(state.finish(ended, answer=draft), draft, cited_ids=draft_sources(state))


def _improved_answer(text: str) -> str | None:
    match = _IMPROVED.search(text or "")
    return (match.group(1).strip() or None) if match else None


def prompt_chunks(state: LoopState, max_chunks: int, chunks_per_search: int | None = None) -> list[Document]:
    """
    The chunks an answer prompt shows.

    They are the run's best `max_chunks` by score, or with `chunks_per_search` N the
    best N chunks of each search in search order (at most `max_chunks`).
    """
    if chunks_per_search is None:
        return list(state.chunks[:max_chunks])
    by_id = {doc.id: doc for doc in state.chunks}
    picked: dict[str, Document] = {}
    for step in state.tool_history:
        if step.action != "search":
            continue
        kept = [i for i in step.returned_chunk_ids if i in by_id][:chunks_per_search]
        picked.update((i, by_id[i]) for i in kept if i not in picked)
    if not picked:  # no search recorded (e.g. chunks came another way): best by score
        return list(state.chunks[:max_chunks])
    return list(picked.values())[:max_chunks]
