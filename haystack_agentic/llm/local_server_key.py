# SPDX-License-Identifier: Apache-2.0
"""The `api_key` for a local OpenAI-compatible server (which ignores it) when `OPENAI_API_KEY` is not set."""

import os
from typing import Any

from haystack.utils import Secret
from haystack.utils.auth import SecretType

from haystack_agentic.settings import ENV_OPENAI_API_KEY, ENV_OPENAI_BASE_URL

#: The key sent to a local server when `OPENAI_API_KEY` is not set.
LOCAL_SERVER_API_KEY = "not-needed-for-a-local-server"


class LocalServerKey(Secret):
    """`OPENAI_API_KEY` when it is set, else `LOCAL_SERVER_API_KEY`; serialised as the environment variable's secret."""

    def resolve_value(self) -> str:
        return os.environ.get(ENV_OPENAI_API_KEY) or LOCAL_SERVER_API_KEY

    @property
    def type(self) -> SecretType:
        return SecretType.ENV_VAR

    def _to_dict(self) -> dict[str, Any]:
        return {"env_vars": [ENV_OPENAI_API_KEY], "strict": True}

    @staticmethod
    def _from_dict(data: dict[str, Any]) -> Secret:
        return Secret.from_dict({"type": SecretType.ENV_VAR.value, **data})


def openai_api_key(base_url: str | None = None) -> Secret | None:
    """
    The API key to pass an `OpenAIChatGenerator`: `None` when `OPENAI_API_KEY` is set (its default reads it), else,
    with a base URL (`base_url` or `OPENAI_BASE_URL`), a `LocalServerKey`.

    :raises ValueError: When neither `OPENAI_API_KEY` nor a base URL is set.
    """
    if os.environ.get(ENV_OPENAI_API_KEY, "").strip():
        return None
    if not (base_url or os.environ.get(ENV_OPENAI_BASE_URL, "").strip()):
        raise ValueError("--llm openai needs OPENAI_API_KEY (or OPENAI_BASE_URL / --base-url for a local server).")
    return LocalServerKey()
