# SPDX-License-Identifier: Apache-2.0
"""
Issue 39: every value a model sends has a defined outcome. A `HostileChatGenerator` (tests/hostile_replies.py)
plays drawn `run` results in one LLM role at a time (controller in tools and json mode, answer LLM, fallback,
evidence judge, `LLMJudgeGrounder`), the evidence check on and off: JSON nested 100,000 deep, integers of more than
4,300 digits, NaN/inf, wrong JSON types at every level, `meta.usage` counts that are strings, inf or lists, reply
items that are a `str` or `None`, tool calls with no name or id, megabyte texts, regex worst cases, special tokens.

Properties: no exception leaves `run` (of the loop pipeline, its `run_async`, and `AgenticRAG(raise_on_failure=False)`),
`terminated_by` is one of the documented values, the result is strict JSON; under `slow`, at the sizes the issue
names, no run takes more than `CPU_SECONDS` of our CPU.

`HOSTILE_EXAMPLES` sets the examples per role (default 200, across the three entry points), `HOSTILE_RANDOM=1`
draws new ones each run. benchmarks/hostile_replies.py runs 10,000 per role.
"""

import json
import math
import os
import time

import pytest
from haystack.dataclasses import ChatMessage, ToolCall
from hostile_replies import (
    ENTRY_POINTS,
    HUGE_DIGITS,
    HUGE_INT,
    ROLES,
    TERMINATIONS,
    big_texts,
    deep_dict,
    deep_list,
    hostile_results,
    run_hostile,
)
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from haystack_agentic.components.loop.loop_result_builder import result_to_dict
from haystack_agentic.evidence.judge import parse_verdict
from haystack_agentic.llm.valid_text import (
    MAX_JSON_STARTS,
    MAX_MODEL_TEXT_CHARS,
    TOO_DEEP,
    decode_json,
    json_objects,
    model_value,
    valid_replies,
    valid_usage,
)

EXAMPLES = int(os.environ.get("HOSTILE_EXAMPLES", "200"))
#: Most seconds of our CPU one run may take with the biggest hostile replies (the runs here take well under 1 s).
CPU_SECONDS = 5.0


def _settings(examples: int):
    return settings(
        max_examples=examples,
        phases=[Phase.generate],
        deadline=None,
        database=None,
        derandomize=not os.environ.get("HOSTILE_RANDOM"),
        suppress_health_check=list(HealthCheck),
    )


def check(result: dict) -> None:
    assert result["terminated_by"] in TERMINATIONS, result["terminated_by"]
    json.dumps(result_to_dict(result), allow_nan=False, ensure_ascii=False).encode("utf-8")  # strict JSON, valid UTF-8
    if result["terminated_by"] == "error":
        assert isinstance(result["error"], str) and result["error"].strip()


@pytest.mark.parametrize("role", ROLES)
def test_no_hostile_reply_escapes_run(role):
    @_settings(EXAMPLES)
    @given(results=hostile_results("small"), evidence=st.booleans(), through=st.sampled_from(ENTRY_POINTS))
    def run(results, evidence, through):
        check(run_hostile(role, results, evidence, through))

    run()


@pytest.mark.slow
@pytest.mark.parametrize("role", ROLES)
def test_hostile_replies_at_full_size_end_within_a_few_cpu_seconds(role):
    """Every worst-case text at the sizes of issue 39 (100,000 deep, 200 KB of brackets, megabyte texts), as the
    role's reply text and as tool call arguments, evidence check on: each run under `CPU_SECONDS` of our CPU."""
    slowest = 0.0
    for text in big_texts("big"):
        for reply in (
            ChatMessage.from_assistant(text),
            ChatMessage.from_assistant(tool_calls=[ToolCall(tool_name="answer", arguments=text)]),
        ):
            started = time.process_time()
            check(run_hostile(role, [{"replies": [reply]}], evidence=True))
            seconds = time.process_time() - started
            assert seconds < CPU_SECONDS, (role, text[:40], len(text), seconds)
            slowest = max(slowest, seconds)
    print(f"{role}: slowest {slowest:.2f} s of CPU")


