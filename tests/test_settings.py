# SPDX-License-Identifier: Apache-2.0
"""The environment variables and default paths of `haystack_agentic.settings`."""

import pytest

from haystack_agentic import settings
from haystack_agentic.components.generators.embedded_chat_generator import DEFAULT_MODEL_FOLDER, EmbeddedChatGenerator

_VARS = (
    "HAYSTACK_AGENTIC_CACHE",
    "HAYSTACK_AGENTIC_STORE",
    "HAYSTACK_AGENTIC_MILVUS_URI",
    "XDG_CACHE_HOME",
    "WEAVIATE_URL",
    "HAYSTACK_AGENTIC_MODEL",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
)


@pytest.fixture
def clean_env(monkeypatch, tmp_path):
    for name in _VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return monkeypatch


def test_xdg_cache_home_is_honoured(clean_env, tmp_path):
    assert settings.cache_dir() == tmp_path / "home" / ".cache" / "haystack-agentic"
    clean_env.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert settings.cache_dir() == tmp_path / "xdg" / "haystack-agentic"
    assert settings.default_store_path() == tmp_path / "xdg" / "haystack-agentic" / "store.json"
    assert settings.default_milvus_uri() == tmp_path / "xdg" / "haystack-agentic" / "milvus.db"


def test_the_project_variables_override_the_cache_dir(clean_env, tmp_path):
    clean_env.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    clean_env.setenv("HAYSTACK_AGENTIC_CACHE", str(tmp_path / "mine"))
    assert settings.cache_dir() == tmp_path / "mine"
    assert settings.store_path_from_env() is None
    clean_env.setenv("HAYSTACK_AGENTIC_STORE", "~/stores/s.json")
    assert settings.default_store_path() == tmp_path / "home" / "stores" / "s.json"
    assert settings.default_milvus_uri() == tmp_path / "home" / "stores" / "milvus.db"
    clean_env.setenv("HAYSTACK_AGENTIC_MILVUS_URI", str(tmp_path / "m.db"))
    assert settings.default_milvus_uri() == tmp_path / "m.db"
    clean_env.setenv("HAYSTACK_AGENTIC_CACHE", "   ")  # blank: unset
    assert settings.cache_dir() == tmp_path / "xdg" / "haystack-agentic"


def test_llm_and_server_variables(clean_env):
    assert settings.default_weaviate_url() == "http://localhost:8080"
    assert settings.model_from_env() is None and not settings.openai_configured()
    clean_env.setenv("WEAVIATE_URL", "http://weaviate:8080")
    clean_env.setenv("HAYSTACK_AGENTIC_MODEL", "qwen2.5")
    clean_env.setenv("OPENAI_BASE_URL", "http://127.0.0.1:11434/v1")
    assert settings.default_weaviate_url() == "http://weaviate:8080"
    assert settings.model_from_env() == "qwen2.5" and settings.openai_configured()


def test_the_embedded_model_is_converted_under_the_cache_dir(clean_env, tmp_path):
    clean_env.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    generator = EmbeddedChatGenerator()
    assert generator._model_dir() == tmp_path / "xdg" / "haystack-agentic" / DEFAULT_MODEL_FOLDER
    assert EmbeddedChatGenerator(cache_dir=str(tmp_path / "c"))._model_dir() == (tmp_path / "c" / DEFAULT_MODEL_FOLDER)


def test_openai_api_key_is_passed_not_written(clean_env):
    import os

    from haystack.utils import Secret

    from haystack_agentic.llm.local_server_key import LOCAL_SERVER_API_KEY, LocalServerKey, openai_api_key

    with pytest.raises(ValueError, match="OPENAI_API_KEY"):
        openai_api_key()  # neither a key nor a base URL
    key = openai_api_key("http://127.0.0.1:11434/v1")
    assert isinstance(key, LocalServerKey) and key.resolve_value() == LOCAL_SERVER_API_KEY
    assert "OPENAI_API_KEY" not in os.environ
    # saved as the generator's default Secret: the file names the variable, never the placeholder
    assert key.to_dict() == Secret.from_env_var("OPENAI_API_KEY").to_dict()
    assert Secret.from_dict(key.to_dict()) == Secret.from_env_var("OPENAI_API_KEY")
    clean_env.setenv("OPENAI_BASE_URL", "http://127.0.0.1:11434/v1")
    assert isinstance(openai_api_key(), LocalServerKey)
    clean_env.setenv("OPENAI_API_KEY", "sk-real")
    assert openai_api_key() is None  # the generator's own Secret reads the real key
    assert key.resolve_value() == "sk-real"
