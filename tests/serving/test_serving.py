# SPDX-License-Identifier: Apache-2.0
"""The loop served by a real hayhooks server: REST, OpenAI-compatible chat (streaming and not), MCP, bad requests,
concurrency. The server comes from the `server` fixture (tests/serving/conftest.py)."""

import asyncio
import json
import time

import httpx
import openai
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from .conftest import SLOW_LATENCY, spoken

pytestmark = pytest.mark.integration

QUESTION = "Where is Adriana Trigiani based?"


def post(server, path: str, body) -> httpx.Response:
    return httpx.post(f"{server.url}{path}", json=body, timeout=30)


def chat_client(server) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key="not-needed", max_retries=0)


def test_openapi_lists_the_endpoints(server):
    response = httpx.get(f"{server.url}/openapi.json", timeout=10)
    assert response.status_code == 200
    paths = response.json()["paths"]
    for path in ("/scripted/run", "/slow/run", "/plain/run", "/v1/chat/completions"):
        assert path in paths


def test_run_endpoint_answers_with_the_result_and_its_trace(server):
    response = post(server, "/scripted/run", {"query": QUESTION})
    assert response.status_code == 200, response.text
    result = response.json()["result"]["result"]
    assert spoken(result["answer"]) == f"Answer to: {QUESTION}"
    assert result["terminated_by"] == "answered"
    assert result["iterations"] == 2
    assert [s["action"] for s in result["tool_history"]] == ["search", "answer"]
    assert result["tool_history"][0]["query"] == QUESTION
    assert result["tool_history"][0]["returned_chunk_ids"][0] == "trigiani"  # the store file was loaded
    assert "trigiani" in [d["id"] for d in result["documents"]]
    assert result["usage"]["total"]["calls"] == 2
    assert {"grounding", "error"} <= result.keys()


def test_filters_scope_the_searches(server):
    filters = {"field": "meta.kind", "operator": "==", "value": "place"}
    result = post(server, "/scripted/run", {"query": QUESTION, "filters": filters}).json()["result"]["result"]
    assert result["documents"] and {d["meta"]["kind"] for d in result["documents"]} == {"place"}


def test_plain_yaml_pipeline_is_deployed_from_the_pipelines_dir(server):
    # `plain.yml` is the scripted YAML served by hayhooks itself (declared inputs/outputs, no wrapper).
    response = post(server, "/plain/run", {"query": QUESTION})
    assert response.status_code == 200, response.text
    result = response.json()["result"]["result"]  # hayhooks' response / the `result` component's outputs
    assert spoken(result["answer"]) == f"Answer to: {QUESTION}"
    assert result["terminated_by"] == "answered"


@pytest.mark.parametrize("query", ["", "   "])
def test_plain_yaml_pipeline_refuses_a_blank_question_with_a_4xx(server, query):
    # No wrapper here: the 422 comes from the type of `LoopController.query`, which hayhooks turns into its model.
    response = post(server, "/plain/run", {"query": query})
    assert response.status_code == 422, response.text
    assert "query" in response.text


def test_chat_completion_with_the_openai_client(server):
    reply = chat_client(server).chat.completions.create(
        model="scripted",
        messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": QUESTION}],
    )
    assert spoken(reply.choices[0].message.content) == f"Answer to: {QUESTION}"


async def test_mcp_client_lists_and_calls_the_tool(server):
    async with streamable_http_client(server.mcp_url) as (read, write, _):
        async with ClientSession(read, write) as session:
            await session.initialize()
            tools = {tool.name: tool for tool in (await session.list_tools()).tools}
            assert "scripted" in tools
            assert "query" in tools["scripted"].inputSchema["properties"]
            assert "agentic RAG" in tools["scripted"].description
            called = await session.call_tool("scripted", {"query": QUESTION})
            assert not called.isError
            result = json.loads(called.content[0].text)["result"]  # the pipeline outputs, as over REST
            assert spoken(result["answer"]) == f"Answer to: {QUESTION}"
            blank = await session.call_tool("scripted", {"query": "  "})
            assert blank.isError and "empty" in blank.content[0].text  # after hayhooks' own error prefix


