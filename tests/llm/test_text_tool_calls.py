# SPDX-License-Identifier: Apache-2.0
"""Tool calls written as reply text (`llm.text_tool_calls`): the shapes small local models write are recovered, and
prose, tool definitions, unknown tools, invalid arguments and hostile text never are (and never raise)."""

import json
import time

import pytest
from haystack.dataclasses import StreamingChunk
from haystack.tools import Tool
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scripted_chat_generator import ScriptedChatGenerator

from haystack_agentic.components.routers.agentic_router import AgenticRouter
from haystack_agentic.llm.streaming import CallTextHold
from haystack_agentic.llm.text_tool_calls import LEAD_IN_MAX_CHARS, MAX_REPLY_CHARS, could_be_calls, recover_tool_calls


def _year_tool() -> Tool:
    parameters = {"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]}
    return Tool(name="film_year", description="Year of a film.", parameters=parameters, function=lambda title: "2014")


TOOLS = AgenticRouter(chat_generator=ScriptedChatGenerator(), tools=[_year_tool()])._all_tools
SEARCH = {"name": "search", "arguments": {"query": "Big Stone Gap director"}}
ANSWER = {"name": "answer", "arguments": {"text": "Greenwich Village"}}


def _calls(text: str, truncated: bool = False) -> list[tuple[str, dict]]:
    return [(c.tool_name, c.arguments) for c in recover_tool_calls(text, TOOLS, truncated=truncated)]


SEARCH_CALL = [("search", {"query": "Big Stone Gap director"})]
BOTH = [*SEARCH_CALL, ("answer", {"text": "Greenwich Village"})]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (json.dumps(SEARCH), SEARCH_CALL),
        (f"```json\n{json.dumps(SEARCH)}\n```", SEARCH_CALL),
        (f"```\n{json.dumps(SEARCH)}\n```", SEARCH_CALL),
        (f"<tool_call>\n{json.dumps(SEARCH)}\n</tool_call>", SEARCH_CALL),
        (f"<tools>\n{json.dumps(SEARCH)}\n</tools>", SEARCH_CALL),
        (f"<tools>{json.dumps(SEARCH)}", SEARCH_CALL),  # the closing tag left out
        (f"I'll search for the film first.\n```json\n{json.dumps(SEARCH)}\n```", SEARCH_CALL),
        (f"Let me look it up: {json.dumps(SEARCH)}", SEARCH_CALL),
        ('{"name": "search", "arguments": "{\\"query\\": \\"Big Stone Gap director\\"}"}', SEARCH_CALL),
        ('{"name": "search", "parameters": {"query": "Big Stone Gap director"}}', SEARCH_CALL),
        (
            '{"type": "function", "function": {"name": "search", "arguments": {"query": "Big Stone Gap director"}}}',
            SEARCH_CALL,
        ),
        (json.dumps([SEARCH, ANSWER]), BOTH),
        (f"{json.dumps(SEARCH)}\n{json.dumps(ANSWER)}", BOTH),
        (f"{json.dumps(SEARCH)},\n{json.dumps(ANSWER)}", BOTH),
        (f"```json\n{json.dumps(SEARCH)}\n```\n```json\n{json.dumps(ANSWER)}\n```", BOTH),
        (f"<tool_call>{json.dumps(SEARCH)}</tool_call>\n<tool_call>{json.dumps(ANSWER)}</tool_call>", BOTH),
        ('{"name": "give_up"}', [("give_up", {})]),
        # the arguments beside the name, as the real 0.5B wrote an answer after a search (benchmarks/real_llm.py)
        ('{"name": "answer", "text": "Greenwich Village"}', [("answer", {"text": "Greenwich Village"})]),
        (f'{json.dumps(SEARCH)}\n{{"name": "answer", "text": "Greenwich Village"}}', BOTH),
        ('{"name": "search", "query": "Big Stone Gap director"}', SEARCH_CALL),
        # a call, then a result the model invented in the template's tags (the real 1.5B, benchmarks/real_llm.py)
        (
            f'{json.dumps(SEARCH)}\n<tool_response>\n1 result(s) for "x": Adriana Trigiani\n</tool_response>',
            SEARCH_CALL,
        ),
        (f"{json.dumps(SEARCH)}\n<tool_response>\nAdriana Trigiani lives in", SEARCH_CALL),
        ('{"name": "film_year", "arguments": {"title": "Big Stone Gap"}}', [("film_year", {"title": "Big Stone Gap"})]),
    ],
)
def test_calls_written_as_text_are_recovered(text, expected):
    assert _calls(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (json.dumps(SEARCH) + '\n{"name": "answer", "argum', SEARCH_CALL),
        (f"```json\n{json.dumps(SEARCH)}\n```\n```json\n" + '{"name": "ans', SEARCH_CALL),
        (f"```json\n[{json.dumps(SEARCH)}, " + '{"name": "answer", "arguments": {"te', SEARCH_CALL),
        (f"<tool_call>{json.dumps(SEARCH)}</tool_call>\n<tool_c", SEARCH_CALL),
        (f"<tools>\n{json.dumps(SEARCH)}\n" + '{"name": "search", "arguments": {"query": "Trig', SEARCH_CALL),
    ],
)
def test_a_reply_cut_by_the_token_limit_keeps_its_complete_calls(text, expected):
    assert _calls(text, truncated=True) == expected
    assert _calls(text, truncated=False) == []  # not cut: a broken call makes the reply text


