# SPDX-License-Identifier: Apache-2.0
"""
Access control for what `haystack-agentic serve` exposes (HTTP and MCP apps alike).

An optional API key, a `Host` check against DNS rebinding (Starlette's `TrustedHostMiddleware`), whether runtime
deployment is allowed. The
settings travel through the environment (`ENV_*`), so every process `serve` starts applies the same rules.
"""

import hmac
import ipaddress
import json
import os
import re
from collections.abc import Iterable, MutableMapping
from dataclasses import dataclass

from fastapi.security import HTTPBearer
from haystack import logging
from starlette.authentication import AuthCredentials, AuthenticationBackend, AuthenticationError, SimpleUser
from starlette.exceptions import HTTPException
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import HTTPConnection
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from haystack_agentic.settings import DEFAULT_SERVE_HOST

logger = logging.getLogger(__name__)

#: The API key clients must send as `Authorization: Bearer <key>` (unset: no authentication).
ENV_API_KEY = "HAYSTACK_AGENTIC_API_KEY"
#: `1` when runtime deployment (hayhooks' deploy/undeploy routes and MCP tools) is allowed; set by `serve`.
ENV_ALLOW_DEPLOY = "HAYSTACK_AGENTIC_ALLOW_DEPLOY"
#: Comma-separated origins allowed to read responses cross-origin (CORS); unset: none.
ENV_CORS_ORIGINS = "HAYSTACK_AGENTIC_CORS_ORIGINS"
#: Comma-separated extra host names accepted in the `Host` header (besides the bound address and loopback names).
ENV_ALLOWED_HOSTS = "HAYSTACK_AGENTIC_ALLOWED_HOSTS"
#: The address `serve` binds (the `Host` header may name it).
ENV_BIND_HOST = "HAYHOOKS_HOST"
#: Largest request body accepted, in bytes (larger: 413), and most messages in a chat request (more: 422).
ENV_MAX_BODY_BYTES = "HAYSTACK_AGENTIC_MAX_BODY_BYTES"
ENV_MAX_MESSAGES = "HAYSTACK_AGENTIC_MAX_MESSAGES"
#: Their defaults (docs/decisions.md): 1 MiB holds a long conversation; 1,000 messages are ~1 s of fitting.
DEFAULT_MAX_BODY_BYTES = 1024 * 1024
DEFAULT_MAX_MESSAGES = 1000

#: The HTTP app's health check, answered without a key: `{"status": "ok"}` and nothing else.
HEALTH_PATH = "/health"

UNAUTHORIZED_MESSAGE = (
    "Missing or wrong API key: send the header `Authorization: Bearer <key>` with the key the server was started "
    "with (`haystack-agentic serve --api-key` or $HAYSTACK_AGENTIC_API_KEY)."
)
#: The `WWW-Authenticate` header of a 401.
UNAUTHORIZED_CHALLENGE = 'Bearer realm="haystack-agentic"'

_LOOPBACK_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"}


@dataclass(frozen=True)
class ServeSecurity:
    """
    What the server exposes and who may use it.

    The API key (`None`: no authentication), whether hayhooks' runtime deployment stays enabled, CORS origins, host
    names accepted in `Host` besides `bind_host` and loopback names, the largest request body (bytes) and the most
    messages of a chat request.
    """

    api_key: str | None = None
    allow_deploy: bool = False
    cors_origins: tuple[str, ...] = ()
    allowed_hosts: tuple[str, ...] = ()
    bind_host: str = DEFAULT_SERVE_HOST
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    max_messages: int = DEFAULT_MAX_MESSAGES

    @classmethod
    def from_env(cls) -> "ServeSecurity":
        """The settings from the `ENV_*` environment variables (`ValueError`: a limit not a whole number >= 1)."""
        environ = os.environ
        return cls(
            api_key=os.environ.get(ENV_API_KEY) or None,
            allow_deploy=os.environ.get(ENV_ALLOW_DEPLOY, "").strip().lower() in ("1", "true"),
            cors_origins=_split(os.environ.get(ENV_CORS_ORIGINS, "")),
            allowed_hosts=_split(os.environ.get(ENV_ALLOWED_HOSTS, "")),
            bind_host=os.environ.get(ENV_BIND_HOST) or DEFAULT_SERVE_HOST,
            max_body_bytes=check_limit(environ.get(ENV_MAX_BODY_BYTES) or DEFAULT_MAX_BODY_BYTES, ENV_MAX_BODY_BYTES),
            max_messages=check_limit(environ.get(ENV_MAX_MESSAGES) or DEFAULT_MAX_MESSAGES, ENV_MAX_MESSAGES),
        )

    def accepted_hosts(self) -> frozenset[str]:
        """The hosts a request's `Host` header may name (lower case, no port; IPv6 addresses in brackets)."""
        names = {self.bind_host.strip("[]").lower(), *(host.lower() for host in self.allowed_hosts)}
        names |= _LOOPBACK_NAMES | {"127.0.0.1", "::1"}
        return frozenset(f"[{name}]" if _is_ipv6(name) else name for name in names)

    def to_env(self, env: MutableMapping[str, str]) -> None:
        """Write the settings into `env` (e.g. `os.environ`) for the processes `serve` starts."""
        if self.api_key:
            env[ENV_API_KEY] = self.api_key
        else:
            env.pop(ENV_API_KEY, None)
        env[ENV_ALLOW_DEPLOY] = "1" if self.allow_deploy else "0"
        env[ENV_CORS_ORIGINS] = ",".join(self.cors_origins)
        env[ENV_ALLOWED_HOSTS] = ",".join(self.allowed_hosts)
        env[ENV_BIND_HOST] = self.bind_host
        env[ENV_MAX_BODY_BYTES] = str(self.max_body_bytes)
        env[ENV_MAX_MESSAGES] = str(self.max_messages)


