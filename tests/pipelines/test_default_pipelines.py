# SPDX-License-Identifier: Apache-2.0
import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import load_yaml
from haystack import Pipeline
from haystack.core.errors import DeserializationError

from haystack_agentic.pipelines.default_pipelines import default_pipelines
from haystack_agentic.pipelines.packaged_yaml import minimal, packaged_yaml
from haystack_agentic.resources import pipeline_path, pipelines_dir

NAMES = [
    "agentic_rag.yml",
    "agentic_rag_json.yml",
    "agentic_rag_embedded.yml",
    "agentic_rag_ungrounded.yml",
    "agentic_rag_embedded_ungrounded.yml",
    "agentic_rag_embedded_milvus.yml",
    "agentic_rag_embedded_milvus_dense.yml",
    "agentic_rag_embedded_weaviate.yml",
    "agentic_rag_embedded_dense.yml",
    "indexing_milvus.yml",
    "indexing_weaviate.yml",
]
#: `NAMES`, the Milvus ones marked integration: loading them opens a Milvus Lite file.
LOADED_NAMES = [pytest.param(n, marks=pytest.mark.integration) if "milvus" in n else n for n in NAMES]


@pytest.fixture(autouse=True)
def _in_tmp_dir(tmp_path, monkeypatch):
    """The Milvus pipeline's Milvus Lite file is relative: loading it must not leave a file in the repository."""
    monkeypatch.chdir(tmp_path)


@pytest.mark.parametrize(
    "variant",
    ["agentic_rag_embedded_milvus.yml", "agentic_rag_embedded_weaviate.yml", "agentic_rag_embedded_dense.yml"],
)
def test_backend_variants_differ_only_in_store_retriever_and_embedder(variant):
    """Swapping the backend changes only the retriever, the query embedder and the store the router reads."""
    base = yaml.safe_load((pipelines_dir() / "agentic_rag_embedded.yml").read_text(encoding="utf-8"))
    other = yaml.safe_load((pipelines_dir() / variant).read_text(encoding="utf-8"))
    changed = {
        n
        for n in set(base["components"]) | set(other["components"])
        if base["components"].get(n) != other["components"].get(n)
    }
    assert changed <= {"retriever", "query_embedder", "router"}
    for data in (base, other):
        data["components"]["router"]["init_parameters"].pop("document_store")
    assert base["components"]["router"] == other["components"]["router"]
    extra = [c for c in other["connections"] if c not in base["connections"]]
    assert {c["sender"].split(".")[0] for c in extra} | {c["receiver"].split(".")[0] for c in extra} <= {
        "router",
        "query_embedder",
        "retriever",
        "controller",
    }
    assert all("retriever" in c["sender"] + c["receiver"] or "query_embedder" in c["receiver"] for c in extra)
    assert {k: v for k, v in base.items() if k not in ("components", "connections")} == {
        k: v for k, v in other.items() if k not in ("components", "connections")
    }