@pytest.mark.parametrize(
    "text",
    [
        "Adriana Trigiani is based in Greenwich Village.",
        "The answer is Greenwich Village [1][2].",
        'The tool returned {"name": "search"} but I answer: Greenwich Village.',
        f"She is based in Greenwich Village.\n\nI could also call {json.dumps(SEARCH)} to check.",
        f"{json.dumps(SEARCH)}\nThe director is Adriana Trigiani, based in Greenwich Village.",  # prose after the call
        "A long first line that explains a great deal about the question before it gets to any call at all, "
        "and keeps going well past the length of a lead-in line, so that it is plainly prose and not a preamble: "
        + json.dumps(SEARCH),
        f"First line.\nSecond line of prose.\n{json.dumps(SEARCH)}",  # more than one lead-in line
        '{"name": "delete_everything", "arguments": {}}',  # not an offered tool
        '{"name": "search", "arguments": {"query": 42}}',  # invalid arguments
        '{"name": "search", "arguments": {}}',  # a required argument missing
        '{"name": "search", "arguments": {"query": "x", "top_k": "many"}}',
        '{"name": "search", "arguments": {"query": "x", "color": "red"}}',  # a key the tool does not declare
        '{"name": "search", "arguments": "not json"}',
        '{"name": "search", "arguments": [1, 2]}',
        '{"name": "search", "query": "x", "color": "red"}',  # beside the name, a key the tool does not declare
        '{"name": "search", "query": "x", "arguments": {"query": "y"}}',  # both shapes at once
        '{"name": "give_up", "description": "Stop."}',  # a definition without parameters copied back
        # a tool definition copied back
        (
            '{"type": "function", "function": {"name": "give_up", "description": "Stop.", "parameters": '
            '{"type": "object", "properties": {"reason": {"type": "string"}}}}}'
        ),
        (
            '<tools>\n{"name": "give_up", "description": "Stop.", "parameters": {"type": "object", "properties": {}}}'
            "\n</tools>"
        ),
        json.dumps([SEARCH, {"name": "unknown", "arguments": {}}]),  # one bad call spoils the reply
        json.dumps([]),
        "[1]",
        "```python\nsearch('Big Stone Gap')\n```",
        "<tool_response>\nAdriana Trigiani lives in Greenwich Village.\n</tool_response>",  # an invented result only
        '{"name": "search", "arguments": {"query": "Big Stone',  # cut with no complete call
        "",
        "   ",
    ],
)
def test_prose_and_invalid_calls_stay_text(text):
    assert _calls(text) == []
    assert _calls(text, truncated=True) == [] or text.startswith(json.dumps(SEARCH))


