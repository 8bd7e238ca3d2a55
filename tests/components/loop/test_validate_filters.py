# SPDX-License-Identifier: Apache-2.0
"""`validate_filters`: every node of a filter tree is checked, with a message that says where and what."""

import pytest
from haystack import Document
from haystack.document_stores.in_memory import InMemoryDocumentStore

from haystack_agentic.components.loop.loop_controller import validate_filters

TITLE = {"field": "meta.title", "operator": "==", "value": "Big Stone Gap"}


@pytest.mark.parametrize(
    "filters",
    [
        TITLE,
        {"operator": "AND", "conditions": [TITLE, {"field": "meta.year", "operator": ">", "value": 2000}]},
        {"operator": "NOT", "conditions": [{"field": "meta.kind", "operator": "in", "value": ["film", "book"]}]},
        {
            "operator": "OR",
            "conditions": [{"operator": "AND", "conditions": [TITLE]}, {"operator": "AND", "conditions": []}],
        },
    ],
)
def test_valid_filters_pass_and_match_like_a_store(filters):
    assert validate_filters(filters) is filters
    store = InMemoryDocumentStore()
    store.write_documents([Document(content="x", meta={"title": "Big Stone Gap", "year": 2014, "kind": "film"})])
    store.filter_documents(filters)  # the same filters work in a real store


@pytest.mark.parametrize("empty", [None, {}])
def test_no_filters(empty):
    assert validate_filters(empty) is None


@pytest.mark.parametrize(
    ("filters", "message"),
    [
        ("meta.kind == place", "filters must be a dict"),
        ([TITLE], "filters must be a dict"),
        ({"operator": "AND"}, r"filters: a group needs 'conditions'"),
        ({"meta.title": "x"}, "has neither 'field' nor 'operator'"),
        ({"operator": "XOR", "conditions": [TITLE]}, "unknown logical operator 'XOR'"),
        ({"field": "meta.title", "operator": "~", "value": "x"}, "Unknown comparison operator '~'"),
        ({"field": "meta.title", "operator": "=="}, "'value' key missing"),
        ({"field": "meta.kind", "operator": "in", "value": "film"}, "must be a `list`"),
        ({"field": 3, "operator": "==", "value": "x"}, "'field' must be a non-empty string"),
        ({"operator": "AND", "conditions": [TITLE, "meta.kind"]}, r"filters.conditions\[1\] must be a dict"),
    ],
)
def test_invalid_filters_say_what_is_wrong(filters, message):
    with pytest.raises(ValueError, match=message):
        validate_filters(filters)


def test_a_bad_condition_after_one_that_does_not_match_is_still_found():
    # Matching stops at the first false condition of an AND; the check walks every node instead.
    filters = {"operator": "AND", "conditions": [TITLE, {"field": "meta.kind", "operator": "like", "value": "x"}]}
    with pytest.raises(ValueError, match=r"filters.conditions\[1\]: Unknown comparison operator 'like'"):
        validate_filters(filters)


def test_deeply_nested_filters_are_checked_without_recursion():
    filters = TITLE
    for _ in range(5000):
        filters = {"operator": "AND", "conditions": [filters]}
    assert validate_filters(filters) is filters
    bad = {"field": "meta.x", "operator": "in", "value": 1}
    for _ in range(5000):
        bad = {"operator": "OR", "conditions": [bad]}
    with pytest.raises(ValueError, match="must be a `list`"):
        validate_filters(bad)
