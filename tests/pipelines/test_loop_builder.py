# SPDX-License-Identifier: Apache-2.0
"""`build_loop`: a packaged pipeline is built with the options as the builder's arguments; a user's YAML is loaded as
it is and the options set on its components; an option that cannot be applied is refused."""

import shutil
from pathlib import Path

import pytest
from haystack.components.generators.chat import OpenAIChatGenerator

from haystack_agentic.llm.local_server_key import LOCAL_SERVER_API_KEY
from haystack_agentic.pipelines.default_pipelines import INDEX_NAME
from haystack_agentic.pipelines.loop_builder import LoopOptions, build_loop
from haystack_agentic.pipelines.loop_pipeline import max_runs_for
from haystack_agentic.pipelines.packaged_yaml import packaged_yaml
from haystack_agentic.resources import pipeline_path

SCRIPTED_YAML = Path(__file__).parents[1] / "serving" / "scripted_loop.yml"


@pytest.fixture(autouse=True)
def _scripted_llm_allowed(allow_scripted_llm):
    """SCRIPTED_YAML's test LLM is trusted here, as a user trusts their own components."""


def test_options_reach_the_components_they_name():
    options = LoopOptions(llm="embedded", max_iterations=2, on_insufficient_evidence="answer_with_warning", timeout=3.0)
    pipeline = build_loop(options)
    assert pipeline.get_component("controller").max_iterations == 2
    roles = {n for n, c in pipeline.walk() if getattr(c, "chat_generator", None) is not None and c.timeout == 3.0}
    assert {"answerer", "fallback"} <= roles  # offline too: the role gives up on the embedded LLM's call
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


@pytest.mark.parametrize("name", ["agentic_rag", "agentic_rag_json", "agentic_rag_embedded", "agentic_rag_ungrounded"])
def test_a_packaged_pipeline_is_built_as_its_yaml_says_with_its_own_in_memory_index(name, monkeypatch):
    # Built in Python with no option set, it is the committed YAML but for the index that isolates its storage.
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.delenv("HAYSTACK_AGENTIC_MODEL", raising=False)
    built = build_loop(LoopOptions(pipeline=name, grounding="pipeline"))
    index = built.get_component("retriever").retriever.document_store.index
    assert index.startswith(f"{INDEX_NAME}-")
    committed = pipeline_path(name).read_text(encoding="utf-8")
    assert packaged_yaml(built, f"{name}.yml").replace(index, INDEX_NAME) == committed
    # its file's path is the same packaged pipeline (what `serve` hands its wrapper)
    from_path = build_loop(LoopOptions(pipeline=str(pipeline_path(name)), grounding="pipeline"))
    assert from_path.get_component("retriever").retriever.document_store.index not in (index, INDEX_NAME)


def _user_copy(tmp_path, name="agentic_rag"):
    path = tmp_path / "my_loop.yml"
    shutil.copy(pipeline_path(name), path)
    return path


def test_options_reach_the_components_of_a_users_yaml_loaded_as_it_is(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    options = LoopOptions(
        pipeline=str(_user_copy(tmp_path, "agentic_rag_json")),
        model="qwen",
        base_url="http://127.0.0.1:9/v1",
        max_iterations=3,
        timeout=30.0,
        max_tokens=50,
        on_insufficient_evidence="answer_with_warning",
        grounding="pipeline",
    )
    pipeline = build_loop(options)
    assert pipeline.get_component("controller").max_iterations == 3
    assert pipeline.to_dict()["max_runs_per_component"] == max_runs_for(3)
    assert pipeline.get_component("evidence").on_insufficient_evidence == "answer_with_warning"
    generators = [v for _, c in pipeline.walk() for v in vars(c).values() if isinstance(v, OpenAIChatGenerator)]
    assert len(generators) == 3  # router, answerer, fallback
    for generator in generators:
        assert (generator.model, generator.api_base_url, generator.timeout) == ("qwen", options.base_url, 30.0)
        assert generator.generation_kwargs["max_tokens"] == 50
        assert generator.api_key.resolve_value() == LOCAL_SERVER_API_KEY
    assert pipeline.metadata["llm"] == "OpenAI-compatible (qwen)"
    # the file's own values where no option is given
    untouched = build_loop(LoopOptions(pipeline=options.pipeline, base_url=options.base_url, grounding="pipeline"))
    assert untouched.get_component("controller").max_iterations == 5
    assert untouched.get_component("router").chat_generator.generation_kwargs == {"max_tokens": 160}


def test_uri_is_refused_for_a_users_yaml_which_names_its_own_store(tmp_path):
    with pytest.raises(ValueError, match="--uri applies to the packaged pipelines"):
        build_loop(LoopOptions(pipeline=str(_user_copy(tmp_path, "agentic_rag_embedded")), store_uri="x.db"))


def test_a_hhem_grounder_without_its_model_becomes_the_routers_llm_as_judge_in_an_openai_run(tmp_path, monkeypatch):
    from haystack_agentic.components.grounders.hhem_grounder import HHEMGrounder
    from haystack_agentic.components.grounders.llm_judge_grounder import LLMJudgeGrounder
    from haystack_agentic.grounding.hhem_loading import hhem_missing

    if hhem_missing(None, local_files_only=True) is None:
        pytest.skip("the HHEM model is installed here")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    notices = []
    options = {"llm": "openai", "max_tokens": 40, "base_url": "http://127.0.0.1:9/v1"}
    packaged = build_loop(LoopOptions(pipeline="agentic_rag", **options), notify=notices.append)
    user = build_loop(LoopOptions(pipeline=str(_user_copy(tmp_path)), **options), notify=notices.append)
    for pipeline in (packaged, user):  # the user's YAML: swapped on the loaded pipeline, connected as it was
        judge = pipeline.get_component("grounder")
        assert isinstance(judge, LLMJudgeGrounder)
        assert (
            judge.generation_kwargs == {"max_tokens": 40} and judge.chat_generator.generation_kwargs["max_tokens"] == 40
        )
        assert judge.chat_generator is not pipeline.get_component("router").chat_generator
        assert judge.chat_generator.api_key.resolve_value() == LOCAL_SERVER_API_KEY
    assert sorted(map(str, packaged.to_dict()["connections"])) == sorted(map(str, user.to_dict()["connections"]))
    assert len(notices) == 2 and all(n.endswith("(LLMJudgeGrounder).") for n in notices)
    embedded = build_loop(LoopOptions(pipeline=str(_user_copy(tmp_path)), llm="embedded"), notify=notices.append)
    assert isinstance(embedded.get_component("grounder"), HHEMGrounder)
    assert notices[2].endswith("Running without grounding.")
