# SPDX-License-Identifier: Apache-2.0

from haystack import component, logging

from haystack_agentic.dataclasses.loop_state import LoopState, ToolStep

logger = logging.getLogger(__name__)


@component
class RetrievalOnlyAnswerer:
    """
    Stands in for the `Answerer` (same sockets) in retrieval-only evaluation (`haystack-agentic eval --no-answer`):
    the run ends `answered` with the controller's draft, if any, without an LLM call.

    ### Usage example
    ```python
    from benchmarks.harness.retrieval_only_answerer import RetrievalOnlyAnswerer
    from haystack_agentic.dataclasses.loop_state import LoopState

    out = RetrievalOnlyAnswerer().run(state=LoopState(question="q", pending_action="answer"))
    print(out["finished"].outcome.terminated_by, out["finished"].outcome.answer)  # answered None
    ```
    """

    @component.output_types(state=LoopState, finished=LoopState)
    def run(self, state: LoopState) -> dict[str, LoopState]:
        """
        End the run (a reflect request goes back into the loop unchanged).

        :param state: The run's state from the router.
        :returns: `{"finished": LoopState}` (`terminated_by="answered"`, `answer` = the draft or `None`), or
            `{"state": LoopState}` for a `reflect`/`draft` request, which is skipped.
        """
        action = state.pending_action or "answer"
        if action in ("reflect", "draft"):
            step = ToolStep(iteration=state.iteration + 1, action=action, result="skipped (retrieval-only)")
            return {"state": state.with_step(step).evolve(pending_action=None)}
        return {"finished": state.finish("answered", answer=state.draft)}

    @component.output_types(state=LoopState, finished=LoopState)
    async def run_async(self, state: LoopState) -> dict[str, LoopState]:
        """Async twin of `run`."""
        return self.run(state)
