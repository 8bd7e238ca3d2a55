# SPDX-License-Identifier: Apache-2.0
"""
A user tool run by its public `invoke`, with state handling as Haystack's `Agent` applies it.

A user tool run by its public `invoke`, with `inputs_from_state`, `outputs_to_state` and `outputs_to_string` as
Haystack's `Agent` applies them (its functions for it are private); Documents it returns join the run's chunks.
"""

import dataclasses
import inspect
import json
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from haystack import Document, logging, tracing
from haystack.components.agents.state import State
from haystack.dataclasses import ChatMessage, ToolCall
from haystack.tools import ComponentTool, Tool
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
    What one user tool call produced: message, documents, state and text.

    What one user tool call produced: the tool `message` for the model, the `documents` to merge into the run's
    chunks (within its filters), the `tool_state` after the call, the `text` the model sees, whether it failed.
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
) -> ToolOutcome:
    """
    Run one user tool call; never raises (a failure is a tool error).

    Run one user tool call with the model's parsed `arguments`, the run's `tool_state` (`LoopState.tool_state`) and
    its `filters` (in the state under `filters`). Never raises: a failing tool or handler is a tool error.

    Documents the tool returns (a list, or lists among a dict's values, as a `ComponentTool` around a retriever
    returns) or writes to the `documents` state key are the outcome's `documents`, if within the filters.
    """
    state = State(schema=_schema(tool, tool_state), data={**dict(tool_state), FILTERS_KEY: filters})
    # Named and tagged as Haystack's Agent's tool spans.
    tags = {"haystack.tool.name": tool.name, "haystack.tool.description": tool.description}
    failed = False
    with tracing.tracer.trace("haystack.agent.step.tool", tags=tags) as span:
        span.set_content_tag("haystack.agent.step.tool.input", arguments)
        try:
            result = tool.invoke(**_arguments_with_state(tool, arguments, state))
            _merge_outputs_into_state(tool, result, state)
            text = _result_text(tool, result, filters)
            span.set_content_tag("haystack.agent.step.tool.output", result)
        except Exception as exc:
            span.set_tag("haystack.tool.error", True)
            text, failed = f"Error in {tool.name}: {type(exc).__name__}: {exc}", True
    if failed:
        logger.warning("User tool {tool} failed: {error}", tool=tool.name, error=text)
        return ToolOutcome(ChatMessage.from_tool(text, origin=tool_call, error=True), (), tool_state, text, True)
    found = [*(documents_in(result) or []), *(state.get(DOCUMENTS_KEY) or [])]
    new_state = {k: v for k, v in state.data.items() if k not in (DOCUMENTS_KEY, FILTERS_KEY, "messages")}
    kept = tuple(within_filters(found, filters))
    return ToolOutcome(ChatMessage.from_tool(text, origin=tool_call), kept, new_state, text, False)


def documents_in(result: Any) -> list[Document] | None:
    """The Documents in a tool's result (a list of them, or those lists among a dict's values), `None` for none."""
    if _is_documents(result):
        return list(result)
    if isinstance(result, Mapping):
        found = [doc for value in result.values() if _is_documents(value) for doc in value]
        return found if any(_is_documents(v) for v in result.values()) else None
    return None


def within_filters(documents: list[Document], filters: Mapping[str, Any] | None) -> list[Document]:
    """The Documents that match `filters` (all when `None`); one the filters cannot be applied to is left out."""
    if not filters:
        return list(documents)
    kept = []
    for doc in documents:
        try:
            if document_matches_filter(dict(filters), doc):
                kept.append(doc)
        except Exception as exc:
            logger.warning("Tool document {id} left out: the filters do not apply ({error})", id=doc.id, error=exc)
    return kept


def _is_documents(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and bool(value) and all(isinstance(v, Document) for v in value)


def _schema(tool: Tool, tool_state: Mapping[str, Any]) -> dict[str, Any]:
    """The `State` schema for one call: the keys the tool reads or writes, the run's state and filters."""
    keys = {*tool_state, *(tool.outputs_to_state or {}), *(tool.inputs_from_state or {}), FILTERS_KEY}
    schema: dict[str, Any] = {key: {"type": object} for key in keys - {DOCUMENTS_KEY}}
    schema[DOCUMENTS_KEY] = {"type": list[Document]}
    return schema


def _arguments_with_state(tool: Tool, arguments: dict[str, Any], state: State) -> dict[str, Any]:
    """The model's arguments, the `inputs_from_state` values it did not give, the `State` for a parameter typed so."""
    final = dict(arguments)
    for state_key, parameter in (tool.inputs_from_state or {}).items():
        if parameter not in final and state.has(state_key):
            final[parameter] = state.get(state_key)
    function = tool.function or tool.async_function
    if function is not None and not isinstance(tool, ComponentTool):
        try:
            hints = typing.get_type_hints(function)
        except Exception:
            hints = {}
        for name in inspect.signature(function).parameters:
            if hints.get(name) is State:
                final[name] = state
    return final


def _merge_outputs_into_state(tool: Tool, result: Any, state: State) -> None:
    """Write a dict result's values into the state by the tool's `outputs_to_state` (`source` key, `handler`)."""
    if not isinstance(result, dict):
        return
    for state_key, config in (tool.outputs_to_state or {}).items():
        source = config.get("source")
        if source and source not in result:
            continue
        state.set(state_key, result.get(source) if source else result, handler_override=config.get("handler"))


def _result_text(tool: Tool, result: Any, filters: Mapping[str, Any] | None) -> str:
    """The text the model sees: by `outputs_to_string`; without it, Documents numbered, anything else as JSON."""
    config = tool.outputs_to_string or {}
    if config and not any(key in config for key in ("source", "handler", "raw_result")):
        return _as_text({key: _output_text({**sub, "raw_result": False}, result, tool) for key, sub in config.items()})
    if not config and (documents := documents_in(result)) is not None:
        kept = within_filters(documents, filters)
        heading = f"{len(kept)} result(s) from {tool.name}:"
        return numbered_chunks(heading, kept, TOOL_DOCUMENT_PREVIEW_CHARS) if kept else f"No results from {tool.name}."
    return _output_text(config, result, tool)


def _output_text(config: Mapping[str, Any], result: Any, tool: Tool) -> str:
    """One output as text: its `source` value, through its `handler` (plainly when that fails)."""
    source = config.get("source")
    value = result.get(source) if source is not None and isinstance(result, dict) else result
    if (handler := config.get("handler")) is not None:
        try:
            return _as_text(handler(value))
        except Exception as exc:
            logger.warning(
                "Output handler of tool {tool} failed ({error}); plain text used.", tool=tool.name, error=exc
            )
    if config.get("raw_result") and isinstance(value, (list, tuple)):  # content parts: their text
        return " ".join(getattr(part, "text", "") or "" for part in value)
    return _as_text(value)


def _as_text(value: Any) -> str:
    """A string as it is; anything else as JSON (dataclasses by their fields), else `str()`."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=_jsonable)
    except (TypeError, ValueError):
        return str(value)


def _jsonable(value: Any) -> Any:
    if callable(getattr(value, "to_dict", None)):
        return value.to_dict()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return str(value)