# --- each class of fault, where the value enters --------------------------------------------------------------


def test_reply_items_of_the_wrong_type_are_read_or_dropped_and_a_broken_result_is_an_error():
    replies = valid_replies({"replies": ["plain text", None, 5, {"text": "x"}, ChatMessage.from_assistant("ok")]})
    assert [r.text for r in replies] == ["plain text", "ok"]
    assert valid_replies({}) == [] and valid_replies({"replies": None}) == []
    for broken in (None, "replies", {"replies": "text"}, {"replies": 5}):
        with pytest.raises(TypeError, match="chat generator returned"):
            valid_replies(broken)


@pytest.mark.parametrize(
    "count", ["12", "many", math.inf, math.nan, [1], {"a": 1}, True, -3, HUGE_INT, 10**30], ids=range(10)
)
def test_a_token_count_that_is_not_a_count_is_not_a_report(count):
    usage = {"prompt_tokens": count, "completion_tokens": 7, "total_tokens": 7.0, "details": {"cached": 1}}
    assert valid_usage(usage) == {"completion_tokens": 7, "total_tokens": 7, "details": {"cached": 1}}
    assert valid_usage("12 tokens") == {} and valid_usage([1, 2]) == {}


def test_usage_that_is_not_a_count_is_estimated_in_the_run():
    reply = ChatMessage.from_assistant(
        "Greenwich Village.", meta={"usage": {"prompt_tokens": "lots", "completion_tokens": math.inf}}
    )
    result = run_hostile("answer", [{"replies": [reply]}], evidence=False)
    assert result["terminated_by"] == "answered"
    usage = result["usage"]["answer"]
    assert usage["calls"] == 1 and usage["prompt_tokens"] > 0  # estimated: the reply reported nothing usable


def test_a_tool_call_without_a_name_or_id_goes_back_to_the_model_as_an_unknown_tool():
    nameless = ChatMessage.from_assistant(tool_calls=[ToolCall(tool_name=None, arguments={"query": "x"}, id=None)])
    answer = ChatMessage.from_assistant(
        tool_calls=[ToolCall(tool_name="answer", arguments={"text": "Greenwich"}, id=7)]
    )
    repaired = valid_replies({"replies": [nameless, answer]})
    assert repaired[0].tool_calls[0].tool_name == "" and repaired[1].tool_calls[0].id == "7"
    result = run_hostile("controller-tools", [{"replies": [nameless]}, {"replies": [answer]}], evidence=False)
    assert result["terminated_by"] == "answered"
    assert any("unknown tool ''" in (step.get("result") or "") for step in result["tool_history"])


def test_a_megabyte_text_is_cut_where_it_enters():
    long = "Adriana Trigiani is based in Greenwich Village. " * 22_000
    reply = ChatMessage.from_assistant(long, tool_calls=[ToolCall(tool_name="search", arguments={"query": long})])
    repaired = valid_replies({"replies": [reply, long]})
    assert len(repaired[0].text) == MAX_MODEL_TEXT_CHARS == len(repaired[1].text)
    assert len(repaired[0].tool_calls[0].arguments["query"]) == MAX_MODEL_TEXT_CHARS
    started = time.process_time()
    result = run_hostile("answer", [{"replies": [ChatMessage.from_assistant(long)]}], evidence=True)
    assert result["terminated_by"] == "answered" and len(result["answer"]) < MAX_MODEL_TEXT_CHARS + 1_000
    print(f"a 1 MB answer: {time.process_time() - started:.2f} s of CPU")  # 7 s in the citations before the cut


