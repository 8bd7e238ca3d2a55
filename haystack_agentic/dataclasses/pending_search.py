# SPDX-License-Identifier: Apache-2.0
"""`PendingSearch`, a search the router asked for, and how the controller puts its result back in its place."""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from haystack.dataclasses import ChatMessage, ToolCall

#: `meta` key of the tool message holding a search's place in the controller conversation until its result comes.
SEARCH_PLACEHOLDER = "search_placeholder"


@dataclass(frozen=True)
class PendingSearch:
    """
    A search the router asked for: `LoopState.pending` (in flight) or in `LoopState.queued`.

    :param query: The query text sent to the retriever (and to the query embedder, if any).
    :param top_k: How many chunks to ask for (`None`: the retriever's own `top_k`).
    :param filters: Haystack metadata filters for this search.
    :param tool_call: The tool call that asked for it (tools mode), so its result goes back to the model.
    """

    query: str
    top_k: int | None
    filters: Mapping[str, Any] | None = None
    tool_call: ToolCall | None = None

    def to_dict(self) -> dict[str, Any]:
        """Serialize to a JSON-compatible dict."""
        return {
            "query": self.query,
            "top_k": self.top_k,
            "filters": dict(self.filters) if self.filters is not None else None,
            "tool_call": self.tool_call.to_dict() if self.tool_call else None,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "PendingSearch":
        """Build a search from `to_dict()` output."""
        call = data.get("tool_call")
        return cls(data["query"], data["top_k"], data.get("filters"), ToolCall.from_dict(call) if call else None)


def result_in_place(messages: tuple[ChatMessage, ...], result: ChatMessage) -> tuple[ChatMessage, ...]:
    """
    The conversation with a search's tool result where the router held its place (call order), else at the end.

    :raises ValueError: when `result` holds no tool result.
    """
    if result.tool_call_result is None:
        msg = f"Only a tool result can take a search's place, got a message of role {result.role.value!r}"
        raise ValueError(msg)
    origin = result.tool_call_result.origin
    for index in range(len(messages) - 1, -1, -1):
        held = messages[index].tool_call_result
        if held is not None and held.origin == origin and (messages[index].meta or {}).get(SEARCH_PLACEHOLDER):
            return (*messages[:index], result, *messages[index + 1 :])
    return (*messages, result)


def pending_search_step(history: list[Any], turn: int, queued: int, query: str) -> int | None:
    """The index in `history` of the search step of `turn` whose documents just came back, or `None`."""
    searches = [i for i, step in enumerate(history) if step.action == "search" and step.iteration == turn]
    position = len(searches) - queued - 1
    if 0 <= position < len(searches) and history[searches[position]].query == query:
        return searches[position]
    for index in range(len(history) - 1, -1, -1):
        step = history[index]
        if step.action == "search" and step.query == query and not step.returned_chunk_ids:
            return index if step.result is None else None
    return None
