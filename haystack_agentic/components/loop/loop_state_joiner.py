# SPDX-License-Identifier: Apache-2.0

from typing import Any

from haystack import component, logging
from haystack.components.joiners import BranchJoiner

from haystack_agentic.dataclasses.loop_state import LoopState

logger = logging.getLogger(__name__)


@component
class LoopStateJoiner(BranchJoiner):
    """
    Haystack's `BranchJoiner` with a `run_async` (runs on the event loop): where the loop's ending branches meet.

    ### Usage example
    ```python
    from haystack_agentic import LoopState
    from haystack_agentic.components.loop.loop_state_joiner import LoopStateJoiner

    joiner = LoopStateJoiner()
    print(joiner.run(value=[LoopState(question="q")])["value"].question)  # "q"
    ```
    """

    def __init__(self, type_: type = LoopState) -> None:
        """:param type_: The type of the joined value. Default `LoopState`."""
        BranchJoiner.__init__(self, type_)  # `@component` rebuilds the class: no zero-argument super()

    async def run_async(self, **kwargs: Any) -> dict[str, Any]:
        """Async twin of `run` (no I/O): pass on the one value received."""
        return self.run(**kwargs)