async def test_mcp_tool_results_carry_the_answer_and_its_citations(server):
    async with streamable_http_client(server.mcp_url) as (read, write, _):
        async with ClientSession(read, write) as session:
            await session.initialize()
            cited = await session.call_tool("cited", {"query": QUESTION})
    assert not cited.isError
    result = json.loads(cited.content[0].text)["result"]  # hayhooks' text content: the pipeline outputs as JSON
    assert result["terminated_by"] == "answered" and result["answer"].endswith("[1][2]")
    citations = result["citations"]
    assert [(c["n"], c["document_id"], c["supported"]) for c in citations] == [(1, "trigiani", True), (2, "bsg", False)]
    document = next(d for d in result["documents"] if d["id"] == citations[0]["document_id"])
    assert document["content"][citations[0]["start"] : citations[0]["end"]] == citations[0]["quote"]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({}, "Field required"),
        ({"question": QUESTION}, "Field required"),
        ({"query": ""}, "empty"),
        ({"query": "   "}, "empty"),
        ({"query": 42}, "valid string"),
        ({"query": ["a"]}, "valid string"),
        ({"query": QUESTION, "filters": "meta.kind == place"}, "valid dictionary"),
        ({"query": QUESTION, "filters": {"operator": "AND"}}, "Not a valid Haystack filter"),
        ({"query": "x" * 5000}, "the limit is 4000"),
        ({"query": QUESTION, "filters": {"field": "meta.kind", "operator": "bogus", "value": 1}}, "bogus"),
    ],
)
def test_bad_run_requests_get_a_4xx_with_a_message(server, body, message):
    response = post(server, "/scripted/run", body)
    assert response.status_code == 422, response.text
    assert message in response.text


def test_a_body_that_is_not_json_gets_a_4xx(server):
    response = httpx.post(
        f"{server.url}/scripted/run", content=b"{not json", timeout=10, headers={"content-type": "application/json"}
    )
    assert response.status_code == 422


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(
    "messages",
    [
        [{"role": "system", "content": "no question here"}],
        [{"role": "user", "content": "   "}],
        [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "http://x"}}]}],
    ],
)
def test_bad_chat_requests_get_a_4xx(server, messages, stream):
    with pytest.raises(openai.UnprocessableEntityError):
        chat_client(server).chat.completions.create(model="scripted", messages=messages, stream=stream)


def test_chat_with_an_unknown_model_is_a_404(server):
    with pytest.raises(openai.NotFoundError):
        chat_client(server).chat.completions.create(model="nope", messages=[{"role": "user", "content": QUESTION}])


@pytest.mark.parametrize(("name", "ending"), [("raising", "error"), ("garbage", "max_iterations")])
def test_bad_llm_output_is_a_200_with_the_outcome_in_the_result(server, name, ending):
    response = post(server, f"/{name}/run", {"query": QUESTION})
    assert response.status_code == 200, response.text
    result = response.json()["result"]["result"]
    assert result["terminated_by"] == ending
    if ending == "error":
        assert "LLM exploded" in result["error"]
    reply = chat_client(server).chat.completions.create(model=name, messages=[{"role": "user", "content": QUESTION}])
    assert reply.choices[0].message.content


@pytest.mark.slow  # asserts on wall-clock time
async def test_concurrent_questions_do_not_queue_and_keep_their_own_trace(server):
    n = 8
    questions = [f"Question number {i}: where is Adriana Trigiani based?" for i in range(n)]
    async with httpx.AsyncClient(base_url=server.url, timeout=60) as client:
        start = time.perf_counter()
        responses = await asyncio.gather(*(client.post("/slow/run", json={"query": q}) for q in questions))
        elapsed = time.perf_counter() - start
    one_request = 2 * SLOW_LATENCY  # two LLM calls: search, answer
    assert elapsed < one_request + 1.5, f"{n} concurrent requests took {elapsed:.1f} s (one takes ~{one_request} s)"
    for question, response in zip(questions, responses, strict=True):
        assert response.status_code == 200
        result = response.json()["result"]["result"]
        assert spoken(result["answer"]) == f"Answer to: {question}"
        assert [s["query"] for s in result["tool_history"]] == [question, None]


# --- malformed requests are 4xx with a message, never 500 -------------------------------------------------


def post_raw(server, path: str, text: str) -> httpx.Response:
    return httpx.post(
        f"{server.url}{path}", content=text.encode("utf-8"), timeout=30, headers={"content-type": "application/json"}
    )


