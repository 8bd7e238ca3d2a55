# SPDX-License-Identifier: Apache-2.0

import asyncio
import copy
import functools
import inspect
import json
import re
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from haystack import component, default_from_dict, default_to_dict
from haystack.dataclasses import ChatMessage, ChatRole, ComponentInfo, StreamingChunk, ToolCall, ToolCallDelta
from haystack.utils.jinja2_sandbox import HaystackSandboxedEnvironment

#: The keys a scripted turn may have.
TURN_KEYS = ("text", "tool_calls", "raise", "empty", "template")

_ENV = HaystackSandboxedEnvironment()


@component
class ScriptedChatGenerator:
    """
    A chat generator that plays a written script instead of calling an LLM, for tests, examples and benchmarks.

    The script is plain data (it serialises to YAML). Each reply reports `meta["usage"]` (4 characters a token) and
    `meta["model"]`; every call is recorded in `calls`. A turn is a dict with `text` and/or `tool_calls`
    (`[{"tool_name", "arguments": any JSON or a raw string, "id": optional}]`), or `{"raise": "message"}`
    (`RuntimeError`), or `{"empty": true}`; with `"template": true` its text and argument strings are Jinja templates
    of `question` (the first user message), `last_message` (text or tool result), `turn` (0-based) and `messages`.
    The turn played is the number of assistant messages in `messages` (or, `per_call=True`, a call counter).

    ### Usage example
    ```python
    from haystack.dataclasses import ChatMessage
    from scripted_chat_generator import ScriptedChatGenerator

    llm = ScriptedChatGenerator(
        script=[
            {"tool_calls": [{"tool_name": "search", "arguments": {"query": "Big Stone Gap director"}}]},
            {"tool_calls": [{"tool_name": "answer", "arguments": {"text": "Adriana Trigiani"}}]},
        ]
    )
    reply = llm.run(messages=[ChatMessage.from_user("Who directed Big Stone Gap?")])["replies"][0]
    print(reply.tool_calls[0].arguments)  # {"query": "Big Stone Gap director"}
    ```
    """

    def __init__(
        self,
        script: list[dict[str, Any]] | None = None,
        latency: float = 0.0,
        model: str = "scripted",
        repeat_last: bool = True,
        per_call: bool = False,
    ) -> None:
        """
        :param script: The turns, in order. `None`: an empty script, whose first call raises `IndexError`.
        :param latency: Seconds to sleep in every call (`asyncio.sleep` in `run_async`).
        :param model: The model name reported in each reply's `meta["model"]`.
        :param repeat_last: When the script runs out, repeat its last turn, or raise `IndexError`.
        :param per_call: Pick turns with a call counter instead of by counting assistant messages.
        :raises ValueError: If a turn is not a dict, has unknown keys or no content, or `latency` is negative.
        """
        if latency < 0:
            msg = f"latency must be >= 0 seconds, got {latency}"
            raise ValueError(msg)
        self.script = [self._check_turn(i, turn) for i, turn in enumerate(copy.deepcopy(list(script or [])))]
        self.latency = latency
        self.model = model
        self.repeat_last = repeat_last
        self.per_call = per_call
        #: Every call, in order: `(messages, generation_kwargs, tools)`.
        self.calls: list[tuple[list[ChatMessage], dict[str, Any] | None, Any]] = []
        self._counter = 0
        self._lock = threading.Lock()

    @staticmethod
    def _check_turn(index: int, turn: Any) -> dict[str, Any]:
        if not isinstance(turn, Mapping):
            msg = f"Script turn {index} must be a dict, got {type(turn).__name__}: {turn!r}"
            raise ValueError(msg)
        unknown = set(turn) - set(TURN_KEYS)
        if unknown:
            msg = f"Script turn {index} has unknown keys {sorted(unknown)}; allowed: {list(TURN_KEYS)}"
            raise ValueError(msg)
        if not any(key in turn for key in ("text", "tool_calls", "raise", "empty")):
            msg = f"Script turn {index} needs 'text', 'tool_calls', 'raise' or 'empty': {dict(turn)!r}"
            raise ValueError(msg)
        calls = turn.get("tool_calls")
        named = all(isinstance(c, Mapping) and isinstance(c.get("tool_name"), str) for c in calls or [])
        if calls is not None and not (isinstance(calls, list) and named):
            msg = f"Script turn {index}: 'tool_calls' must be a list of dicts with a 'tool_name' string"
            raise ValueError(msg)
        return dict(turn)

    def reset(self) -> None:
        """Forget recorded calls and reset the `per_call` counter."""
        with self._lock:
            self.calls.clear()
            self._counter = 0

    @component.output_types(replies=list[ChatMessage])
    def run(
        self,
        messages: list[ChatMessage],
        generation_kwargs: dict[str, Any] | None = None,
        tools: Any = None,
        streaming_callback: Any = None,
    ) -> dict[str, list[ChatMessage]]:
        """
        Play the next scripted turn: `{"replies": [one assistant ChatMessage]}` (`generation_kwargs`, `tools` recorded).

        :param streaming_callback: If given, called with the reply's `stream_chunks`.
        :raises RuntimeError: On a `{"raise": ...}` turn.
        :raises IndexError: When the script has run out and `repeat_last` is `False` (or the script is empty).
        """
        turn, index = self._next_turn(messages, generation_kwargs, tools)
        if self.latency:
            time.sleep(self.latency)
        reply = self._reply(turn, index, messages)
        if streaming_callback is not None:
            for chunk in stream_chunks(reply, ComponentInfo.from_component(self)):
                streaming_callback(chunk)
        return {"replies": [reply]}

    @component.output_types(replies=list[ChatMessage])
    async def run_async(
        self,
        messages: list[ChatMessage],
        generation_kwargs: dict[str, Any] | None = None,
        tools: Any = None,
        streaming_callback: Any = None,
    ) -> dict[str, list[ChatMessage]]:
        """Async twin of `run`: sleeps with `asyncio.sleep`, so concurrent runs overlap."""
        turn, index = self._next_turn(messages, generation_kwargs, tools)
        if self.latency:
            await asyncio.sleep(self.latency)
        reply = self._reply(turn, index, messages)
        if streaming_callback is not None:
            for chunk in stream_chunks(reply, ComponentInfo.from_component(self)):
                outcome = streaming_callback(chunk)
                if inspect.isawaitable(outcome):
                    await outcome
        return {"replies": [reply]}

    def _next_turn(
        self, messages: Sequence[ChatMessage], generation_kwargs: dict[str, Any] | None, tools: Any
    ) -> tuple[dict[str, Any], int]:
        messages = list(messages)
        with self._lock:
            self.calls.append((messages, copy.deepcopy(generation_kwargs), tools))
            if self.per_call:
                index = self._counter
                self._counter += 1
            else:
                index = sum(1 for m in messages if m.role == ChatRole.ASSISTANT)
        if index < len(self.script):
            return self.script[index], index
        if self.script and self.repeat_last:
            return self.script[-1], index
        how = "calls made" if self.per_call else "assistant messages in the conversation"
        msg = (
            f"ScriptedChatGenerator has no turn {index} ({how}: {index}); the script has {len(self.script)} "
            "turn(s). Add turns, or set repeat_last=True."
        )
        raise IndexError(msg)

    def _reply(self, turn: Mapping[str, Any], index: int, messages: Sequence[ChatMessage]) -> ChatMessage:
        if "raise" in turn:
            raise RuntimeError(str(turn["raise"]))
        variables = _template_variables(messages, index) if turn.get("template") else None
        text = None if turn.get("empty") else turn.get("text")
        if text is not None and variables is not None:
            text = _template(str(text)).render(**variables)
        tool_calls = []
        if not turn.get("empty"):
            for number, call in enumerate(turn.get("tool_calls") or []):
                arguments = copy.deepcopy(call.get("arguments"))
                if variables is not None:
                    arguments = _render_strings(arguments, variables)
                tool_calls.append(ToolCall(call["tool_name"], arguments, id=call.get("id") or f"call_{index}_{number}"))
        prompt = sum(message_chars(m) for m in messages) // 4
        completion = (len(text or "") + sum(_arguments_chars(tc.arguments) for tc in tool_calls)) // 4
        usage = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
        finish = "tool_calls" if tool_calls else "stop"
        meta = {"model": self.model, "index": 0, "finish_reason": finish, "usage": usage}
        return ChatMessage.from_assistant(text=text if text else None, tool_calls=tool_calls or None, meta=meta)

    def to_dict(self) -> dict[str, Any]:
        """Serialize the component to a dictionary (plain data only)."""
        params = {name: getattr(self, name) for name in ("latency", "model", "repeat_last", "per_call")}
        return default_to_dict(self, script=copy.deepcopy(self.script), **params)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ScriptedChatGenerator":
        """Deserialize the component from a dictionary."""
        return default_from_dict(cls, data)


