# SPDX-License-Identifier: Apache-2.0
"""
The `api_key` of an `OpenAIChatGenerator` talking to a local OpenAI-compatible server (which ignores the key) when
`OPENAI_API_KEY` is not set: the OpenAI client refuses to start without one. Nothing is written to the environment.
"""

import os
from typing import Any

from haystack.utils import Secret
from haystack.utils.auth import SecretType

from haystack_agentic.settings import ENV_OPENAI_API_KEY, ENV_OPENAI_BASE_URL

#: The key sent to a local server when `OPENAI_API_KEY` is not set.
LOCAL_SERVER_API_KEY = "not-needed-for-a-local-server"


class LocalServerKey(Secret):
    """
    `OPENAI_API_KEY` when it is set, else `LOCAL_SERVER_API_KEY`. Serialised as `Secret.from_env_var("OPENAI_API_KEY")`:
    a saved pipeline names the variable, never the placeholder.
    """

    def resolve_value(self) -> str:
        """:returns: `$OPENAI_API_KEY`, else `LOCAL_SERVER_API_KEY`."""
        return os.environ.get(ENV_OPENAI_API_KEY) or LOCAL_SERVER_API_KEY

    @property
    def type(self) -> SecretType:
        """Serialised as an environment-variable secret."""
        return SecretType.ENV_VAR

    def _to_dict(self) -> dict[str, Any]:
        return {"env_vars": [ENV_OPENAI_API_KEY], "strict": True}

    @staticmethod
    def _from_dict(data: dict[str, Any]) -> Secret:
        return Secret.from_dict({"type": SecretType.ENV_VAR.value, **data})


def openai_api_key(base_url: str | None = None) -> Secret | None:
    """
    The API key to pass an `OpenAIChatGenerator` explicitly, if any.

    :param base_url: The base URL given (`--base-url`), if any; `OPENAI_BASE_URL` is read too.
    :returns: `None` when `OPENAI_API_KEY` is set (the generator's default reads it); else, with a base URL, a
        `LocalServerKey`.
    :raises ValueError: When neither `OPENAI_API_KEY` nor a base URL is set.
    """
    if os.environ.get(ENV_OPENAI_API_KEY, "").strip():
        return None
    if not (base_url or os.environ.get(ENV_OPENAI_BASE_URL, "").strip()):
        raise ValueError("--llm openai needs OPENAI_API_KEY (or OPENAI_BASE_URL / --base-url for a local server).")
    return LocalServerKey()
