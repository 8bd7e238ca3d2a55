# SPDX-License-Identifier: Apache-2.0
"""Property-based tests (hypothesis) of the lenient parsers: json-mode decisions and tool-call arguments."""

import json

from haystack.dataclasses import ToolCall
from hypothesis import given, settings
from hypothesis import strategies as st

from haystack_agentic.llm.json_decisions import parse_json_decision
from haystack_agentic.llm.tool_arguments import InvalidArgumentsError, parse_arguments

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3),
    max_leaves=8,
)
decisions = st.fixed_dictionaries(
    {"action": st.sampled_from(["search", "reflect", "generate", "dance"])},
    optional={"reasoning": st.text(max_size=30), "query": st.text(max_size=30)},
)
prose = st.text(alphabet=st.characters(blacklist_characters="{}`"), max_size=40)


@given(decision=decisions, before=prose, after=prose, fenced=st.booleans())
@settings(max_examples=200)
def test_a_decision_is_found_in_prose_and_fences(decision, before, after, fenced):
    body = json.dumps(decision)
    text = f"{before}\n```json\n{body}\n```\n{after}" if fenced else f"{before} {body} {after}"
    assert parse_json_decision(text) == decision


@given(text=st.text(max_size=200))
@settings(max_examples=300)
def test_any_text_parses_to_a_dict_with_action_or_none(text):
    found = parse_json_decision(text)
    assert found is None or (isinstance(found, dict) and "action" in found)


@given(arguments=json_values)
@settings(max_examples=300)
def test_arguments_are_a_dict_or_a_clear_error(arguments):
    call = ToolCall(tool_name="search", arguments=arguments)  # the generator may hand over anything
    try:
        parsed = parse_arguments(call)
    except InvalidArgumentsError as exc:
        assert "arguments" in str(exc)
    else:
        assert isinstance(parsed, dict)
        if isinstance(arguments, str):  # a JSON string: blank means no arguments
            assert parsed == (json.loads(arguments) if arguments.strip() else {})
        else:
            assert parsed == (arguments or {})


@given(raw=st.text(max_size=60))
@settings(max_examples=300)
def test_raw_string_arguments_never_raise_anything_else(raw):
    call = ToolCall(tool_name="search", arguments=raw)
    try:
        parsed = parse_arguments(call)
    except InvalidArgumentsError:
        return
    assert isinstance(parsed, dict)