def test_deep_values_and_huge_integers_become_bounded_values():
    assert model_value(deep_list(100_000))[0][0] is not None  # no RecursionError
    value = model_value({"query": deep_dict(100_000)})
    depth = 0
    while isinstance(value, dict):
        value, depth = value["query"], depth + 1
    assert value == TOO_DEEP and depth < 40
    assert model_value({"top_k": HUGE_INT, "n": -HUGE_INT, "k": 7}) == {"top_k": math.inf, "n": -math.inf, "k": 7}
    kept = {"query": "x", "top_k": 3}
    assert model_value(kept) is kept


@pytest.mark.parametrize(
    "text",
    ["[" * 100_000 + "]" * 100_000, '{"a":' * 100_000, HUGE_DIGITS, "{", "nope"],
    ids=["deep", "deep-open", "digits", "open", "prose"],
)
def test_json_a_model_wrote_decodes_or_raises_value_error(text):
    with pytest.raises(ValueError):
        decode_json(text)


def test_json_objects_tries_a_bounded_number_of_starts():
    text = '{"a": ' * 100_000
    started = time.process_time()
    assert list(json_objects(text)) == []
    assert time.process_time() - started < 10  # 64 tries, not 100,000 (each a scan to the recursion limit)
    found = list(json_objects("x {" * (MAX_JSON_STARTS + 5) + ' {"action": "search"}'))
    assert found == []  # past the bound: not read
    assert list(json_objects('prose {"action": "search"} more')) == [{"action": "search"}]


@pytest.mark.parametrize(
    "reply",
    [
        '{"sufficient": ' + "[" * 100_000 + "]" * 100_000 + "}",
        '{"sufficient": true, "missing": ' + HUGE_DIGITS + "}",
        '{"sufficient": NaN}',
        '{"sufficient": [true]}',
        "[" * 200_000,
        "",
        '{"sufficient": {"yes": 1}}',
        '{"sufficient": "maybe"}',
    ],
    ids=range(8),
)
def test_the_evidence_judge_falls_back_to_the_offline_check_on_a_bad_reply(reply):
    assert parse_verdict(reply) is None
    result = run_hostile("evidence-judge", [{"replies": [ChatMessage.from_assistant(reply)]}], evidence=True)
    check(result)
    evidence = result["evidence"]
    assert evidence["judge_error"] and evidence["method"] != "llm_judge"  # the offline verdict, and why


def test_a_good_verdict_is_still_read():
    reply = 'Sure. ```json\n{"sufficient": true, "missing": "", "reason": "It says so."}\n```'
    assert parse_verdict(reply) == {"sufficient": True, "missing": "", "reason": "It says so."}
    result = run_hostile("evidence-judge", [{"replies": [ChatMessage.from_assistant(reply)]}], evidence=True)
    assert result["evidence"]["method"] == "llm_judge" and result["terminated_by"] == "answered"


def test_citing_a_long_answer_reads_each_chunk_once(monkeypatch):
    """An answer of many short claims (the `"Adriana Trigiani. "` shape): the text the citation code tokenizes grows
    with the answer plus the chunks, not with their product (before: every chunk and its sentences were tokenized
    again for every claim, 1,364x the input here; 7 s of CPU for 5,500 claims and 5 chunks of 300 characters)."""
    import uuid

    from haystack import Document

    from haystack_agentic.dataclasses.loop_state import LoopState
    from haystack_agentic.grounding import citations

    read: list[int] = []
    tokens = citations.tokens
    monkeypatch.setattr(citations, "tokens", lambda text: read.append(len(text)) or tokens(text))
    sentence = f"Adriana Trigiani wrote the film Big Stone Gap in Greenwich Village ({uuid.uuid4().hex}). "
    chunks = tuple(Document(id=f"d{i}", content=sentence * 45, meta={"title": f"Doc {i}"}) for i in range(5))
    answer = "".join(f"Adriana Trigiani wrote book {i}. " for i in range(1_000))
    state = citations.cite(LoopState(question="Where is the director of Big Stone Gap based?", chunks=chunks), answer)
    assert len(state.outcome.citations) == 1_000  # every claim still cited
    assert sum(read) < 30 * (len(answer) + sum(len(chunk.content) for chunk in chunks))
