# SPDX-License-Identifier: Apache-2.0

from typing import Any

from haystack import component, default_from_dict, default_to_dict, logging

from haystack_agentic.tracing import tag_current_span
from haystack_agentic.dataclasses.loop_state import LoopState
from haystack_agentic.llm.valid_text import strict_json

logger = logging.getLogger(__name__)

#: The loop result's keys (`LoopState.to_result`) and types: the output sockets of `LoopResultBuilder`.
RESULT_TYPES: dict[str, Any] = {
    "answer": str | None,
    "terminated_by": str,
    "iterations": int,
    "tool_history": list[dict[str, Any]],
    "documents": list[dict[str, Any]],
    "grounding": dict[str, Any] | None,
    "usage": dict[str, Any],
    "error": str | None,
    "metadata": dict[str, Any],
    "evidence": dict[str, Any] | None,
    "tool_state": dict[str, Any],
    "messages": list[dict[str, Any]],
    "citations": list[dict[str, Any]],
}


@component
class LoopResultBuilder:
    """
    Turns the final `LoopState` of the agentic loop into its JSON-serialisable result dict.

    It is the last stage of the loop pipeline (after the grounder, when there is one), so every path of the loop
    ends in the same outputs, ready for `Pipeline.run`, hayhooks or `--json`. Each key of the result is its own
    output socket, so the component's outputs *are* the result: `pipeline.run(data)["result"]["answer"]` in Python,
    `response["result"]["result"]["answer"]` from a YAML pipeline served by plain hayhooks (its `{"result": ...}`
    envelope, then this component's name).

    ### Usage example
    ```python
    from haystack_agentic import LoopResultBuilder, LoopState

    state = LoopState(question="q").finish("answered", answer="a")
    print(LoopResultBuilder().run(state=state)["answer"])  # "a"
    ```
    """

    @component.output_types(**RESULT_TYPES)
    def run(self, state: LoopState) -> dict[str, Any]:
        """
        Build the result.

        :param state: The ended run's state.
        :returns: The result dict (strict JSON: lone surrogates are U+FFFD, non-finite floats `None`): `answer` (str or None), `terminated_by`, `iterations`,
            `tool_history`, `documents` (dicts, see `LoopState.to_result`), `grounding`, `usage`, `error`,
            `metadata`, `evidence`, `tool_state` and `messages` (the conversation with the final answer appended,
            as `ChatMessage.to_dict()` dicts) and `citations` (the answer's `[n]` markers: one dict each, see
            `haystack_agentic.grounding.citations`; `[]` without an answer); one output socket each.
        """
        if state.outcome.terminated_by is None:
            logger.warning("LoopResultBuilder got a state that never ended; reporting it as an error.")
            state = state.finish("error", error="The loop ended without a termination reason.")
        # Strict JSON whatever the LLMs, tools and stores put in the state (a lone surrogate in an exception message,
        # a NaN score): the result is what `--json`, hayhooks and MCP send.
        result = strict_json(state.to_result())
        tag_current_span(
            terminated_by=result["terminated_by"],
            iterations=result["iterations"],
            chunks=len(result["documents"]),
            llm_calls=result["usage"]["total"]["calls"],
            prompt_tokens=result["usage"]["total"]["prompt_tokens"],
            completion_tokens=result["usage"]["total"]["completion_tokens"],
            answered=result["answer"] is not None,
        )
        return result

    @component.output_types(**RESULT_TYPES)
    async def run_async(self, state: LoopState) -> dict[str, Any]:
        """
        Async twin of `run` (no I/O): runs on the event loop instead of a worker thread.

        :param state: The ended run's state.
        :returns: The same as `run`.
        """
        return self.run(state=state)

    def to_dict(self) -> dict[str, Any]:
        """
        Serialize the component to a dictionary.

        :returns: Dictionary with serialized data.
        """
        return default_to_dict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "LoopResultBuilder":
        """
        Deserialize the component from a dictionary.

        :param data: Dictionary to deserialize from.
        :returns: The component.
        """
        return default_from_dict(cls, data)
