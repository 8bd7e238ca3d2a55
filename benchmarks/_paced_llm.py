# SPDX-License-Identifier: Apache-2.0
"""A scripted chat generator that streams like a served LLM: a first token after a delay, then one per interval."""

import asyncio
import inspect
import time
from typing import Any

from haystack import component, default_from_dict, default_to_dict
from haystack.dataclasses import ChatMessage, ComponentInfo
from scripted_chat_generator import ScriptedChatGenerator, stream_chunks


@component
class PacedChatGenerator(ScriptedChatGenerator):
    """
    `ScriptedChatGenerator` whose replies stream at a model's pace: `first_token` seconds before the first chunk
    (prompt processing), then `token_interval` seconds before each further text chunk (decoding). Without a
    streaming callback a call takes the whole time and returns the reply.
    """

    def __init__(self, script: list[dict[str, Any]], first_token: float = 0.2, token_interval: float = 0.02) -> None:
        """
        :param script: The turns (see `ScriptedChatGenerator`).
        :param first_token: Seconds to the first streamed chunk.
        :param token_interval: Seconds between text chunks.
        """
        ScriptedChatGenerator.__init__(self, script)  # (`@component` rebuilds the class: no bare super())
        self.first_token = first_token
        self.token_interval = token_interval

    def to_dict(self) -> dict[str, Any]:
        """Serialise to a dict (the script and both delays)."""
        return default_to_dict(
            self, script=self.script, first_token=self.first_token, token_interval=self.token_interval
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "PacedChatGenerator":
        """Deserialise from `to_dict`'s output."""
        return default_from_dict(cls, data)

    @component.output_types(replies=list[ChatMessage])
    def run(
        self,
        messages: list[ChatMessage],
        generation_kwargs: Any = None,
        tools: Any = None,
        streaming_callback: Any = None,
    ) -> dict[str, list[ChatMessage]]:
        """Play the next turn, sleeping as the stream would take."""
        reply = ScriptedChatGenerator.run(self, messages, generation_kwargs, tools)["replies"][0]
        time.sleep(self.first_token)
        for number, chunk in enumerate(stream_chunks(reply, ComponentInfo.from_component(self))):
            if number and chunk.content:
                time.sleep(self.token_interval)
            if streaming_callback is not None:
                streaming_callback(chunk)
        return {"replies": [reply]}

    @component.output_types(replies=list[ChatMessage])
    async def run_async(
        self,
        messages: list[ChatMessage],
        generation_kwargs: Any = None,
        tools: Any = None,
        streaming_callback: Any = None,
    ) -> dict[str, list[ChatMessage]]:
        """Async twin of `run` (`asyncio.sleep`)."""
        reply = (await ScriptedChatGenerator.run_async(self, messages, generation_kwargs, tools))["replies"][0]
        await asyncio.sleep(self.first_token)
        for number, chunk in enumerate(stream_chunks(reply, ComponentInfo.from_component(self))):
            if number and chunk.content:
                await asyncio.sleep(self.token_interval)
            if streaming_callback is not None:
                outcome = streaming_callback(chunk)
                if inspect.isawaitable(outcome):
                    await outcome
        return {"replies": [reply]}
