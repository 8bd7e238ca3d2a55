# SPDX-License-Identifier: Apache-2.0
"""The OpenAI-compatible chat of a real hayhooks server, with the official `openai` client: a streamed reply's
`delta.content` is the non-streamed `message.content`; steps travel in `reasoning_content`; `usage` is filled in
(and sent last when `stream_options.include_usage` asks); the whole conversation reaches the loop."""

import time

import httpx
import openai
import pytest

from haystack_agentic.grounding.markers import MARKER_RE, strip_markers

from .conftest import MARKED_ANSWERS, SLOW_LATENCY, STREAMED_ANSWER, spoken

pytestmark = pytest.mark.integration

QUESTION = "Where is Adriana Trigiani based?"
HISTORY = [
    {"role": "system", "content": "Answer briefly."},
    {"role": "user", "content": "Who directed the film Big Stone Gap?"},
    {"role": "assistant", "content": "Adriana Trigiani"},
    {"role": "user", "content": "And where is she based?"},
]


def chat_client(server) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key="not-needed", max_retries=0)


def streamed(server, model: str, messages: list, **kwargs) -> tuple[str, str, list]:
    """(content, reasoning, chunks) of a streamed reply."""
    chunks = list(chat_client(server).chat.completions.create(model=model, messages=messages, stream=True, **kwargs))
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    reasoning = "".join(getattr(c.choices[0].delta, "reasoning_content", None) or "" for c in chunks if c.choices)
    return content, reasoning, chunks


@pytest.mark.parametrize("model", ["scripted", "streaming", "cited", "raising", "garbage"])
def test_the_streamed_content_is_the_non_streamed_message(server, model):
    messages = [{"role": "user", "content": QUESTION}]
    whole = chat_client(server).chat.completions.create(model=model, messages=messages)
    content, _, chunks = streamed(server, model, messages)
    assert content == whole.choices[0].message.content
    assert content  # every run has a reply, an error too
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["stop"]


def test_a_reply_with_citations_ends_with_its_sources_streamed_or_not(server):
    # `cited`: the answer LLM streams STREAMED_ANSWER; the result cites the first sentence of its two top chunks
    # (markers appended to the answer), the second found unsupported.
    messages = [{"role": "user", "content": QUESTION}]
    whole = chat_client(server).chat.completions.create(model="cited", messages=messages).choices[0].message.content
    content, _, chunks = streamed(server, "cited", messages)
    assert whole == (
        f"{STREAMED_ANSWER} [1][2]\n\nSources:\n"
        '[1] Adriana Trigiani: "Adriana Trigiani is an Italian American best-selling author and film director."\n'
        '[2] (unsupported) Big Stone Gap (film): "Big Stone Gap is a 2014 American drama romance film written and '
        'directed by Adriana Trigiani."\n'
        "The offline check found [2] unsupported: its quoted sentence does not support the claim."
    )
    assert content == whole
    pieces = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    assert len(pieces) > 5 and "Sources:" in pieces[-1]  # the answer streamed token by token, the sources after it
    # The same answer from the real citation step: its own sources, the answer streamed before them.
    plain = chat_client(server).chat.completions.create(model="streaming", messages=messages)
    assert spoken(plain.choices[0].message.content) == STREAMED_ANSWER


@pytest.mark.parametrize("model", ["marks-3", "streaming", "marks-earlier", "loop-cites-earlier"])
def test_the_model_s_markers_and_the_loop_s_citations_stream_as_the_non_streamed_reply(server, model):
    # The real citation step: the answer is the model's words, its own [n] left out (as they stream), and the
    # loop's citations from the chunks come after them, so the reply streamed token by token is the non-streamed one.
    words = strip_markers(MARKED_ANSWERS.get(model, STREAMED_ANSWER))
    messages = [{"role": "user", "content": QUESTION}]
    whole = chat_client(server).chat.completions.create(model=model, messages=messages).choices[0].message.content
    content, _, chunks = streamed(server, model, messages)
    assert content == whole
    assert len([c for c in chunks if c.choices and c.choices[0].delta.content]) > 5  # streamed, not sent at the end
    answer, sources = whole.split("\n\nSources:\n")
    assert answer.startswith(words) and answer != words  # the words as written, none of the model's markers
    assert not MARKER_RE.sub("", answer[len(words) :]).strip()  # then only the loop's markers
    numbers = {n for match in MARKER_RE.finditer(answer) for n in match.group(1).split(",")}
    assert numbers and {line.split("]")[0][1:] for line in sources.splitlines() if line.startswith("[")} == numbers


def test_the_answer_streams_token_by_token(server):
    content, _, chunks = streamed(server, "streaming", [{"role": "user", "content": QUESTION}])
    assert spoken(content) == STREAMED_ANSWER and content.startswith(STREAMED_ANSWER)
    assert len([c for c in chunks if c.choices and c.choices[0].delta.content]) > 5


