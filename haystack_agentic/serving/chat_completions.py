# SPDX-License-Identifier: Apache-2.0
"""
The OpenAI-compatible chat replies of a served loop: the conversation a request sends, and the `ChatCompletion`s
(whole, or streamed chunk by chunk) built from a run's streaming chunks and result.

What a client sees (see README, "Serving"):
- `message.content` / the concatenated `delta.content`: the answer with its `[n]` markers, then (when the result
  has citations) a `Sources:` block, one line per citation (`[n] Title: "quoted sentence"`, flagged
  `(unsupported)` when the check found it so), the same text streamed or not. Only the answer's own tokens (the
  answerer's final call, the fallback) stream as content, with leading and trailing whitespace dropped as the
  result's answer drops it; an answer that no call streamed (e.g. given in the controller's `answer` tool call)
  arrives as one piece at the end, and the sources follow in one piece.
- `delta.reasoning_content`: the side information, as reasoning models send it: one line per step (`1. search
  "..."`, `   3 chunks found`, `2. answer`), the controller's prose and the reflect/draft calls' text.
  Each step's delta also carries `agentic_step`: `{"event": ..., "step": ToolStep.to_dict()}`. Not streamed, the
  message's `reasoning_content` holds the step lines.
- `usage`: prompt and completion tokens of the run, summed over its LLM roles; streamed, it comes in a last chunk
  with no choices when the request asks for it (`stream_options: {"include_usage": true}`), as OpenAI does.
"""

import time
import uuid
from typing import Any

from fastapi import HTTPException
from fastapi_openai_compat.chat_completions.models import ChatCompletion, Choice, Message
from haystack.dataclasses import ChatMessage, StreamingChunk

from haystack_agentic.presentation import NO_SOURCE_NOTE, source_lines, uncited, unsupported_note
from haystack_agentic.components.loop.loop_controller import validate_conversation
from haystack_agentic.llm.valid_text import strict_json
from haystack_agentic.llm.streaming import ANSWER_META, EVENT_META, STEP_META


#: What the block of sources a reply ends with starts with (after the answer), see `sources_text`.
SOURCES_HEADING = "\n\nSources:\n"
_NO_SOURCES = f"\n\nSources: none. {NO_SOURCE_NOTE}"  # the block of an answer that cites nothing

#: Served values made safe for strict JSON: lone surrogates become U+FFFD, non-finite floats `None`
#: (`haystack_agentic.llm.valid_text.strict_json`, the rule of the loop's result). The serving layer applies it to
#: everything it sends: the result (strict JSON already), reply fields and streamed chunks.
encodable = strict_json


class BadRequest(HTTPException):
    """A request the loop cannot run: answered with HTTP 422 and a message saying what to change."""

    def __init__(self, message: str) -> None:
        super().__init__(status_code=422, detail=message)


def text_parts(parts: list[Any], which: str = "the last user message") -> list[str]:
    """
    The `text` of each `{"type": "text", "text": ...}` part of a message's content.

    :param parts: The content parts.
    :param which: Names the message in the error.
    :returns: The texts, in order.
    :raises BadRequest: If a text part's `text` is not a string.
    """
    texts = []
    for index, part in enumerate(parts):
        if not isinstance(part, dict) or part.get("type") != "text":
            continue
        text = part.get("text")
        if not isinstance(text, str):
            raise BadRequest(
                f"Content part {index} of {which} is of type `text` but its `text` is "
                f"{type(text).__name__ if text is not None else 'null'}: send the question as a string."
            )
        texts.append(text)
    return texts


def _message_text(message: dict[str, Any], which: str) -> str:
    content = message.get("content")
    if isinstance(content, list):
        content = " ".join(text_parts(content, which))
    if isinstance(content, str) and message.get("role") == "assistant":
        content = without_sources(content)
    return content.strip() if isinstance(content, str) else ""


def without_sources(reply: str) -> str:
    """
    An earlier reply as the loop sees it in a conversation: without the Sources block a reply ends with (clients
    send the whole reply back), so its quotes do not pass for what the user or the answer said.

    :param reply: The text of an assistant message.
    :returns: The text before its last `Sources:` block, or `reply` unchanged when it has none.
    """
    if reply.endswith(_NO_SOURCES):
        return reply[: -len(_NO_SOURCES)]
    head, heading, _ = reply.rpartition(SOURCES_HEADING)
    return head if heading else reply


_ROLES = {"system": ChatMessage.from_system, "developer": ChatMessage.from_system,
          "user": ChatMessage.from_user, "assistant": ChatMessage.from_assistant}  # fmt: skip


