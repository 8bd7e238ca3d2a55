# SPDX-License-Identifier: Apache-2.0
"""
A test double for the citation step: `LoopResultBuilder`'s result plus `citations` in the shape the citation
contract gives them, so what shows citations (`ask`, `chat`, the served chat reply, the MCP tool) is tested on
results whose citations the test controls. Used in-process as `citing_result.CitingResultBuilder` (pytest puts
`tests/` on `sys.path`); the serving tests' server gets `tests/` on its `PYTHONPATH` and this module on its
deserialization allow-list.
"""

from typing import Any

from haystack import component, default_from_dict, default_to_dict

from haystack_agentic.components.loop.loop_result_builder import RESULT_TYPES, LoopResultBuilder
from haystack_agentic.dataclasses.loop_state import LoopState
from haystack_agentic.grounding.markers import strip_markers

#: The type name a pipeline YAML gives this double.
CITING_TYPE = "citing_result.CitingResultBuilder"


def first_sentence_end(text: str) -> int:
    """The offset just past the first sentence of `text` (its first `. `), or its length."""
    end = text.find(". ")
    return len(text) if end < 0 else end + 1


@component
class CitingResultBuilder(LoopResultBuilder):
    """
    The loop result with `citations`: the first sentence of each of the result's first `cite` documents, a
    `[n]` marker for each appended to the answer; the numbers in `unsupported` checked unsupported ("offline"),
    the others supported. A run without an answer has no citations.
    """

    def __init__(self, cite: int = 2, unsupported: list[int] | None = None) -> None:
        """
        :param cite: How many of the result's documents to cite (in the order of `documents`).
        :param unsupported: The citation numbers the check found unsupported.
        """
        self.cite = cite
        self.unsupported = list(unsupported or [])

    @component.output_types(**RESULT_TYPES)
    def run(self, state: LoopState) -> dict[str, Any]:
        """The result of `LoopResultBuilder.run` with `citations` (and the answer with their markers)."""
        result = LoopResultBuilder.run(self, state=state)
        citations: list[dict[str, Any]] = []
        if result["answer"] is not None:
            claim = strip_markers(result["answer"])  # the real citations replaced by controlled ones
            for n, document in enumerate(result["documents"][: self.cite], start=1):
                content = document.content or ""
                end = first_sentence_end(content)
                found = [s for s in result["tool_history"] if document.id in (s.get("returned_chunk_ids") or [])]
                search = found[0] if found else None
                citations.append(
                    {
                        "n": n,
                        "document_id": document.id,
                        "title": document.meta.get("title"),
                        "quote": content[:end],
                        "start": 0,
                        "end": end,
                        "claim": claim,
                        "search": {"iteration": search["iteration"], "query": search["query"]} if search else None,
                        "supported": n not in self.unsupported,
                        "check": "offline",
                    }
                )
            if citations:
                result["answer"] = claim + " " + "".join(f"[{c['n']}]" for c in citations)
        return {**result, "citations": citations}

    @component.output_types(**RESULT_TYPES)
    async def run_async(self, state: LoopState) -> dict[str, Any]:
        """The same as `run`."""
        return self.run(state=state)

    def to_dict(self) -> dict[str, Any]:
        """Serialize the component to a dictionary."""
        return default_to_dict(self, cite=self.cite, unsupported=self.unsupported)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "CitingResultBuilder":
        """Deserialize the component from a dictionary."""
        return default_from_dict(cls, data)


def with_citations(pipeline: dict[str, Any], cite: int = 2, unsupported: list[int] | None = None) -> dict[str, Any]:
    """A loop pipeline dict whose `result` component is a `CitingResultBuilder` (the dict is changed and returned)."""
    pipeline["components"]["result"] = {
        "type": CITING_TYPE,
        "init_parameters": {"cite": cite, "unsupported": list(unsupported or [])},
    }
    return pipeline
