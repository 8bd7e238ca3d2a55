# SPDX-License-Identifier: Apache-2.0
from pathlib import Path

import pytest
import yaml
from haystack import Pipeline

from haystack_agentic import ALLOWED_MODULES
from haystack_agentic.default_pipelines import default_pipelines
from haystack_agentic.resources import pipeline_path, pipelines_dir

NAMES = ["agentic_rag.yml", "agentic_rag_json.yml", "agentic_rag_embedded.yml"]


@pytest.mark.parametrize("name", NAMES)
def test_packaged_yaml_loads_and_round_trips(name, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # loading must not need the key
    text = pipeline_path(name).read_text(encoding="utf-8")
    assert isinstance(yaml.safe_load(text), dict)
    loaded = Pipeline.loads(text, allowed_modules=ALLOWED_MODULES)
    dumped = loaded.dumps()
    assert isinstance(yaml.safe_load(dumped), dict)
    assert Pipeline.loads(dumped, allowed_modules=ALLOWED_MODULES).to_dict() == loaded.to_dict()


@pytest.mark.parametrize("name", NAMES)
def test_packaged_yaml_matches_the_builder(name):
    """The committed YAML is what `python -m haystack_agentic.default_pipelines` writes (run `make pipelines`)."""
    built = yaml.safe_load(default_pipelines()[name].dumps())
    committed = yaml.safe_load((pipelines_dir() / name).read_text(encoding="utf-8"))
    for data in (built, committed):
        data["connections"] = sorted(data["connections"], key=lambda c: (c["sender"], c["receiver"]))
    assert committed == built


def test_loading_without_allow_list_is_refused():
    with pytest.raises(Exception, match="haystack_agentic"):
        Pipeline.loads(pipeline_path("agentic_rag_embedded").read_text(encoding="utf-8"))


def test_unknown_pipeline_name_lists_the_known_ones():
    with pytest.raises(FileNotFoundError, match="agentic_rag_embedded"):
        pipeline_path("nope")


def test_pipelines_dir_is_the_repository_folder():
    assert pipelines_dir().name == "pipelines"
    assert sorted(p.name for p in pipelines_dir().glob("*.yml")) == sorted(NAMES)
    assert Path(pipelines_dir(), "agentic_rag.yml").exists()