def conversation_from_request(messages: Any, max_chars: int | None = None) -> list[ChatMessage]:
    """
    The conversation of an OpenAI-style chat request, for `LoopController`'s `messages` input.

    System (and `developer`) messages become system messages; user and assistant messages keep their text (text
    content parts joined by spaces; an assistant message without the Sources block a reply ends with); earlier
    messages without text are left out.

    :param messages: The request's `messages` (dicts with `role` and `content`, a string or a list of parts).
    :param max_chars: Longest question accepted (the controller's `max_question_chars`), or `None`.
    :returns: The conversation, its last message the user's question.
    :raises BadRequest: If the list is empty, a message is not an object, has a tool role, an unknown role or tool
        calls, there is no user message or it has no text, or the conversation does not end with it.
    """
    if not isinstance(messages, list) or not messages:
        raise BadRequest("`messages` must be a non-empty list of chat messages.")
    conversation = []
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            raise BadRequest(f"messages[{index}] must be an object with `role` and `content`.")
        role = message.get("role")
        if role in ("tool", "function"):
            raise BadRequest(
                f"messages[{index}] has role `{role}`: this model runs its own tools; send system, user and "
                "assistant messages only."
            )
        if not isinstance(role, str) or role not in _ROLES:
            raise BadRequest(f"messages[{index}] has an unknown role `{role}`: use `system`, `user` or `assistant`.")
        if role == "assistant" and message.get("tool_calls"):
            raise BadRequest(
                f"messages[{index}] is an assistant message with tool calls: send earlier answers as text."
            )
        text = _message_text(message, "the last user message" if role == "user" else f"messages[{index}]")
        if text:
            conversation.append(_ROLES[role](text))
        elif role == "user" and all(m.get("role") != "user" for m in messages[index + 1 :] if isinstance(m, dict)):
            raise BadRequest("The last user message has no text: put the question in its `content`.")
    if not any(m.role.value == "user" for m in conversation):
        raise BadRequest("`messages` has no user message: send the question as a message with role `user`.")
    try:
        validate_conversation(conversation, max_chars)
    except ValueError as exc:
        raise BadRequest(str(exc)) from exc
    return conversation


def usage_of(result: dict[str, Any]) -> dict[str, int]:
    """
    The OpenAI `usage` of a run: its prompt and completion tokens, summed over the LLM roles.

    :param result: The loop's result dict (its `usage`: per role, and `total`).
    :returns: `{"prompt_tokens", "completion_tokens", "total_tokens"}`.
    """
    per_role = dict(result.get("usage") or {})
    total = per_role.pop("total", None)
    roles = [total] if total else list(per_role.values())
    prompt = sum(int(r.get("prompt_tokens") or 0) for r in roles)
    completion = sum(int(r.get("completion_tokens") or 0) for r in roles)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def answer_text(result: dict[str, Any]) -> str:
    """
    The reply text of a chat completion for a loop result.

    :param result: The loop's result dict.
    :returns: The answer, followed by its sources when it has citations (see `sources_text`); when there is no
        answer, a sentence saying how the run ended (and its error).
    """
    if result.get("answer"):
        return str(result["answer"]) + sources_text(result)
    reason = f"No answer (terminated by {result.get('terminated_by')})."
    if result.get("error"):
        reason += f" Error: {result['error']}"
    return reason


def sources_text(result: dict[str, Any]) -> str:
    """
    The block a chat reply ends with: a blank line, `Sources:`, one line per citation (`[n] Title: "quoted
    sentence"`, whole), and which ones the check found unsupported.

    :param result: The loop's result dict.
    :returns: The block; for an answer without citations `Sources: none.` and `NO_SOURCE_NOTE`; `""` for a result
        without an answer.
    """
    lines = source_lines(result)
    if not lines:
        return _NO_SOURCES if uncited(result) else ""
    note = unsupported_note(result)
    return SOURCES_HEADING + "\n".join([*lines, *([note] if note else [])])


def progress_line(step: dict[str, Any]) -> str:
    """
    One line of streamed progress for a step of the loop.

    :param step: A `ToolStep.to_dict()`.
    :returns: E.g. `1. search "Big Stone Gap director"` (with a trailing newline).
    """
    line = f"{step['iteration']}. {step['action']}"
    if step.get("query"):
        line += f' "{step["query"]}"'
        if step["action"] == "search" and step.get("collections"):
            line += f" in {', '.join(step['collections'])}"
    elif step["action"] in ("give_up", "error", "invalid") and step.get("result"):
        line += f" ({str(step['result'])[:200]})"
    return line + "\n"


def event_line(event: str, step: dict[str, Any]) -> str:
    """The `reasoning_content` line of a step event (`documents`: how many chunks the search returned)."""
    if event == "documents":
        found = len(step.get("returned_chunk_ids") or [])
        failed = str(step.get("result") or "").startswith("search failed")
        return f"   {step['result']}\n" if failed else f"   {found} chunk{'s' if found != 1 else ''} found\n"
    return progress_line(step)