def test_cut_reply_with_only_a_partial_call_is_text():
    assert _calls('{"name": "search", "arguments": {"query": "Big', truncated=True) == []
    assert _calls("```json\n", truncated=True) == []


def test_a_call_repeated_until_the_token_limit_runs_once():
    text = "<tools>\n" + "\n".join([json.dumps(SEARCH)] * 10) + '\n{"name":'
    assert _calls(text, truncated=True) == SEARCH_CALL
    assert _calls(json.dumps([SEARCH, ANSWER, SEARCH])) == BOTH


def test_recovered_calls_have_ids_that_pair_tool_results():
    calls = recover_tool_calls(json.dumps([SEARCH, ANSWER]), TOOLS, id_prefix="text-call-3")
    assert [c.id for c in calls] == ["text-call-3-1", "text-call-3-2"]


def test_no_tools_offered_recovers_nothing():
    assert recover_tool_calls(json.dumps(SEARCH), []) == []


@pytest.mark.parametrize(
    "text",
    [
        "{" * 1_000_000,
        "[" * 1_000_000,
        "[" * (MAX_REPLY_CHARS - 1),
        "{" * (MAX_REPLY_CHARS - 1),
        "<tools>" * 4000,
        "```\n" * 7000,
        '{"name": "search", "arguments": {"query": "x", "top_k": ' + "[" * 20000 + "]" * 20000 + "}}",
        '{"name": "search", "arguments": {"query": "' + "a" * MAX_REPLY_CHARS + '"}}',
    ],
)
def test_hostile_text_is_not_calls(text):
    assert recover_tool_calls(text, TOOLS, truncated=True) == []
    assert recover_tool_calls(text, TOOLS) == []
    hold = CallTextHold()
    hold.accept([StreamingChunk(content=text)])
    hold.release()


