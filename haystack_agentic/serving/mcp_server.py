# SPDX-License-Identifier: Apache-2.0
"""The MCP server `haystack-agentic serve` runs beside the HTTP app: hayhooks' MCP server (a tool per pipeline)
with the HTTP app's key and `Host` checks, deploy tools hidden unless allowed, structured content in loop results."""

import argparse
import json
import sys
from typing import Any

from haystack import logging
from starlette.requests import ClientDisconnect, Request

from haystack_agentic.serving.security import BearerAuth, BodyLimit, ServeSecurity, host_check, send_json

logger = logging.getLogger(__name__)

#: hayhooks' MCP tools that upload and run code, or remove pipelines.
DEPLOY_TOOLS = frozenset({"deploy_pipeline", "undeploy_pipeline"})
#: The MCP app's health check (hayhooks' `{"status": "ok"}`), answered without a key.
MCP_STATUS_PATH = "/status"


def create_mcp_app(security: ServeSecurity | None = None) -> Any:
    """The MCP server for the pipelines in hayhooks' registry, as an ASGI app (`security` default: the environment)."""
    from hayhooks.server.utils.mcp_utils import create_mcp_server, create_starlette_app

    security = security or ServeSecurity.from_env()
    server = create_mcp_server()
    adapt_tools(server, security.allow_deploy)
    app = TextBodyGuard(create_starlette_app(server))
    if security.api_key:
        app = BearerAuth(app, api_key=security.api_key, open_paths={MCP_STATUS_PATH})
    return host_check(BodyLimit(app, security.max_body_bytes), security.accepted_hosts())


def adapt_tools(server: Any, allow_deploy: bool) -> None:
    """
    hayhooks' MCP `server` with `structuredContent` in loop results (`structured_result`) and, unless `allow_deploy`,
    without the deploy tools (not listed; a call answers "Unknown tool"; a failed call's text also loses hayhooks'
    "General unhandled error" prefix).
    """
    from mcp import types

    list_tools = server.request_handlers[types.ListToolsRequest]
    call_tool = server.request_handlers[types.CallToolRequest]

    async def list_allowed_tools(request: Any) -> Any:
        result = await list_tools(request)
        tools = [tool for tool in result.root.tools if tool.name not in DEPLOY_TOOLS]
        return types.ServerResult(types.ListToolsResult(tools=tools))

    async def call_allowed_tool(request: Any) -> Any:
        name = request.params.name
        if name in DEPLOY_TOOLS and not allow_deploy:
            logger.warning("Refused MCP call to {tool}: runtime deployment is off", tool=name)
            content = [types.TextContent(type="text", text=f"Unknown tool: {name}")]
            return types.ServerResult(types.CallToolResult(content=content, isError=True))
        result = await call_tool(request)
        root = result.root
        if getattr(root, "isError", False) and not allow_deploy:  # hayhooks frames every failure as an internal one
            prefix = f"General unhandled error in call_tool for tool '{name}': "
            for item in root.content:
                if isinstance(item, types.TextContent) and item.text.startswith(prefix):
                    item.text = item.text[len(prefix):]
        if isinstance(root, types.CallToolResult) and not root.isError and root.structuredContent is None:
            root.structuredContent = structured_result(root.content)
        return result

    if not allow_deploy:
        server.request_handlers[types.ListToolsRequest] = list_allowed_tools
    server.request_handlers[types.CallToolRequest] = call_allowed_tool


def structured_result(content: list[Any]) -> dict[str, Any] | None:
    """`{"answer", "terminated_by", "citations"}` of a loop tool's result content (one JSON text), else `None`."""
    texts = [block.text for block in content if getattr(block, "type", None) == "text"]
    if len(texts) != 1:
        return None
    try:
        payload = json.loads(texts[0])
    except ValueError:
        return None
    result = payload.get("result") if isinstance(payload, dict) else None
    if not isinstance(result, dict) or "terminated_by" not in result:
        return None
    return {
        "answer": result.get("answer"),
        "terminated_by": result["terminated_by"],
        "citations": result.get("citations") or [],
    }


class TextBodyGuard:
    """ASGI middleware: a POST body that is not JSON text or nests too deeply gets a 400 parse error, not a 500."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
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

        async def replay() -> Any:
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
    from hayhooks.server.utils.deploy_utils import deploy_pipelines
    from hayhooks.settings import settings

    settings.pipelines_dir = args.pipelines_dir
    deploy_pipelines()
    app = create_mcp_app()
    intercept_stdlib_logging(
        settings.intercepted_loggers, access_log_excluded_path_prefixes=settings.access_log_excluded_path_prefixes
    )
    uvicorn.run(app, host=args.host, port=args.port, log_config=None, timeout_graceful_shutdown=5)
    return 0


if __name__ == "__main__":
    sys.exit(main())
