# SPDX-License-Identifier: Apache-2.0
"""
The environment variables haystack-agentic reads, and the default paths they override, in one place.

| Variable | What it sets | Default |
| --- | --- | --- |
| `HAYSTACK_AGENTIC_CACHE` | The cache folder (converted model, default store) | the user cache dir (below) |
| `HAYSTACK_AGENTIC_STORE` | The saved in-memory store `index` writes and `ask`/`serve` read | `<cache>/store.json` |
| `HAYSTACK_AGENTIC_MILVUS_URI` | The Milvus Lite file of `--backend milvus` | `milvus.db` next to the store |
| `HAYSTACK_AGENTIC_MODEL` | The OpenAI-compatible model name | the packaged pipeline's |
| `WEAVIATE_URL` | The Weaviate server of `--backend weaviate` | `http://localhost:8080` |
| `OPENAI_API_KEY`, `OPENAI_BASE_URL` | Choose the OpenAI-compatible LLM (`--llm auto`) | the embedded model |

The user cache dir comes from `platformdirs` (`~/.cache/haystack-agentic` on Linux). Every function reads the
environment when called.
"""

import os
from pathlib import Path

from platformdirs import user_cache_path

APP_NAME = "haystack-agentic"

ENV_CACHE = "HAYSTACK_AGENTIC_CACHE"
ENV_STORE = "HAYSTACK_AGENTIC_STORE"
ENV_MILVUS_URI = "HAYSTACK_AGENTIC_MILVUS_URI"
ENV_MODEL = "HAYSTACK_AGENTIC_MODEL"
ENV_WEAVIATE_URL = "WEAVIATE_URL"
ENV_OPENAI_API_KEY = "OPENAI_API_KEY"
ENV_OPENAI_BASE_URL = "OPENAI_BASE_URL"

#: The Weaviate server used when `WEAVIATE_URL` is not set.
DEFAULT_WEAVIATE_URL = "http://localhost:8080"
#: The model of the packaged OpenAI-compatible pipelines and of `eval`'s LLM router when no `--model` or
#: `HAYSTACK_AGENTIC_MODEL` names one.
DEFAULT_OPENAI_MODEL = "gpt-4o-mini"
#: The address and port `haystack-agentic serve` binds when no `--host` / `--port` is given (MCP: the next port).
DEFAULT_SERVE_HOST = "127.0.0.1"
DEFAULT_SERVE_PORT = 1416


def _env(name: str) -> str | None:
    """The variable's value, or `None` when unset or blank."""
    value = os.environ.get(name, "").strip()
    return value or None


def _env_path(name: str) -> Path | None:
    value = _env(name)
    return Path(value).expanduser() if value else None


def cache_dir() -> Path:
    """The cache folder (it may not exist yet): `$HAYSTACK_AGENTIC_CACHE`, else the user cache dir."""
    return _env_path(ENV_CACHE) or user_cache_path(APP_NAME, appauthor=False)


def default_store_path() -> Path:
    """The in-memory store `index` saves and `ask` / `serve` load: `$HAYSTACK_AGENTIC_STORE`, else in the cache."""
    return _env_path(ENV_STORE) or cache_dir() / "store.json"


def store_path_from_env() -> Path | None:
    """The store file the user named in the environment (`$HAYSTACK_AGENTIC_STORE`), or `None`."""
    return _env_path(ENV_STORE)


def default_milvus_uri() -> Path:
    """The default Milvus Lite file: `$HAYSTACK_AGENTIC_MILVUS_URI`, else `milvus.db` next to the default store."""
    return _env_path(ENV_MILVUS_URI) or default_store_path().parent / "milvus.db"


def default_weaviate_url() -> str:
    """The default Weaviate server: `$WEAVIATE_URL`, else `DEFAULT_WEAVIATE_URL`."""
    return _env(ENV_WEAVIATE_URL) or DEFAULT_WEAVIATE_URL


def model_from_env() -> str | None:
    """The OpenAI-compatible model named in `$HAYSTACK_AGENTIC_MODEL`, or `None`."""
    return _env(ENV_MODEL)


def openai_configured() -> bool:
    """Whether `OPENAI_API_KEY` or `OPENAI_BASE_URL` is set."""
    return bool(_env(ENV_OPENAI_API_KEY) or _env(ENV_OPENAI_BASE_URL))
