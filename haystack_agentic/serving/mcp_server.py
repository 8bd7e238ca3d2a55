# SPDX-License-Identifier: Apache-2.0
"""
The MCP server `haystack-agentic serve` runs beside the HTTP app.

It is hayhooks' MCP server (a tool per pipeline, from `create_mcp_server`) with the HTTP app's key, body-limit and
`Host` checks. Without runtime deployment it serves
hayhooks' fixed registry (durable mode): its deploy tools are neither listed nor run.
"""

import argparse
import json
import sys
from typing import Any

from haystack import logging
from starlette.requests import ClientDisconnect, Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from haystack_agentic.serving.security import BodyLimit, ServeSecurity, bearer_auth, host_check, send_json

logger = logging.getLogger(__name__)

#: The MCP app's health check (hayhooks' `{"status": "ok"}`), answered without a key.
MCP_STATUS_PATH = "/status"


def create_mcp_app(security: ServeSecurity | None = None, registry: Any = None) -> Any:
    """
    hayhooks' MCP server for `registry` as an ASGI app behind `security` (default: the environment's).

    :param registry: The pipelines to serve: the HTTP app's `app.state.pipeline_registry` when both run in one
        process; `None`: hayhooks' own registry (the deployed pipelines, with the deploy tools).
    """
    from hayhooks.server.utils.mcp_utils import create_mcp_server, create_starlette_app

    security = security or ServeSecurity.from_env()
    app: ASGIApp = TextBodyGuard(create_starlette_app(create_mcp_server(registry=registry)))
    if security.api_key:
        app = bearer_auth(app, security.api_key, open_paths={MCP_STATUS_PATH})
    return host_check(BodyLimit(app, security.max_body_bytes), security.accepted_hosts())


class TextBodyGuard:
    """ASGI middleware: a POST body that is not JSON text or nests too deeply gets a 400 parse error, not a 500."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on to `app` (a POST with its body read once and replayed), or answer it with the 400."""
        if scope["type"] != "http" or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        try:
            body = await Request(scope, receive).body()
        except ClientDisconnect:
            return
        problem = _parse_problem(body)
        if problem is not None:
            error = {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": problem}}
            await send_json(send, 400, error)
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)


NOT_TEXT_MESSAGE = "Parse error: the body is not text (send JSON-RPC as UTF-8 JSON)."
TOO_DEEP_MESSAGE = "Parse error: the JSON is nested too deeply to parse (flatten the arguments)."


def _parse_problem(body: bytes) -> str | None:
    """Why the SDK would fail on `body` with a 500 (not text; nesting past Python's recursion limit), or `None`."""
    try:
        text = body.decode(json.detect_encoding(body))
    except UnicodeDecodeError:
        return NOT_TEXT_MESSAGE
    try:
        json.loads(text)
    except RecursionError:
        return TOO_DEEP_MESSAGE
    except ValueError:  # malformed JSON: the SDK answers it with its own 400
        pass
    return None


def main(argv: list[str] | None = None) -> int:
    """Run the MCP server on its own (`serve --workers N`): `--host`, `--port`, `--pipelines-dir`."""
    parser = argparse.ArgumentParser(prog="python -m haystack_agentic.serving.mcp_server")
    parser.add_argument("--host", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--pipelines-dir", required=True)
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)

    import uvicorn
    from hayhooks.server.logger import intercept_stdlib_logging
    from hayhooks.server.pipelines.loader import load_pipeline_registry
    from hayhooks.server.utils.deploy_utils import deploy_pipelines
    from hayhooks.settings import settings

    security = ServeSecurity.from_env()
    settings.pipelines_dir = args.pipelines_dir
    settings.durable_mode = not security.allow_deploy  # hayhooks' fixed pipeline set: no runtime deployment
    registry = None
    if settings.durable_mode:
        registry = load_pipeline_registry(args.pipelines_dir)
    else:
        deploy_pipelines()
    app = create_mcp_app(security, registry)
    intercept_stdlib_logging(
        settings.intercepted_loggers, access_log_excluded_path_prefixes=settings.access_log_excluded_path_prefixes
    )
    uvicorn.run(app, host=args.host, port=args.port, log_config=None, timeout_graceful_shutdown=5)
    return 0


if __name__ == "__main__":
    sys.exit(main())
