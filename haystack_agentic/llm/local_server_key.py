# SPDX-License-Identifier: Apache-2.0
"""The `api_key` for a local OpenAI-compatible server (which ignores it) when `OPENAI_API_KEY` is not set."""

import os

from haystack.utils import Secret
from haystack.utils.auth import EnvVarSecret

from haystack_agentic.settings import ENV_OPENAI_API_KEY, ENV_OPENAI_BASE_URL

#: The key sent to a local server when `OPENAI_API_KEY` is not set.
LOCAL_SERVER_API_KEY = "not-needed-for-a-local-server"


class LocalServerKey(EnvVarSecret):
    """
    A secret that reads `OPENAI_API_KEY` when it is set, else `LOCAL_SERVER_API_KEY`.

    `OPENAI_API_KEY` when it is set, else `LOCAL_SERVER_API_KEY`. It is Haystack's secret of that environment
    variable in every other way (it serialises as one and loads back as one); only `resolve_value` differs.
    """

    def __init__(self) -> None:
        super().__init__((ENV_OPENAI_API_KEY,), True)  # the dataclass fields, by position: the variable, strict

    def resolve_value(self) -> str:
        return os.environ.get(ENV_OPENAI_API_KEY) or LOCAL_SERVER_API_KEY


def openai_api_key(base_url: str | None = None) -> Secret | None:
    """
    The API key to pass an `OpenAIChatGenerator`, or `None` to let it read `OPENAI_API_KEY`.

    The API key to pass an `OpenAIChatGenerator`: `None` when `OPENAI_API_KEY` is set (its default reads it), else,
    with a base URL (`base_url` or `OPENAI_BASE_URL`), a `LocalServerKey`.

    :raises ValueError: When neither `OPENAI_API_KEY` nor a base URL is set.
    """
    if os.environ.get(ENV_OPENAI_API_KEY, "").strip():
        return None
    if not (base_url or os.environ.get(ENV_OPENAI_BASE_URL, "").strip()):
        msg = "--llm openai needs OPENAI_API_KEY (or OPENAI_BASE_URL / --base-url for a local server)."
        raise ValueError(msg)
    return LocalServerKey()
