# SPDX-License-Identifier: Apache-2.0

from typing import Any

from haystack import component, default_from_dict, default_to_dict, logging

from haystack_agentic.tracing import tag_current_span
from haystack_agentic.dataclasses.loop_state import LoopState

logger = logging.getLogger(__name__)


@component
class LoopResultBuilder:
    """
    Turns the final `LoopState` of the agentic loop into its JSON-serialisable result dict.

    It is the last stage of the loop pipeline (after the grounder, when there is one), so every path of the loop
    ends in the same `result` output, ready for `Pipeline.run`, hayhooks or `--json`.

    ### Usage example
    ```python
    from haystack_agentic import LoopResultBuilder, LoopState

    state = LoopState(question="q").finish("answered", answer="a")
    print(LoopResultBuilder().run(state=state)["result"]["answer"])  # "a"
    ```
    """

    @component.output_types(result=dict[str, Any])
    def run(self, state: LoopState) -> dict[str, dict[str, Any]]:
        """
        Build the result.

        :param state: The ended run's state.
        :returns: `{"result": dict}` with `answer`, `terminated_by`, `iterations`, `tool_history`, `documents`,
            `grounding`, `usage`, `error` and `metadata` (see `LoopState.to_result`).
        """
        if state.terminated_by is None:
            logger.warning("LoopResultBuilder got a state that never ended; reporting it as an error.")
            state = state.finish("error", error="The loop ended without a termination reason.")
        result = state.to_result()
        tag_current_span(
            terminated_by=result["terminated_by"],
            iterations=result["iterations"],
            chunks=len(result["documents"]),
            llm_calls=result["usage"]["total"]["calls"],
            prompt_tokens=result["usage"]["total"]["prompt_tokens"],
            completion_tokens=result["usage"]["total"]["completion_tokens"],
            answered=result["answer"] is not None,
        )
        return {"result": result}

    @component.output_types(result=dict[str, Any])
    async def run_async(self, state: LoopState) -> dict[str, dict[str, Any]]:
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
