# SPDX-License-Identifier: Apache-2.0

from typing import Any

from haystack import component, logging

from haystack_agentic.dataclasses.loop_state import LoopState
from haystack_agentic.llm.valid_text import strict_json
from haystack_agentic.tracing import tag_current_span

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
    Turns the final `LoopState` of the agentic loop into its JSON-serialisable result dict, one socket per key.

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
        :returns: The result dict, one output socket per key (strict JSON: lone surrogates are U+FFFD, non-finite
            floats `None`): `answer` (str or None), `terminated_by`, `iterations`, `tool_history`, `documents`
            (dicts, see `LoopState.to_result`), `grounding`, `usage`, `error`, `metadata`, `evidence`, `tool_state`,
            `messages` (the conversation with the answer appended, as `ChatMessage.to_dict()` dicts) and `citations`
            (one dict per `[n]` marker, see `haystack_agentic.grounding.citations`).
        """
        if state.outcome.terminated_by is None:
            logger.warning("LoopResultBuilder got a state that never ended; reporting it as an error.")
            state = state.finish("error", error="The loop ended without a termination reason.")
        # Strict JSON whatever the LLMs, tools and stores put in the state (a lone surrogate in an exception message,
        # a NaN score): the result is what `--json`, hayhooks and MCP send.
        result = strict_json(state.to_result())
        total = result["usage"]["total"]
        tag_current_span(
            terminated_by=result["terminated_by"],
            iterations=result["iterations"],
            chunks=len(result["documents"]),
            llm_calls=total["calls"],
            prompt_tokens=total["prompt_tokens"],
            completion_tokens=total["completion_tokens"],
            answered=result["answer"] is not None,
        )
        return result

    @component.output_types(**RESULT_TYPES)
    async def run_async(self, state: LoopState) -> dict[str, Any]:
        """Async twin of `run` (no I/O): runs on the event loop instead of a worker thread."""
        return self.run(state=state)
