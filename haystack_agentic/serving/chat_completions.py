# SPDX-License-Identifier: Apache-2.0
"""
The OpenAI-compatible chat replies of a served loop.

The request's conversation, and the `ChatCompletion`s, whole or streamed (answer and `Sources:` as content, steps as
`reasoning_content`, `usage`).
"""

import time
import uuid
from typing import Any

from fastapi import HTTPException
from fastapi_openai_compat.chat_completions.models import ChatCompletion, Choice, Message
from haystack.dataclasses import ChatMessage, StreamingChunk

from haystack_agentic.components.loop.loop_controller import validate_conversation
from haystack_agentic.llm.streaming import ANSWER_META, EVENT_META, STEP_META
from haystack_agentic.llm.valid_text import strict_json
from haystack_agentic.presentation import NO_SOURCE_NOTE, source_lines, uncited, unsupported_note
from haystack_agentic.serving.security import ENV_MAX_MESSAGES

#: What the block of sources a reply ends with starts with (after the answer), see `sources_text`.
SOURCES_HEADING = "\n\nSources:\n"
_NO_SOURCES = f"\n\nSources: none. {NO_SOURCE_NOTE}"  # the block of an answer that cites nothing


class BadRequest(HTTPException):
    """A request the loop cannot run: answered with HTTP 422 and a message saying what to change."""

    def __init__(self, message: str) -> None:
        super().__init__(status_code=422, detail=message)


def _message_text(message: dict[str, Any], which: str) -> str:
    """A message's text: its content, or its `text` content parts joined (`BadRequest`: a part's text not a string)."""
    content = message.get("content")
    if isinstance(content, list):
        texts = []
        for index, part in enumerate(content):
            if isinstance(part, dict) and part.get("type") == "text":
                if not isinstance(text := part.get("text"), str):
                    msg = (
                        f"Content part {index} of {which} is of type `text` but its `text` is "
                        f"{type(text).__name__ if text is not None else 'null'}: send the question as a string."
                    )
                    raise BadRequest(msg)
                texts.append(text)
        content = " ".join(texts)
    if isinstance(content, str) and message.get("role") == "assistant":
        content = without_sources(content)
    return content.strip() if isinstance(content, str) else ""


def without_sources(reply: str) -> str:
    """An earlier reply (clients send the whole reply back) without the Sources block it ends with."""
    if reply.endswith(_NO_SOURCES):
        return reply[: -len(_NO_SOURCES)]
    head, heading, _ = reply.rpartition(SOURCES_HEADING)
    return head if heading else reply


_ROLES = {
    "system": ChatMessage.from_system,
    "developer": ChatMessage.from_system,
    "user": ChatMessage.from_user,
    "assistant": ChatMessage.from_assistant,
}


def conversation_from_request(
    messages: Any, max_chars: int | None = None, max_messages: int | None = None
) -> list[ChatMessage]:
    """
    The conversation of an OpenAI-style chat request's `messages`, for `LoopController`'s `messages` input.

    System and `developer` messages as system messages, user and assistant ones by their text (content parts joined;
    an assistant's without its Sources block), earlier ones without text left out; the question at most `max_chars`.

    :raises BadRequest: If the list is empty or has more than `max_messages` messages, a message is not an object,
        has a tool role, an unknown role or tool calls, there is no user message or it has no text, or the
        conversation does not end with it.
    """
    if not isinstance(messages, list) or not messages:
        msg = "`messages` must be a non-empty list of chat messages."
        raise BadRequest(msg)
    if max_messages is not None and len(messages) > max_messages:
        msg = (
            f"`messages` has {len(messages):,} messages, more than this server's limit of {max_messages:,}: send "
            f"only the recent turns, or start the server with `haystack-agentic serve --max-messages N` "
            f"(${ENV_MAX_MESSAGES})."
        )
        raise BadRequest(msg)
    conversation = []
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            msg = f"messages[{index}] must be an object with `role` and `content`."
            raise BadRequest(msg)
        role = message.get("role")
        if role in ("tool", "function"):
            msg = (
                f"messages[{index}] has role `{role}`: this model runs its own tools; send system, user and "
                "assistant messages only."
            )
            raise BadRequest(msg)
        if not isinstance(role, str) or role not in _ROLES:
            msg = f"messages[{index}] has an unknown role `{role}`: use `system`, `user` or `assistant`."
            raise BadRequest(msg)
        if role == "assistant" and message.get("tool_calls"):
            msg = f"messages[{index}] is an assistant message with tool calls: send earlier answers as text."
            raise BadRequest(msg)
        text = _message_text(message, "the last user message" if role == "user" else f"messages[{index}]")
        if text:
            conversation.append(_ROLES[role](text))
        elif role == "user" and all(m.get("role") != "user" for m in messages[index + 1 :] if isinstance(m, dict)):
            msg = "The last user message has no text: put the question in its `content`."
            raise BadRequest(msg)
    if not any(m.role.value == "user" for m in conversation):
        msg = "`messages` has no user message: send the question as a message with role `user`."
        raise BadRequest(msg)
    try:
        validate_conversation(conversation, max_chars)
    except ValueError as exc:
        raise BadRequest(str(exc)) from exc
    return conversation