@pytest.mark.parametrize("name", LOADED_NAMES)
def test_packaged_yaml_loads_and_round_trips(name, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # loading must not need the key
    text = pipeline_path(name).read_text(encoding="utf-8")
    assert isinstance(yaml.safe_load(text), dict)
    loaded = load_yaml(text)
    dumped = loaded.dumps()
    assert isinstance(yaml.safe_load(dumped), dict)
    assert load_yaml(dumped).to_dict() == loaded.to_dict()


@pytest.mark.integration  # default_pipelines() builds its Milvus stores on a Milvus Lite file
@pytest.mark.parametrize("name", NAMES)
def test_packaged_yaml_matches_the_builder(name):
    """The committed YAML is what `python -m haystack_agentic.pipelines.default_pipelines` writes (`make pipelines`)."""
    committed = (pipelines_dir() / name).read_text(encoding="utf-8")
    assert committed == packaged_yaml(default_pipelines()[name], name)


def _opened(pipeline: Pipeline) -> Pipeline:
    """The pipeline with its stores made (a loaded one leaves them serialised until first use: it writes nothing)."""
    for _, instance in pipeline.walk():
        for part in (instance, getattr(instance, "search_policy", None)):  # the router's search policy has one too
            getattr(part, "document_store", None)
    return pipeline


def _comparable(data: dict) -> dict:
    data = {k: v for k, v in data.items() if k not in ("inputs", "outputs")}
    data["connections"] = sorted(data["connections"], key=lambda c: (c["sender"], c["receiver"]))
    return data


@pytest.mark.integration  # default_pipelines() builds its Milvus stores on a Milvus Lite file
@pytest.mark.parametrize("name", NAMES)
def test_packaged_yaml_loads_into_the_built_pipeline(name, monkeypatch):
    """Leaving the defaults out loses nothing: the short YAML loads into exactly the pipeline the builder makes."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    loaded = load_yaml(pipeline_path(name).read_text(encoding="utf-8"))
    assert _comparable(_opened(loaded).to_dict()) == _comparable(default_pipelines()[name].to_dict())


def test_the_embedded_loop_cuts_short_answers_in_its_own_stage():
    """`build_loop` builds the embedded graph with the extractor between the answerer and the end; the OpenAI
    pipelines have none (their Answerer streams its answer itself)."""
    from haystack_agentic.pipelines.loop_builder import LoopOptions, build_loop

    pipeline = build_loop(LoopOptions(llm="embedded"), notify=lambda _: None)
    edges = {(c["sender"], c["receiver"]) for c in pipeline.to_dict()["connections"]}
    assert {("answerer.finished", "extractor.state"), ("extractor.state", "finish.value")} <= edges
    assert not any(sender == "answerer.finished" and receiver != "extractor.state" for sender, receiver in edges)
    extractor, answerer = pipeline.get_component("extractor"), pipeline.get_component("answerer")
    assert answerer.stream_answer is False
    assert (extractor.max_chunks, extractor.chunks_per_search) == (answerer.max_chunks, answerer.chunks_per_search)
    for name in ("agentic_rag.yml", "agentic_rag_json.yml"):
        assert "extractor" not in yaml.safe_load(pipeline_path(name).read_text(encoding="utf-8"))["components"]


@pytest.mark.parametrize("name", NAMES)
def test_packaged_yaml_lists_no_default_and_comments_every_component(name):
    text = pipeline_path(name).read_text(encoding="utf-8")
    data = yaml.safe_load(text)
    assert minimal(data) == data  # nothing left to drop
    lines = text.splitlines()
    assert lines[0].startswith("# ")  # what the file is for
    for component in data["components"]:
        at = lines.index(f"  {component}:")
        block = []
        while lines[at - 1 - len(block)].startswith("  # "):
            block.append(lines[at - 1 - len(block)])
        assert block and block[-1].startswith(f"  # {component} ("), f"{component} has no comment block"
        assert any("Change:" in line or "Nothing to change" in line for line in block), component


def test_minimal_keeps_what_differs_from_the_defaults():
    from haystack.components.generators.chat import OpenAIChatGenerator

    full = OpenAIChatGenerator(model="gpt-4o-mini", max_retries=0).to_dict()
    assert full["init_parameters"]["api_key"] == {"type": "env_var", "env_vars": ["OPENAI_API_KEY"], "strict": True}
    reduced = minimal(full)
    assert reduced["init_parameters"] == {"max_retries": 0, "model": "gpt-4o-mini"}  # the Secret default is gone
    counter = {
        "type": "haystack_agentic.components.loop.loop_controller.LoopController",
        "init_parameters": {"max_iterations": 10, "chunk_cap": 1, "max_search_failures": True},
    }
    assert minimal(counter)["init_parameters"] == {"chunk_cap": 1, "max_search_failures": True}  # True is not 3
    assert minimal({"type": "no.such.Class", "init_parameters": {"a": 1}})["init_parameters"] == {"a": 1}


def _readme_diff() -> tuple[str, str]:
    readme = (Path(__file__).parents[2] / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("#### Switching the store by hand") :]
    return section, section[section.index("```diff\n") + 8 : section.index("```\n", section.index("```diff"))]


@pytest.mark.integration  # default_pipelines() builds its Milvus stores on a Milvus Lite file
def test_readme_diff_to_milvus_lite_is_short_and_loads_like_the_packaged_milvus_pipeline(tmp_path):
    section, diff = _readme_diff()
    changed = [line for line in diff.splitlines()[2:] if line[:1] in "+-"]
    assert len(changed) <= 15
    assert f"a change of {len(changed)} lines" in " ".join(section.split())  # the count the README states
    (tmp_path / "pipelines").mkdir()
    (tmp_path / "pipelines" / "agentic_rag_embedded.yml").write_text(
        pipeline_path("agentic_rag_embedded.yml").read_text(encoding="utf-8"), encoding="utf-8"
    )
    (tmp_path / "milvus.diff").write_text(diff, encoding="utf-8")
    subprocess.run(["git", "apply", "milvus.diff"], cwd=tmp_path, check=True, capture_output=True)
    edited = (tmp_path / "pipelines" / "agentic_rag_embedded.yml").read_text(encoding="utf-8")
    packaged = pipeline_path("agentic_rag_embedded_milvus.yml").read_text(encoding="utf-8")
    edited = edited.replace("{uri: my_docs.db}", "{uri: haystack_agentic_milvus.db}")  # the packaged file's name
    mine = load_yaml(edited)
    theirs = load_yaml(packaged)
    assert _comparable(_opened(mine).to_dict()) == _comparable(_opened(theirs).to_dict())


def test_loading_without_allow_list_is_refused_although_the_package_is_imported():
    with pytest.raises(DeserializationError, match="haystack_agentic"):
        Pipeline.loads(pipeline_path("agentic_rag_embedded").read_text(encoding="utf-8"))


def test_unknown_pipeline_name_lists_the_known_ones():
    with pytest.raises(FileNotFoundError, match="agentic_rag_embedded"):
        pipeline_path("nope")


def test_pipelines_dir_is_the_repository_folder():
    assert pipelines_dir().name == "pipelines"
    assert sorted(p.name for p in pipelines_dir().glob("*.yml")) == sorted(NAMES)
    assert Path(pipelines_dir(), "agentic_rag.yml").exists()


def test_two_loaded_pipelines_do_not_share_documents(tmp_path):
    """In-memory stores with one `index` share storage in Haystack; each loaded pipeline gets its own."""
    from haystack import Document

    from haystack_agentic.loop_loading import retriever_store
    from haystack_agentic.pipelines.loop_builder import load_loop_pipeline

    path = pipeline_path("agentic_rag_embedded_ungrounded")
    first, second = load_loop_pipeline(path), load_loop_pipeline(path)
    retriever_store(first).write_documents([Document(content="only in the first")])
    assert retriever_store(second).count_documents() == 0
    # ...while the router and the retriever of one pipeline still share theirs.
    assert first.get_component("router").document_store.count_documents() == 1


@pytest.mark.parametrize("name", [n for n in LOADED_NAMES if "agentic_rag" in str(n)])
def test_packaged_yaml_declares_a_flat_result_for_hayhooks(name, monkeypatch):
    """hayhooks serves the declared outputs: one per key of the result, each a real output socket of `result`."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    text = pipeline_path(name).read_text(encoding="utf-8")
    declared = yaml.safe_load(text)
    outputs = load_yaml(text).outputs()
    assert declared["inputs"] == {"query": "controller.query"}
    # `answers` (the same answer as Haystack `GeneratedAnswer`s) is not part of the JSON result (`result_to_dict`).
    served = set(outputs["result"]) - {"answers"}
    assert set(declared["outputs"]) == served >= {"answer", "terminated_by", "documents", "usage"}
    assert all(path == f"result.{key}" for key, path in declared["outputs"].items())


@pytest.mark.parametrize("name", ["agentic_rag", "agentic_rag_json", "agentic_rag_embedded"])
def test_max_iterations_reaches_the_controller_of_every_packaged_pipeline(name):
    # The packaged controllers list no init parameters: the override was once set on a throw-away dict, so the run
    # went on to the YAML default of 10 turns under a run bound made for the override (PipelineMaxComponentRuns).
    from haystack_agentic.pipelines.loop_builder import load_loop_pipeline
    from haystack_agentic.pipelines.loop_pipeline import max_runs_for

    pipeline = load_loop_pipeline(name, max_iterations=2)
    assert pipeline.get_component("controller").max_iterations == 2
    assert pipeline.to_dict()["max_runs_per_component"] == max_runs_for(2)


def _openai_generators(pipeline):
    from haystack.components.generators.chat import OpenAIChatGenerator

    return [value for _, c in pipeline.walk() for value in vars(c).values() if isinstance(value, OpenAIChatGenerator)]


@pytest.mark.parametrize("name", ["agentic_rag", "agentic_rag_json"])
def test_a_local_server_without_a_key_gets_a_placeholder_passed_not_written(name, monkeypatch):
    import os

    from haystack_agentic.llm.local_server_key import LOCAL_SERVER_API_KEY
    from haystack_agentic.pipelines.loop_builder import load_loop_pipeline

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    pipeline = load_loop_pipeline(name, api_base_url="http://127.0.0.1:9/v1")
    generators = _openai_generators(pipeline)
    assert generators and "OPENAI_API_KEY" not in os.environ
    for generator in generators:
        generator.warm_up()  # the OpenAI client refuses to start without a key
        assert generator.client.api_key == LOCAL_SERVER_API_KEY
    saved = yaml.safe_load(pipeline.dumps())["components"]["router"]["init_parameters"]["chat_generator"]
    assert saved["init_parameters"]["api_key"] == {"type": "env_var", "env_vars": ["OPENAI_API_KEY"], "strict": True}
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # the environment's base URL counts too
    assert all(g.api_key.resolve_value() == LOCAL_SERVER_API_KEY for g in _openai_generators(load_loop_pipeline(name)))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-the-environment")
    pipeline = load_loop_pipeline(name, api_base_url="http://127.0.0.1:9/v1")
    assert all(g.api_key.resolve_value() == "sk-from-the-environment" for g in _openai_generators(pipeline))
    router = yaml.safe_load(pipeline.dumps())["components"]["router"]["init_parameters"]["chat_generator"]
    assert router["init_parameters"]["api_key"] == {"type": "env_var", "env_vars": ["OPENAI_API_KEY"], "strict": True}


def test_no_key_and_no_base_url_is_left_to_the_generator(monkeypatch):
    from haystack_agentic.pipelines.loop_builder import LoopOptions, build_loop, load_loop_pipeline

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ValueError, match="OPENAI_API_KEY"):
        build_loop(LoopOptions(llm="openai"))
    generators = _openai_generators(load_loop_pipeline("agentic_rag"))  # loading needs no key
    assert generators and all(g.api_key.to_dict()["env_vars"] == ["OPENAI_API_KEY"] for g in generators)
