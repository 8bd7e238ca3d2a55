# SPDX-License-Identifier: Apache-2.0
"""
How the loop runs a user tool: through Haystack's own tool invocation (the code its `Agent` runs tools with), so a
tool's `inputs_from_state`, `outputs_to_state` and `outputs_to_string` mean what they mean in Haystack, with two
additions for retrieval:

- Documents a tool returns (a `list[Document]`, or one inside a dict of outputs, as a `ComponentTool` around a
  retriever returns `{"documents": [...]}`), and Documents it writes to the `documents` state key, are handed back
  to join the run's chunks. Only those within the run's filters are kept: the filters scope every search.
- A tool without its own `outputs_to_string` that returns Documents shows the model readable text (a numbered list
  of chunks with id, title and a content preview, like a search result), not `Document(...)` reprs or JSON.

Haystack 3 has no `ToolInvoker` component any more (DESIGN.md); its tool-calling functions live in
`haystack.components.agents.tool_calling` and are private. They are imported here, in one place.
"""

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from haystack import Document, logging
from haystack.components.agents.state import State
from haystack.components.agents.tool_calling import _result_to_string, _run_tool
from haystack.dataclasses import ChatMessage, ToolCall
from haystack.tools import Tool
from haystack.utils.filters import document_matches_filter

from haystack_agentic.llm.result_digests import numbered_chunks

logger = logging.getLogger(__name__)

#: Most characters of one Document shown to the model in a tool result.
TOOL_DOCUMENT_PREVIEW_CHARS = 1500

#: The state key whose Documents join the run's chunks (never kept in `LoopState.tool_state`).
DOCUMENTS_KEY = "documents"
#: The state key holding the run's filters, for tools that map it with `inputs_from_state` (read-only).
FILTERS_KEY = "filters"


@dataclass(frozen=True)
class ToolOutcome:
    """
    What one user tool call produced.

    :param message: The tool message for the model (its `origin` is the model's tool call).
    :param documents: Documents to merge into the run's chunks (within the run's filters), in the tool's order.
    :param tool_state: The tool state after the call (`LoopState.tool_state`).
    :param text: The text the model sees (the tool result or the error).
    :param error: Whether the call failed.
    """

    message: ChatMessage
    documents: tuple[Document, ...] = ()
    tool_state: Mapping[str, Any] = field(default_factory=dict)
    text: str = ""
    error: bool = False


def invoke_user_tool(
    tool: Tool,
    tool_call: ToolCall,
    arguments: dict[str, Any],
    tool_state: Mapping[str, Any],
    filters: Mapping[str, Any] | None = None,
    preview_chars: int = TOOL_DOCUMENT_PREVIEW_CHARS,
) -> ToolOutcome:
    """
    Run one user tool call with Haystack's tool invocation; a failure becomes a tool error for the model.

    :param tool: The tool.
    :param tool_call: The model's call (its result message answers it).
    :param arguments: The call's arguments, already parsed to a dict.
    :param tool_state: The run's tool state (`LoopState.tool_state`); the run's filters are added under `filters`.
    :param filters: The run's Haystack metadata filters, or `None`.
    :param preview_chars: Most characters of one Document in the readable text.
    :returns: The `ToolOutcome`. Never raises for a failing tool (nor for a failing `outputs_to_state` handler).
    """
    returned: list[Any] = []
    runnable = _capturing(tool, returned, filters, preview_chars)
    state = State(schema=_schema(tool, tool_state), data={**dict(tool_state), FILTERS_KEY: filters})
    call = ToolCall(tool_name=tool.name, arguments=arguments, id=tool_call.id)
    try:
        messages, state = _run_tool(
            messages=[ChatMessage.from_assistant(tool_calls=[call])], state=state, tools=[runnable],
            raise_on_failure=False,
        )  # fmt: skip
        result = messages[0].tool_call_result
        text, error = result.result, result.error
    except Exception as exc:  # noqa: BLE001 - e.g. an outputs_to_state handler that raised
        text, error = f"{type(exc).__name__}: {exc}", True
    if not isinstance(text, str):  # `raw_result` tools may return content parts
        text = " ".join(getattr(part, "text", "") or "" for part in text)
    if error:
        text = f"Error in {tool.name}: {text}"
        logger.warning("User tool {tool} failed: {error}", tool=tool.name, error=text)
        return ToolOutcome(ChatMessage.from_tool(text, origin=tool_call, error=True), (), tool_state, text, True)
    found = [*((documents_in(returned[0]) or []) if returned else []), *(state.get(DOCUMENTS_KEY) or [])]
    new_state = {k: v for k, v in state.data.items() if k not in (DOCUMENTS_KEY, FILTERS_KEY, "messages")}
    kept = tuple(within_filters(found, filters))
    return ToolOutcome(ChatMessage.from_tool(text, origin=tool_call), kept, new_state, text, False)


