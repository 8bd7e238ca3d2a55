# SPDX-License-Identifier: Apache-2.0
import pytest
from haystack import Document
from tiny_hhem import build_tiny_hhem

from haystack_agentic.dataclasses.loop_state import LoopState, ToolStep


@pytest.fixture(scope="session")
def tiny_hhem(tmp_path_factory):
    """A tiny random model with HHEM's structure: (checkpoint_dir, foundation_dir)."""
    return build_tiny_hhem(tmp_path_factory.mktemp("tiny_hhem"))


def ended_state(
    answer="Paris is the capital of France. London is in England.",
    chunks=None,
    terminated_by="answered",
    error=None,
    **changes,
):
    chunks = (
        chunks
        if chunks is not None
        else (
            Document(id="paris", content="Paris is the capital city of France.", meta={"title": "Paris"}),
            Document(id="london", content="London is the capital of England.", meta={"title": "London"}),
        )
    )
    history = (
        ToolStep(iteration=1, action="search", query="paris", returned_chunk_ids=("paris",)),
        ToolStep(iteration=2, action="search", query="london", returned_chunk_ids=("london", "paris")),
    )
    values = {"question": "q", "chunks": tuple(chunks), "tool_history": history, "iteration": 2, **changes}
    return LoopState(**values).finish(terminated_by, answer=answer, error=error)