#: A word with the whitespace after it, or leading whitespace.
_PIECES = re.compile(r"\s*\S+\s*|\s+")


def stream_chunks(reply: ChatMessage, component_info: ComponentInfo | None = None) -> list[StreamingChunk]:
    """The `StreamingChunk`s a streaming generator would send: words, one per tool call, a last one with `meta`."""
    chunks = [
        StreamingChunk(content=piece, index=0, start=number == 0, component_info=component_info)
        for number, piece in enumerate(_PIECES.findall(reply.text or ""))
    ]
    for number, call in enumerate(reply.tool_calls):
        arguments = call.arguments if isinstance(call.arguments, str) else json.dumps(call.arguments)
        delta = ToolCallDelta(index=number, tool_name=call.tool_name, arguments=arguments, id=call.id)
        chunks.append(
            StreamingChunk(content="", tool_calls=[delta], index=number + 1, start=True, component_info=component_info)
        )
    meta = dict(reply.meta or {})
    chunks.append(
        StreamingChunk(content="", meta=meta, finish_reason=meta.get("finish_reason"), component_info=component_info)
    )
    return chunks


def message_chars(message: ChatMessage) -> int:
    chars = len(message.text or "")
    for tool_call in message.tool_calls:
        chars += len(tool_call.tool_name) + _arguments_chars(tool_call.arguments)
    for result in message.tool_call_results:
        chars += len(str(result.result))
    return chars


def _arguments_chars(arguments: Any) -> int:
    return len(arguments if isinstance(arguments, str) else json.dumps(arguments, default=str))


@functools.lru_cache(maxsize=256)
def _template(text: str) -> Any:
    return _ENV.from_string(text)


def _template_variables(messages: Sequence[ChatMessage], index: int) -> dict[str, Any]:
    question = next((m.text or "" for m in messages if m.role == ChatRole.USER), "")
    last = ""
    if messages:
        final = messages[-1]
        results = final.tool_call_results
        last = final.text or (str(results[-1].result) if results else "")
    return {"question": question, "last_message": last, "turn": index, "messages": list(messages)}


def _render_strings(value: Any, variables: dict[str, Any]) -> Any:
    if isinstance(value, str):
        return _template(value).render(**variables)
    if isinstance(value, list):
        return [_render_strings(v, variables) for v in value]
    if isinstance(value, dict):
        return {k: _render_strings(v, variables) for k, v in value.items()}
    return value