@pytest.mark.slow
@pytest.mark.parametrize("size", [10_000, MAX_REPLY_CHARS - 1])
def test_hostile_text_is_read_in_linear_time(size):
    texts = ["{" * size, "[" * size, "<tools>" * (size // 7), "```\n" * (size // 4), '{"a": ' * (size // 6)]
    started = time.perf_counter()
    for text in texts:
        recover_tool_calls(text, TOOLS, truncated=True)
        could_be_calls(text)
    assert time.perf_counter() - started < 2.0  # milliseconds when linear; generous for a loaded machine


@pytest.mark.parametrize(
    ("prefix", "expected"),
    [
        ("", True),
        ("  ", True),
        ("{", True),
        ('{"name": "sea', True),
        ("```", True),
        ("`", True),
        ("<tool", True),
        ("I'll search first.", True),  # could be a lead-in line
        ("I'll search first.\n", True),
        ("I'll search first.\n``", True),
        ("I'll search first.\nThe answer", False),
        ("Adriana Trigiani is based in Greenwich Village.\nShe", False),
        ("x" * (LEAD_IN_MAX_CHARS + 1), False),
    ],
)
def test_could_be_calls_decides_on_the_start_of_a_reply(prefix, expected):
    assert could_be_calls(prefix) is expected


def test_call_text_hold_releases_prose_and_drops_calls():
    prose = CallTextHold()
    assert prose.accept([StreamingChunk(content="The answer")]) == []
    released = prose.accept([StreamingChunk(content=" is here.\nIt")])
    assert "".join(c.content for c in released) == "The answer is here.\nIt"
    assert prose.accept([StreamingChunk(content=" goes on")])[0].content == " goes on"

    call = CallTextHold()
    for piece in ('{"name": ', '"search", "arguments": ', '{"query": "x"}}'):
        assert call.accept([StreamingChunk(content=piece)]) == []
    call.drop()
    assert call.accept([StreamingChunk(content="late")])[0].content == "late"

    short = CallTextHold()
    assert short.accept([StreamingChunk(content="Paris.")]) == []
    assert [c.content for c in short.release()] == ["Paris."]


# --- properties --------------------------------------------------------------------------------------------------

_queries = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=40)
_call = st.builds(lambda q: {"name": "search", "arguments": {"query": q}}, _queries)
_wrappers = st.sampled_from(
    ["{}", "```json\n{}\n```", "```\n{}\n```", "<tool_call>\n{}\n</tool_call>", "<tools>{}</tools>", "<tools>\n{}"]
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(_call, min_size=1, max_size=4),
    _wrappers,
    st.sampled_from(["", "Searching now.\n", "Let me check: "]),
    st.booleans(),
)
def test_property_written_calls_are_recovered_in_order(calls, wrapper, lead_in, as_list):
    blocks = [json.dumps(calls)] if as_list else [json.dumps(call) for call in calls]
    if wrapper == "<tools>\n{}":  # an unclosed tag only at the end
        blocks = ["\n".join(blocks)]
    text = lead_in + "\n".join(wrapper.replace("{}", block) for block in blocks)
    expected = [("search", call["arguments"]) for call in calls]
    assert _calls(text) == [call for n, call in enumerate(expected) if call not in expected[:n]]  # repeats run once


_prose = st.text(st.characters(blacklist_categories=("Cs",)), max_size=300).filter(
    lambda t: any(c.isalpha() for c in t)
)


@settings(max_examples=300, deadline=None)
@given(_prose, st.booleans())
def test_property_prose_is_never_calls(text, truncated):
    # Text with a letter outside any JSON/fence/tag is prose; only a sequence of valid calls is recovered.
    recovered = recover_tool_calls(text, TOOLS, truncated=truncated)
    assert recovered == [] or all(c.tool_name in {t.name for t in TOOLS} for c in recovered)
    if "{" not in text and "[" not in text:
        assert recovered == []


@settings(max_examples=200, deadline=None)
@given(st.lists(_call, min_size=1, max_size=3), _prose)
def test_property_calls_followed_by_prose_are_text(calls, prose):
    text = "\n".join(json.dumps(call) for call in calls) + "\n" + prose
    if not prose.strip() or prose.lstrip()[0] in "{[<`":
        return
    assert _calls(text) == []


@settings(max_examples=200, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=8),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
        max_leaves=20,
    ),
    st.sampled_from(["{}", "```json\n{}\n```", "<tool_call>{}</tool_call>", "Lead: {}"]),
    st.booleans(),
)
def test_property_arbitrary_json_never_raises_and_only_names_offered_tools(value, wrapper, truncated):
    text = wrapper.replace("{}", json.dumps(value))
    for call in recover_tool_calls(text, TOOLS, truncated=truncated):
        assert call.tool_name in {t.name for t in TOOLS}


@settings(max_examples=150, deadline=None)
@given(st.lists(_call, min_size=1, max_size=3), _wrappers, st.sampled_from(["", "Searching now.\n", "Let me check: "]))
def test_property_no_prefix_of_a_recovered_reply_is_streamed(calls, wrapper, lead_in):
    text = lead_in + "\n".join(wrapper.replace("{}", json.dumps(call)) for call in calls)
    if wrapper == "<tools>\n{}":
        text = lead_in + "<tools>\n" + "\n".join(json.dumps(call) for call in calls)
    assert _calls(text)
    hold = CallTextHold()
    for start in range(0, len(text), 3):  # streamed three characters at a time: nothing passes before the end
        assert hold.accept([StreamingChunk(content=text[start : start + 3])]) == []


def test_a_tool_response_tag_inside_a_calls_json_is_text():
    # Found by the property test: only a tag opening a line is an invented result; inside a JSON string it is text.
    text = '{"name": "search", "arguments": {"query": "<tool_response>"}}'
    assert _calls(text) == [("search", {"query": "<tool_response>"})]
    assert _calls(text + "\n  <tool_response>\nmade up\n</tool_response>") == [("search", {"query": "<tool_response>"})]