def documents_in(result: Any) -> list[Document] | None:
    """
    The Documents in a tool's result: the result itself when it is a list of Documents, else every list of
    Documents among the values of a dict result (e.g. a retriever's `{"documents": [...]}`).

    :param result: What the tool returned.
    :returns: The Documents, or `None` when the result holds none.
    """
    if _is_documents(result):
        return list(result)
    if isinstance(result, Mapping):
        found = [doc for value in result.values() if _is_documents(value) for doc in value]
        return found if any(_is_documents(v) for v in result.values()) else None
    return None


def within_filters(documents: list[Document], filters: Mapping[str, Any] | None) -> list[Document]:
    """
    The Documents that match the run's filters (all of them when there are none).

    :param documents: The Documents.
    :param filters: Haystack metadata filters, or `None`.
    :returns: The matching Documents; a Document the filters cannot be applied to (e.g. a type mismatch) is left out.
    """
    if not filters:
        return list(documents)
    kept = []
    for doc in documents:
        try:
            if document_matches_filter(dict(filters), doc):
                kept.append(doc)
        except Exception as exc:  # noqa: BLE001 - a filter that does not fit the tool's metadata
            logger.warning("Tool document {id} left out: the filters do not apply ({error})", id=doc.id, error=exc)
    return kept


def format_tool_documents(tool_name: str, documents: list[Document], preview_chars: int) -> str:
    """
    Render a tool's Documents for the model like a search result: numbered, with id, title and a content preview.

    :param tool_name: The tool's name (in the header line).
    :param documents: The Documents, in the tool's order.
    :param preview_chars: Most characters of each Document's content.
    :returns: The text.
    """
    if not documents:
        return f"No results from {tool_name}."
    return numbered_chunks(f"{len(documents)} result(s) from {tool_name}:", documents, preview_chars)


def _is_documents(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and bool(value) and all(isinstance(v, Document) for v in value)


def _schema(tool: Tool, tool_state: Mapping[str, Any]) -> dict[str, Any]:
    """The Haystack `State` schema for one call: the keys the tool reads or writes, the run's state and filters."""
    keys = {*tool_state, *(tool.outputs_to_state or {}), *(tool.inputs_from_state or {}), FILTERS_KEY}
    schema: dict[str, Any] = {key: {"type": object} for key in keys - {DOCUMENTS_KEY}}
    schema[DOCUMENTS_KEY] = {"type": list[Document]}
    return schema


def _capturing(tool: Tool, returned: list[Any], filters: Mapping[str, Any] | None, preview_chars: int) -> Tool:
    """
    A shallow copy of the tool that records what it returns (to find its Documents) and, when the tool has no
    `outputs_to_string` of its own, renders Documents as readable text (other results as Haystack does).
    """
    runnable = copy.copy(tool)
    invoke = tool.invoke

    def recording_invoke(**kwargs: Any) -> Any:
        result = invoke(**kwargs)
        returned.append(result)
        return result

    def readable(value: Any) -> str:
        documents = documents_in(value)
        if documents is None:
            return _result_to_string(value)
        return format_tool_documents(tool.name, within_filters(documents, filters), preview_chars)

    runnable.invoke = recording_invoke  # type: ignore[method-assign]
    if not tool.outputs_to_string:
        runnable.outputs_to_string = {"handler": readable}
    return runnable
