# SPDX-License-Identifier: Apache-2.0
"""`build_loop`: every option is applied to the pipeline's dict before it is built, and refused when it cannot be."""

from pathlib import Path

import pytest

from haystack_agentic.pipelines.loop_builder import LoopOptions, build_loop
from haystack_agentic.pipelines.loop_pipeline import max_runs_for

SCRIPTED_YAML = Path(__file__).parents[1] / "serving" / "scripted_loop.yml"


@pytest.fixture(autouse=True)
def _scripted_llm_allowed(allow_scripted_llm):
    """SCRIPTED_YAML's test LLM is trusted here, as a user trusts their own components."""


def test_options_reach_the_components_they_name():
    options = LoopOptions(llm="embedded", max_iterations=2, on_insufficient_evidence="answer_with_warning")
    pipeline = build_loop(options)
    assert pipeline.get_component("controller").max_iterations == 2
    assert pipeline.to_dict()["max_runs_per_component"] == max_runs_for(2)
    assert pipeline.get_component("evidence").on_insufficient_evidence == "answer_with_warning"


def test_llm_limits_and_the_server_context_reach_every_llm_role():
    pipeline = build_loop(LoopOptions(pipeline=str(SCRIPTED_YAML), timeout=3.0, max_tokens=32, context_tokens=1000))
    roles = [c for _, c in pipeline.walk() if getattr(c, "chat_generator", None) is not None]
    assert roles and all(c.timeout == 3.0 and c.generation_kwargs["max_tokens"] == 32 for c in roles)
    # 1000 tokens of context less the reply's reserve (512) leave 488 for the router's prompt (default 16000).
    assert pipeline.get_component("router").context_budget_tokens == 488
    untouched = build_loop(LoopOptions(pipeline=str(SCRIPTED_YAML)))
    assert untouched.get_component("router").context_budget_tokens > 488


@pytest.mark.parametrize("name", ["agentic_rag", "agentic_rag_json"])
def test_timeout_and_max_tokens_reach_every_chat_generator_of_the_packaged_pipelines(name):
    # The packaged YAMLs give each chat generator its own 60 s HTTP timeout: `ask --timeout 300` must replace it.
    options = LoopOptions(pipeline=name, base_url="http://127.0.0.1:9/v1", timeout=300.0, max_tokens=77)
    pipeline = build_loop(options)
    generators = {n: c.chat_generator for n, c in pipeline.walk() if getattr(c, "chat_generator", None) is not None}
    assert {"router", "fallback", "grounder"} <= set(generators)  # json mode: the answerer too
    for role, generator in generators.items():
        assert generator.timeout == 300.0, role
        assert generator.generation_kwargs["max_tokens"] == 77, role


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"max_iterations": 0}, "--max-iterations must be at least 1"),
        ({"timeout": 0}, "--timeout must be a positive number"),
        ({"max_tokens": 0}, "--max-tokens must be at least 1"),
        ({"llm": "gpt"}, "llm must be one of"),
        ({"base_url": "notaurl"}, "--base-url must be an http"),
        ({"base_url": "localhost:8080"}, "--base-url must be an http"),
    ],
)
def test_out_of_range_options_are_refused_when_made(options, says):
    with pytest.raises(ValueError, match=says):
        LoopOptions(**options)


def test_a_base_url_with_a_host_is_accepted():
    assert LoopOptions(base_url="http://127.0.0.1:8080/v1").base_url == "http://127.0.0.1:8080/v1"


def test_options_that_do_not_fit_the_pipeline_are_refused_before_it_is_built(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ValueError, match="--mode applies to an OpenAI-compatible LLM"):
        build_loop(LoopOptions(llm="embedded", mode="json"))
    with pytest.raises(ValueError, match="needs a pipeline with an `evidence` component"):
        build_loop(LoopOptions(pipeline=str(SCRIPTED_YAML), on_insufficient_evidence="give_up"))
    with pytest.raises(ValueError, match="packaged pipeline for --llm embedded only"):
        build_loop(LoopOptions(llm="openai", base_url="http://127.0.0.1:9/v1", backend="weaviate"))
    assert LoopOptions(base_url="http://127.0.0.1:9/v1").llm == "openai"
    assert LoopOptions().pipeline_path().name == "agentic_rag_embedded.yml"
    assert LoopOptions(backend="milvus", store_uri="x.db").pipeline_path().name == "agentic_rag_embedded_milvus.yml"
