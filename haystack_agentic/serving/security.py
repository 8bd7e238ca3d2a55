# SPDX-License-Identifier: Apache-2.0
"""
Access control for what `haystack-agentic serve` exposes: an optional API key (`Authorization: Bearer <key>`)
checked by an ASGI middleware on the HTTP app and the MCP app alike, and the settings that say whether runtime
deployment is allowed.

The settings travel through the environment (`HAYSTACK_AGENTIC_API_KEY`, `HAYSTACK_AGENTIC_ALLOW_DEPLOY`) so that
every process `serve` starts (uvicorn workers building the app from a factory, the MCP process) applies the same
rules.
"""

import hmac
import ipaddress
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass

from haystack import logging

logger = logging.getLogger(__name__)

#: The API key clients must send as `Authorization: Bearer <key>` (unset: no authentication).
ENV_API_KEY = "HAYSTACK_AGENTIC_API_KEY"
#: `1` when runtime deployment (hayhooks' deploy/undeploy routes and MCP tools) is allowed; set by `serve`.
ENV_ALLOW_DEPLOY = "HAYSTACK_AGENTIC_ALLOW_DEPLOY"

#: The HTTP app's health check, answered without a key: `{"status": "ok"}` and nothing else.
HEALTH_PATH = "/health"

UNAUTHORIZED_MESSAGE = (
    "Missing or wrong API key: send the header `Authorization: Bearer <key>` with the key the server was started "
    "with (`haystack-agentic serve --api-key` or $HAYSTACK_AGENTIC_API_KEY)."
)

_LOOPBACK_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"}


@dataclass(frozen=True)
class ServeSecurity:
    """
    What the server exposes and who may use it.

    :param api_key: The key every request (but the health checks) must carry, or `None` for no authentication.
    :param allow_deploy: Whether hayhooks' runtime deployment (upload and run pipeline code) stays enabled.
    """

    api_key: str | None = None
    allow_deploy: bool = False

    @classmethod
    def from_env(cls) -> "ServeSecurity":
        """The settings from `HAYSTACK_AGENTIC_API_KEY` and `HAYSTACK_AGENTIC_ALLOW_DEPLOY`."""
        key = os.environ.get(ENV_API_KEY) or None
        return cls(api_key=key, allow_deploy=os.environ.get(ENV_ALLOW_DEPLOY, "").strip().lower() in ("1", "true"))

    def to_env(self, env: dict[str, str]) -> None:
        """Write the settings into `env` (e.g. `os.environ`) for the processes `serve` starts."""
        if self.api_key:
            env[ENV_API_KEY] = self.api_key
        else:
            env.pop(ENV_API_KEY, None)
        env[ENV_ALLOW_DEPLOY] = "1" if self.allow_deploy else "0"


def check_api_key(key: str) -> str:
    """
    Validate an API key given to `serve`.

    :param key: The key.
    :returns: The key.
    :raises ValueError: If it is shorter than 16 characters, or holds whitespace or characters an HTTP header
        cannot carry (it must be printable ASCII).
    """
    if len(key) < 16:
        raise ValueError("The API key must be at least 16 characters long (e.g. `openssl rand -hex 24`).")
    if not all(33 <= ord(char) <= 126 for char in key):
        raise ValueError("The API key must be printable ASCII without spaces (it travels in an HTTP header).")
    return key


def is_loopback(host: str) -> bool:
    """Whether `host` (an address or name to bind) only accepts connections from this machine."""
    host = host.strip().strip("[]").lower()
    if host in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class BearerAuth:
    """
    ASGI middleware: HTTP and WebSocket requests must carry `Authorization: Bearer <api_key>`, else 401.

    The key is compared in constant time. `OPTIONS` requests (CORS preflights, which carry no credentials) and
    the paths in `open_paths` (health checks) and under `open_prefixes` (routes with their own authentication)
    pass without a key. Lifespan events always pass.

    ### Usage example
    ```python
    app = BearerAuth(app, api_key="a-long-random-key", open_paths={"/health"})
    ```
    """

    def __init__(
        self, app, api_key: str, open_paths: Iterable[str] = (), open_prefixes: Iterable[str] = ()
    ) -> None:
        """
        :param app: The ASGI app to protect.
        :param api_key: The key clients must send.
        :param open_paths: Exact paths served without a key.
        :param open_prefixes: Path prefixes served without a key (e.g. hayhooks' `/traces`, which checks its own
            token).
        """
        self.app = app
        self._expected = api_key.encode("ascii")
        self._open_paths = frozenset(open_paths)
        self._open_prefixes = tuple(open_prefixes)

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] not in ("http", "websocket") or self._is_open(scope) or self._authorized(scope):
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008, "reason": "API key required"})
            return
        body = json.dumps({"detail": UNAUTHORIZED_MESSAGE}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"www-authenticate", b'Bearer realm="haystack-agentic"'),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})

    def _is_open(self, scope) -> bool:
        if scope["type"] == "http" and scope.get("method") == "OPTIONS":
            return True
        path = scope.get("path", "")
        return path in self._open_paths or any(path.startswith(prefix) for prefix in self._open_prefixes)

    def _authorized(self, scope) -> bool:
        values = [value for name, value in scope.get("headers", []) if name.lower() == b"authorization"]
        if len(values) != 1:
            return False
        scheme, _, token = values[0].strip().partition(b" ")
        # compare_digest on bytes of any length takes time independent of where they differ.
        return scheme.lower() == b"bearer" and hmac.compare_digest(token.strip(), self._expected)