def usage_of(result: dict[str, Any]) -> dict[str, int]:
    """The OpenAI `usage` of a run: its prompt and completion tokens (the result's `total`, else summed per role)."""
    per_role = dict(result.get("usage") or {})
    total = per_role.pop("total", None)
    roles = [total] if total else list(per_role.values())
    prompt = sum(int(r.get("prompt_tokens") or 0) for r in roles)
    completion = sum(int(r.get("completion_tokens") or 0) for r in roles)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def answer_text(result: dict[str, Any]) -> str:
    """The reply text for a loop result: the answer and its `sources_text`, or a sentence saying how the run ended."""
    if result.get("answer"):
        return str(result["answer"]) + sources_text(result)
    reason = f"No answer (terminated by {result.get('terminated_by')})."
    if result.get("error"):
        reason += f" Error: {result['error']}"
    return reason


def sources_text(result: dict[str, Any]) -> str:
    """
    The `Sources:` block a reply ends with.

    A blank line, `Sources:`, one line per citation (`[n] Title: "quoted sentence"`) and which ones the check found
    unsupported; `Sources: none.` and `NO_SOURCE_NOTE` for an answer citing nothing, `""` without an answer.
    """
    lines = source_lines(result)
    if not lines:
        return _NO_SOURCES if uncited(result) else ""
    note = unsupported_note(result)
    return SOURCES_HEADING + "\n".join([*lines, *([note] if note else [])])


def progress_line(step: dict[str, Any]) -> str:
    """The progress line of a `ToolStep.to_dict()`, e.g. `1. search "Big Stone Gap director"` and a newline."""
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
    """The non-streamed reply of pipeline `model`: the answer, one line per step as `reasoning_content`, `usage`."""
    steps = "".join(progress_line(step) for step in result.get("tool_history") or [])
    message = Message(
        role="assistant", content=strict_json(answer_text(result)), reasoning_content=strict_json(steps) or None
    )
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
    Turns a run's streaming chunks into `chat.completion.chunk`s of pipeline `model`.

    The chunks carry the answer's text, stripped; then `finish` sends what the result's answer has beyond what
    streamed.
    """

    def __init__(self, model: str) -> None:
        self.model = model
        self.id = f"chatcmpl-{uuid.uuid4().hex}"
        self.created = int(time.time())
        self.sent = ""
        self._held_space = ""
        self._steps_shown: list[tuple[Any, ...]] = []
        self._mid_line = False  # the last reasoning_content sent (an LLM's text) did not end its line

    def _chunk(self, choices: list[Choice], usage: dict[str, int] | None = None) -> ChatCompletion:
        return ChatCompletion(
            id=self.id,
            object="chat.completion.chunk",
            created=self.created,
            model=self.model,
            choices=choices,
            usage=usage,
        )

    def _delta(self, finish_reason: str | None = None, **fields: Any) -> ChatCompletion:
        fields = {name: strict_json(value) for name, value in fields.items()}
        return self._chunk([Choice(index=0, delta=Message(role="assistant", **fields), finish_reason=finish_reason)])

    def _step(self, event: str, step: dict[str, Any]) -> ChatCompletion:
        if event != "documents":
            self._steps_shown.append(_step_key(step))
        line = ("\n" if self._mid_line else "") + event_line(event, step)
        self._mid_line = False
        return self._delta(reasoning_content=line, agentic_step={"event": event, "step": step})

    def _reasoning(self, text: str) -> ChatCompletion:
        self._mid_line = not text.endswith("\n")
        return self._delta(reasoning_content=text)

    def on_chunk(self, chunk: StreamingChunk) -> list[ChatCompletion]:
        """The reply chunks (zero or one) for a chunk from the loop's `streaming_callback`."""
        meta = chunk.meta or {}
        if EVENT_META in meta:
            return [self._step(meta[EVENT_META], meta[STEP_META])]
        reasoning = getattr(chunk.reasoning, "reasoning_text", None)
        if reasoning:
            return [self._reasoning(reasoning)]
        content = strict_json(chunk.content)
        if not content:
            return []
        if not meta.get(ANSWER_META):
            return [self._reasoning(content)]
        text = self._held_space + (content if self.sent else content.lstrip())
        kept = text.rstrip()
        self._held_space = text[len(kept) :]
        if not kept:
            return []
        self.sent += kept
        return [self._delta(content=kept)]

    def finish(self, result: dict[str, Any], include_usage: bool) -> list[ChatCompletion]:
        """The last chunks: the rest of the answer, the `stop`, and (`include_usage`) one with `usage`, no choices."""
        # Steps that no component streamed (e.g. the evidence check's) come from the result, before the answer's end.
        shown = list(self._steps_shown)
        chunks = []
        for step in result.get("tool_history") or []:
            key = _step_key(step)
            if key in shown:
                shown.remove(key)
            else:
                chunks.append(self._step(step.get("action", ""), step))
        final = strict_json(answer_text(result))
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