@pytest.mark.parametrize("text", [12, {"q": QUESTION}, None, [QUESTION], True, 1.5])
@pytest.mark.parametrize("stream", [False, True])
def test_a_content_part_with_non_string_text_is_a_422_that_says_so(server, text, stream):
    messages = [{"role": "user", "content": [{"type": "text", "text": text}]}]
    response = post(server, "/v1/chat/completions", {"model": "scripted", "messages": messages, "stream": stream})
    assert response.status_code == 422, response.text
    assert "`text`" in response.json()["detail"] and "send the question as a string" in response.json()["detail"]


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
@pytest.mark.parametrize("name", ["scripted", "plain"])
def test_a_query_given_as_a_non_finite_json_number_is_a_422(server, constant, name):
    response = post_raw(server, f"/{name}/run", f'{{"query": {constant}}}')
    assert response.status_code == 422, response.text
    assert "string" in response.text
    assert response.json()["detail"][0]["input"] in ("nan", "inf", "-inf")  # echoed as text: JSON has no NaN


@pytest.mark.parametrize("constant", ["NaN", "Infinity"])
def test_non_finite_numbers_anywhere_in_a_chat_body_are_a_4xx(server, constant):
    response = post_raw(
        server,
        "/v1/chat/completions",
        f'{{"model": "scripted", "messages": [{{"role": "user", "content": {constant}}}], "stream": {constant}}}',
    )
    assert response.status_code == 422, response.text


@pytest.mark.parametrize("name", ["scripted", "plain"])
@pytest.mark.parametrize("query", ["\\ud800", "Where is \\udfff Trigiani?", "\\udc00\\ud800"])
def test_a_query_with_a_lone_surrogate_is_a_422_before_anything_runs(server, name, query):
    response = post_raw(server, f"/{name}/run", f'{{"query": "{query}"}}')
    assert response.status_code == 422, response.text
    assert "surrogate" in response.text or "unicode" in response.text
    response.json()  # the reply itself is valid JSON


def test_a_chat_question_with_a_lone_surrogate_is_a_422(server):
    response = post_raw(
        server,
        "/v1/chat/completions",
        '{"model": "scripted", "messages": [{"role": "user", "content": "Who \\ud800?"}]}',
    )
    assert response.status_code == 422, response.text
    assert "surrogate" in response.json()["detail"]


def test_a_too_long_question_to_a_yaml_pipeline_is_a_422_not_a_500(server):
    # `plain` is served by hayhooks itself: the LoopController refuses the question inside the pipeline run.
    response = post(server, "/plain/run", {"query": "x" * 5000})
    assert response.status_code == 422, response.text
    assert "the limit is 4000" in response.json()["detail"]


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/responses"])
def test_chat_with_a_pipeline_without_a_chat_interface_is_a_400(server, path):
    body = {"model": "plain", "messages": [{"role": "user", "content": QUESTION}], "input": QUESTION}
    response = post(server, path, body)
    assert response.status_code == 400, response.text
    assert "/<name>/run" in response.json()["detail"]


def test_a_pipeline_that_crashes_is_a_200_with_terminated_by_error(server):
    # `crashing` allows one run per component: the pipeline raises PipelineMaxComponentRuns on its second turn.
    response = post(server, "/crashing/run", {"query": QUESTION})
    assert response.status_code == 200, response.text
    result = response.json()["result"]["result"]
    assert (result["terminated_by"], result["answer"]) == ("error", None)
    assert "PipelineMaxComponentRuns" in result["error"]
    reply = chat_client(server).chat.completions.create(model="crashing", messages=[{"role": "user", "content": "q"}])
    assert "terminated by error" in reply.choices[0].message.content


def test_one_envelope_whichever_way_the_loop_is_served(server):
    wrapped = post(server, "/scripted/run", {"query": QUESTION}).json()  # `haystack-agentic serve`'s wrapper
    plain = post(server, "/plain/run", {"query": QUESTION}).json()  # the YAML deployed by hayhooks itself
    assert list(wrapped) == list(plain) == ["result"]
    assert list(wrapped["result"]) == list(plain["result"]) == ["result"]  # the `result` component's outputs
    assert (
        spoken(wrapped["result"]["result"]["answer"])
        == spoken(plain["result"]["result"]["answer"])
        == f"Answer to: {QUESTION}"
    )
