# SPDX-License-Identifier: Apache-2.0
"""`component_sockets`: one component's sockets through Haystack's public `Pipeline` API."""

import pytest
from haystack import Pipeline
from haystack.components.joiners import BranchJoiner
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.document_stores.in_memory import InMemoryDocumentStore

from haystack_agentic.sockets import NotAComponentError, component_sockets

pytestmark = pytest.mark.unit


def test_sockets_are_read_and_the_component_stays_free():
    retriever = InMemoryBM25Retriever(InMemoryDocumentStore())
    inputs, outputs = component_sockets(retriever)
    assert set(inputs) == {"query", "filters", "top_k", "scale_score"} and set(outputs) == {"documents"}
    assert inputs["query"]["is_mandatory"] and inputs["top_k"]["default_value"] is None
    pipeline = Pipeline()
    pipeline.add_component("retriever", retriever)  # the probe let it go
    assert component_sockets(BranchJoiner(int)) == (
        {"value": {"type": int, "is_mandatory": True}},
        {"value": {"type": int}},
    )


class NotDecorated:
    def run(self, query: str) -> dict:
        return {}


@pytest.mark.parametrize("value", [object(), "retriever", NotDecorated(), InMemoryBM25Retriever])
def test_anything_but_a_component_instance_is_refused(value):
    with pytest.raises(NotAComponentError, match="not a Haystack component"):
        component_sockets(value)


def test_a_component_in_a_pipeline_is_refused():
    retriever = InMemoryBM25Retriever(InMemoryDocumentStore())
    Pipeline().add_component("retriever", retriever)
    with pytest.raises(ValueError, match="already in a pipeline"):
        component_sockets(retriever)
