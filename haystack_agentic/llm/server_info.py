# SPDX-License-Identifier: Apache-2.0
"""What an OpenAI-compatible server says about itself: llama.cpp's `/props` (tool support, context size)."""

import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from haystack import logging

logger = logging.getLogger(__name__)

#: Seconds to wait for `/props`: a local server answers in milliseconds; a remote one without it must not delay a run.
PROPS_TIMEOUT = 2.0

#: Tokens of the context left for the reply and the chat template when the prompt budget is fitted to a server's
#: context (the largest per-role `max_tokens` of the packaged pipelines, plus a margin).
REPLY_RESERVE_TOKENS = 512
#: The smallest prompt budget the router accepts (`AgenticRouter(context_budget_tokens)`).
MIN_PROMPT_BUDGET = 256


@dataclass(frozen=True)
class ServerInfo:
    """
    What a llama.cpp-style server reported: tool support of its chat template and context size.

    What a llama.cpp-style server reported (`None`: not reported): whether the model's chat template handles
    tools, and the context size of one slot in tokens.
    """

    supports_tools: bool | None = None
    n_ctx: int | None = None

    def prompt_budget(self, budget: int) -> int:
        """`budget` (tokens), less when the context leaves less after `REPLY_RESERVE_TOKENS`; >= `MIN_PROMPT_BUDGET`."""
        if not self.n_ctx:
            return budget
        return max(MIN_PROMPT_BUDGET, min(budget, self.n_ctx - REPLY_RESERVE_TOKENS))


def props_url(base_url: str) -> str:
    """The `/props` address of an OpenAI-compatible base URL (`http://host:8080/v1` -> `http://host:8080/props`)."""
    parts = urlsplit(base_url.rstrip("/"))
    path = parts.path[: -len("/v1")] if parts.path.endswith("/v1") else parts.path
    return urlunsplit((parts.scheme, parts.netloc, f"{path}/props", "", ""))


def parse_props(props: Any) -> ServerInfo:
    """A decoded `/props` reply as a `ServerInfo` (unknown or missing fields give `None`)."""
    if not isinstance(props, dict):
        return ServerInfo()
    caps = props.get("chat_template_caps")
    supports = caps.get("supports_tools") if isinstance(caps, dict) else None
    settings = props.get("default_generation_settings")
    n_ctx = settings.get("n_ctx") if isinstance(settings, dict) else None
    return ServerInfo(
        supports_tools=supports if isinstance(supports, bool) else None,
        n_ctx=n_ctx if isinstance(n_ctx, int) and not isinstance(n_ctx, bool) and n_ctx > 0 else None,
    )


def read_server_info(base_url: str) -> ServerInfo:
    """What the server at `base_url` reports (`/props`); an empty `ServerInfo` for a server that does not answer."""
    url = props_url(base_url)
    if urlsplit(url).scheme not in ("http", "https"):
        return ServerInfo()
    try:
        with urllib.request.urlopen(url, timeout=PROPS_TIMEOUT) as response:  # noqa: S310 - http(s) only, checked above
            return parse_props(json.loads(response.read(1_000_000)))
    except (OSError, ValueError, urllib.error.URLError) as exc:
        logger.debug("No server info at {url}: {error}", url=url, error=repr(exc))
        return ServerInfo()