def check_limit(value: str | int, name: str) -> int:
    """A request limit as a whole number of at least 1 (`ValueError` naming `name`, its flag or variable)."""
    text = str(value).strip()
    if not text.isdigit() or int(text) < 1:
        msg = f"{name} must be a whole number of at least 1, got {str(value)[:40]!r}."
        raise ValueError(msg)
    return int(text)


def _split(value: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in value.split(",") if part.strip())


def check_origin(origin: str) -> str:
    """A `serve --cors-origin` origin without a trailing slash (`ValueError`: `*`, not http(s), or with a path)."""
    origin = origin.strip().rstrip("/")
    scheme, sep, rest = origin.partition("://")
    if origin == "*" or not sep or scheme not in ("http", "https") or not rest or "/" in rest or "," in rest:
        msg = (
            f"--cors-origin {origin!r} must be one origin such as https://app.example.org (scheme and host, no path, "
            "not `*`)."
        )
        raise ValueError(msg)
    return origin


_PLAIN_HOST = re.compile(r"[a-z0-9_.-]+|\[[0-9a-f:.]+\]")


def check_host_name(name: str) -> str:
    """
    A `serve --allowed-host` name in lower case.

    :raises ValueError: On anything but a plain host name, an IPv4 address or an IPv6 address in brackets: a scheme,
        port, path, `*`, space, user name...
    """
    cleaned = name.strip().lower()
    if not _PLAIN_HOST.fullmatch(cleaned) or (cleaned.startswith("[") and not _is_ipv6(cleaned[1:-1])):
        msg = f"--allowed-host {name!r} must be a host name or address without scheme, port or path."
        raise ValueError(msg)
    return cleaned


def _is_ipv6(text: str) -> bool:
    try:
        ipaddress.IPv6Address(text)
    except ValueError:
        return False
    return True


class OneHost:
    """
    Refuses (400) an HTTP or WebSocket request with more than one `Host` header before `app` sees it.

    Starlette's `TrustedHostMiddleware` reads only the first, and a proxy or the app may use another.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on to `app`, or answer it with the 400 (HTTP) or close it (WebSocket)."""
        if scope["type"] in ("http", "websocket") and sum(name == b"host" for name, _ in scope["headers"]) > 1:
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 1008})  # policy violation
            else:
                await send_json(send, 400, {"detail": "Invalid host header: a request may have one Host header only."})
            return
        await self.app(scope, receive, send)


def host_check(app: ASGIApp, hosts: Iterable[str]) -> OneHost:
    """
    `app` behind Starlette's `TrustedHostMiddleware`: only requests to one of `hosts` get through.

    An HTTP or WebSocket request whose `Host` header is not a plain `host[:port]` naming one of `hosts` (IPv6
    addresses in brackets), or that has two `Host` headers, gets a 400 "Invalid host header" (a page on another site
    can make its host name resolve to 127.0.0.1, DNS rebinding, but not change `Host`).
    """
    return OneHost(TrustedHostMiddleware(app, allowed_hosts=sorted(hosts), www_redirect=False))


async def send_json(send: Send, status: int, content: dict, headers: Iterable[tuple[bytes, bytes]] = ()) -> None:
    """Send a whole HTTP response: `status`, `content` as a JSON body, and `headers` besides its type and length."""
    body = json.dumps(content).encode()
    start = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *headers]
    await send({"type": "http.response.start", "status": status, "headers": start})
    await send({"type": "http.response.body", "body": body})


def body_limit_message(max_bytes: int) -> str:
    """The 413 message: the limit and how to change it."""
    return (
        f"The request body is larger than this server's limit of {max_bytes:,} bytes: send less (e.g. only the recent "
        "turns of a conversation), or start the server with `haystack-agentic serve --max-body-bytes N` "
        f"(${ENV_MAX_BODY_BYTES})."
    )