@pytest.mark.slow  # asserts on wall-clock time
def test_steps_travel_as_reasoning_content_not_in_the_answer(server):
    start = time.perf_counter()
    arrivals = []
    stream = chat_client(server).chat.completions.create(
        model="slow", messages=[{"role": "user", "content": QUESTION}], stream=True
    )
    steps = []
    for chunk in stream:
        delta = chunk.choices[0].delta if chunk.choices else None
        if delta is None:
            continue
        if getattr(delta, "reasoning_content", None):
            arrivals.append(time.perf_counter() - start)
        if (delta.model_extra or {}).get("agentic_step"):
            steps.append(delta.model_extra["agentic_step"])
        if delta.content:
            assert f'search "{QUESTION}"' not in delta.content
    assert [s["event"] for s in steps] == ["search", "documents", "answer"]
    assert steps[0]["step"]["query"] == QUESTION
    # The search step arrives after the first LLM call, a whole LLM call before the answer.
    assert arrivals[-1] - arrivals[0] > 0.6 * SLOW_LATENCY
    _, reasoning, _ = streamed(server, "scripted", [{"role": "user", "content": QUESTION}])
    assert f'1. search "{QUESTION}"' in reasoning
    messages = [{"role": "user", "content": QUESTION}]
    whole = chat_client(server).chat.completions.create(model="scripted", messages=messages)
    assert whole.choices[0].message.model_extra["reasoning_content"] == f'1. search "{QUESTION}"\n2. answer\n'


def test_usage_is_filled_in_streamed_and_not(server):
    messages = [{"role": "user", "content": QUESTION}]
    whole = chat_client(server).chat.completions.create(model="streaming", messages=messages)
    usage = whole.usage
    assert usage is not None and usage.prompt_tokens > 0 and usage.completion_tokens > 0
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    _, _, chunks = streamed(server, "streaming", messages, stream_options={"include_usage": True})
    last = chunks[-1]
    assert last.choices == [] and last.usage is not None
    assert (last.usage.prompt_tokens, last.usage.completion_tokens) == (usage.prompt_tokens, usage.completion_tokens)
    assert all(c.usage is None for c in chunks[:-1])
    _, _, chunks = streamed(server, "streaming", messages)
    assert all(c.usage is None for c in chunks)


@pytest.mark.parametrize("stream", [False, True])
def test_a_follow_up_question_is_answered_with_the_whole_conversation(server, stream):
    if stream:
        content, reasoning, _ = streamed(server, "history", HISTORY)
        assert 'search "Adriana Trigiani"' in reasoning
    else:
        content = chat_client(server).chat.completions.create(model="history", messages=HISTORY)
        content = content.choices[0].message.content
    assert spoken(content) == "Greenwich Village"


def test_a_follow_up_sent_with_an_earlier_reply_s_sources_reaches_the_loop_without_them(server):
    # `history` searches for the assistant message's text: the query shows what of it reached the loop.
    reply = 'Adriana Trigiani [1]\n\nSources:\n[1] Big Stone Gap (film): "Big Stone Gap is a 2014 American film."'
    messages = [*HISTORY[:2], {"role": "assistant", "content": reply}, HISTORY[3]]
    content, reasoning, _ = streamed(server, "history", messages)
    assert '1. search "Adriana Trigiani [1]"\n' in reasoning
    assert spoken(content) == "Greenwich Village"


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(
    ("messages", "says"),
    [
        ([{"role": "tool", "content": "42", "tool_call_id": "c1"}, {"role": "user", "content": QUESTION}], "tool"),
        ([{"role": "wizard", "content": "hi"}, {"role": "user", "content": QUESTION}], "wizard"),
        ([{"role": "tool", "content": "hi", "tool_call_id": "c1"}], "messages[0] has role `tool`"),  # no user message
        ([{"role": "wizard", "content": "hi"}], "messages[0] has an unknown role `wizard`"),
        ([{"role": "user", "content": QUESTION}, {"role": "assistant", "content": "hm"}], "end with"),
        (["not a message", {"role": "user", "content": QUESTION}], "valid dictionary"),
    ],
)
def test_bad_conversations_are_a_422_that_says_what_to_fix(server, messages, says, stream):
    with pytest.raises(openai.UnprocessableEntityError) as caught:
        chat_client(server).chat.completions.create(model="scripted", messages=messages, stream=stream)
    assert says in caught.value.response.text


def test_every_step_of_the_result_is_streamed_once(server):
    _, _, chunks = streamed(server, "garbage", [{"role": "user", "content": QUESTION}])
    steps = [c.choices[0].delta.model_extra.get("agentic_step") for c in chunks if c.choices]
    shown = [s["step"]["action"] for s in steps if s and s["event"] != "documents"]
    result = httpx.post(f"{server.url}/garbage/run", json={"query": QUESTION}, timeout=30).json()["result"]["result"]
    assert shown == [step["action"] for step in result["tool_history"]]