def completion(model: str, result: dict[str, Any]) -> ChatCompletion:
    """
    The non-streamed reply to a chat request: the answer as the message (with one line per step as its
    `reasoning_content`), the run's `usage`.

    :param model: The pipeline's name.
    :param result: The loop's result dict.
    :returns: The `ChatCompletion`.
    """
    steps = "".join(progress_line(step) for step in result.get("tool_history") or [])
    message = Message(role="assistant", content=encodable(answer_text(result)), reasoning_content=encodable(steps) or None)
    return ChatCompletion(
        id=f"chatcmpl-{uuid.uuid4().hex}",
        object="chat.completion",
        created=int(time.time()),
        model=model,
        choices=[Choice(index=0, message=message, finish_reason="stop")],
        usage=usage_of(result),
    )


def _step_key(step: dict[str, Any]) -> tuple[Any, ...]:
    return (step.get("iteration"), step.get("action"), step.get("query"), step.get("tool_name"))


class ChatReplyStream:
    """
    Turns a run's streaming chunks into `chat.completion.chunk`s, then ends the reply from the run's result.

    The content sent is the answer's streamed text without its leading and trailing whitespace; `finish` sends what
    the result's answer has beyond it (all of it when nothing streamed as content).

    :param model: The pipeline's name.
    """

    def __init__(self, model: str) -> None:
        self.model = model
        self.id = f"chatcmpl-{uuid.uuid4().hex}"
        self.created = int(time.time())
        self.sent = ""
        self._held_space = ""
        self._steps_shown: list[dict[str, Any]] = []

    def _chunk(self, choices: list[Choice], usage: dict[str, int] | None = None) -> ChatCompletion:
        return ChatCompletion(
            id=self.id, object="chat.completion.chunk", created=self.created, model=self.model, choices=choices,
            usage=usage,
        )  # fmt: skip

    def _delta(self, finish_reason: str | None = None, **fields: Any) -> ChatCompletion:
        fields = {name: encodable(value) for name, value in fields.items()}
        return self._chunk([Choice(index=0, delta=Message(role="assistant", **fields), finish_reason=finish_reason)])

    def _step(self, event: str, step: dict[str, Any]) -> ChatCompletion:
        if event != "documents":
            self._steps_shown.append(_step_key(step))
        return self._delta(reasoning_content=event_line(event, step), agentic_step={"event": event, "step": step})

    def on_chunk(self, chunk: StreamingChunk) -> list[ChatCompletion]:
        """
        The reply chunks for one of the run's streaming chunks.

        :param chunk: A chunk from the loop's `streaming_callback`.
        :returns: Zero or one `ChatCompletion` chunk.
        """
        meta = chunk.meta or {}
        if EVENT_META in meta:
            return [self._step(meta[EVENT_META], meta[STEP_META])]
        reasoning = getattr(chunk.reasoning, "reasoning_text", None)
        if reasoning:
            return [self._delta(reasoning_content=reasoning)]
        content = encodable(chunk.content)
        if not content:
            return []
        if not meta.get(ANSWER_META):
            return [self._delta(reasoning_content=content)]
        text = self._held_space + (content if self.sent else content.lstrip())
        kept = text.rstrip()
        self._held_space = text[len(kept) :]
        if not kept:
            return []
        self.sent += kept
        return [self._delta(content=kept)]

    def finish(self, result: dict[str, Any], include_usage: bool) -> list[ChatCompletion]:
        """
        The last chunks of the reply: the rest of the answer, the `stop`, and the usage if asked for.

        :param result: The loop's result dict.
        :param include_usage: Send a last chunk with the run's `usage` and no choices.
        :returns: The chunks.
        """
        # Steps that no component streamed (e.g. the evidence check's) come from the result, before the answer's end.
        shown = list(self._steps_shown)
        chunks = []
        for step in result.get("tool_history") or []:
            key = _step_key(step)
            if key in shown:
                shown.remove(key)
            else:
                chunks.append(self._step(step.get("action", ""), step))
        final = encodable(answer_text(result))
        # The loop only appends to a streamed answer, so what was sent starts the reply; only a streamed call that
        # broke off midway (the run then answered otherwise) leaves text that cannot be taken back.
        rest = final[len(self.sent) :] if final.startswith(self.sent) else "\n\n" + final
        if rest:
            self.sent += rest
            chunks.append(self._delta(content=rest))
        chunks.append(self._delta(finish_reason="stop"))
        if include_usage:
            chunks.append(self._chunk([], usage=usage_of(result)))
        return chunks