class BodyTooLarge(HTTPException):
    """A request body past the limit of `BodyLimit` (a 413; FastAPI passes it on to the app's error handler)."""

    def __init__(self, max_bytes: int) -> None:
        super().__init__(status_code=413, detail=body_limit_message(max_bytes))


class BodyLimit:
    """
    ASGI middleware: an HTTP request whose body is larger than `max_bytes` gets a 413 naming the limit.

    It is refused by its `Content-Length` before it is read, or when the bytes read go past the limit (a body sent
    in chunks).
    """

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on to `app` while its body stays within the limit, else answer it with the 413."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        lengths = [value for name, value in scope.get("headers", []) if name.lower() == b"content-length"]
        if any(value.strip().isdigit() and int(value) > self.max_bytes for value in lengths):
            await send_json(send, 413, {"detail": body_limit_message(self.max_bytes)})
            return
        received = 0
        started = False

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise BodyTooLarge(self.max_bytes)
            return message

        async def watched_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, limited_receive, watched_send)
        except BodyTooLarge as exc:  # an app that let it through (the MCP app): answer it here if nothing was sent
            if started:
                raise
            await send_json(send, 413, {"detail": exc.detail})


class ClosedPaths:
    """ASGI middleware: requests for `paths`, or for paths under `prefixes`, get a 404; the route never runs."""

    def __init__(self, app: ASGIApp, paths: Iterable[str] = (), prefixes: Iterable[str] = ()) -> None:
        self.app = app
        self.paths = frozenset(paths)
        self.prefixes = tuple(prefixes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on to `app`, or answer it with the 404 when its path is closed."""
        path = scope.get("path", "")
        if scope["type"] == "http" and (path in self.paths or path.startswith(self.prefixes)):
            await send_json(send, 404, {"detail": "Not Found"})
            return
        await self.app(scope, receive, send)


#: The shortest API key `serve` accepts (characters): a guessable key protects nothing.
MIN_API_KEY_LENGTH = 16


def check_api_key(key: str) -> str:
    """An API key given to `serve`, unchanged (`ValueError`: under 16 characters, or not printable ASCII)."""
    if len(key) < MIN_API_KEY_LENGTH:
        msg = f"The API key must be at least {MIN_API_KEY_LENGTH} characters long (e.g. `openssl rand -hex 24`)."
        raise ValueError(msg)
    if not all(char.isascii() and char.isprintable() and char != " " for char in key):
        msg = "The API key must be printable ASCII without spaces (it travels in an HTTP header)."
        raise ValueError(msg)
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


class APIKeyBackend(AuthenticationBackend):
    """
    Starlette authentication backend: a request must carry the API key as a bearer token.

    HTTP and WebSocket requests must carry `Authorization: Bearer <api_key>` (parsed by FastAPI's `HTTPBearer`,
    compared in constant time; one such header only), else `AuthenticationError`; CORS preflights, `open_paths` and
    paths under `open_prefixes` pass without it.
    """

    def __init__(self, api_key: str, open_paths: Iterable[str] = (), open_prefixes: Iterable[str] = ()) -> None:
        self.expected = api_key.encode("ascii")
        self.open_paths = frozenset(open_paths)
        self.open_prefixes = tuple(open_prefixes)
        self.bearer = HTTPBearer(auto_error=False)

    async def authenticate(self, conn: HTTPConnection) -> tuple[AuthCredentials, SimpleUser] | None:
        """The credentials of a request with the key; `None` for one that needs none (`AuthenticationError`: else)."""
        path = conn.scope.get("path", "")
        if conn.scope.get("method") == "OPTIONS" or path in self.open_paths or path.startswith(self.open_prefixes):
            return None
        credentials = await self.bearer(conn) if len(conn.headers.getlist("authorization")) == 1 else None
        if credentials is None or not hmac.compare_digest(credentials.credentials.encode("latin-1"), self.expected):
            raise AuthenticationError(UNAUTHORIZED_MESSAGE)
        return AuthCredentials(["authenticated"]), SimpleUser("api-key")


def _unauthorized(_conn: HTTPConnection, exc: AuthenticationError) -> JSONResponse:
    return JSONResponse({"detail": str(exc)}, status_code=401, headers={"WWW-Authenticate": UNAUTHORIZED_CHALLENGE})


def bearer_auth(
    app: ASGIApp, api_key: str, open_paths: Iterable[str] = (), open_prefixes: Iterable[str] = ()
) -> AuthenticationMiddleware:
    """
    `app` behind Starlette's `AuthenticationMiddleware` with an `APIKeyBackend`.

    A request without the key gets a 401 (JSON `detail` naming the header, `WWW-Authenticate: Bearer`); a WebSocket
    is closed before it opens.
    """
    backend = APIKeyBackend(api_key, open_paths, open_prefixes)
    return AuthenticationMiddleware(app, backend=backend, on_error=_unauthorized)
