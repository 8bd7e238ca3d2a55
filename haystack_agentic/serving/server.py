# SPDX-License-Identifier: Apache-2.0
"""
Running the HTTP and MCP apps of `haystack-agentic serve`.

In one process (two uvicorn servers, one event loop) or, with several HTTP workers, uvicorn workers plus one MCP
process; they read the environment the caller set.
"""

import asyncio
import contextlib
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

#: The HTTP app factory uvicorn workers call.
APP_FACTORY = "haystack_agentic.serving.app:create_app"


def run_servers(host: str, port: int, mcp_port: int, workers: int, directory: Path) -> None:
    """
    Serve the HTTP and MCP apps until SIGINT / SIGTERM.

    HTTP on `port` with `workers` processes (1: all in this process), MCP on `mcp_port` (0: none) for hayhooks'
    pipelines `directory`.
    """
    if workers > 1:
        import uvicorn

        command = [
            sys.executable,
            "-m",
            "haystack_agentic.serving.mcp_server",
            "--host",
            host,
            "--port",
            str(mcp_port),
            "--pipelines-dir",
            str(directory),
        ]
        mcp = subprocess.Popen(command) if mcp_port else None  # noqa: S603 - our own module, by this Python
        try:
            uvicorn.run(APP_FACTORY, host=host, port=port, workers=workers, factory=True, log_config=None)
        finally:
            if mcp is not None:
                mcp.terminate()
                try:
                    mcp.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    mcp.kill()
        return
    with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
        runner.run(_serve_one_process(host, port, mcp_port))


def event_loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop factory for `asyncio.Runner` when it is installed (as uvicorn's `loop="auto"`), else `None`."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def _uvicorn_server(app: Any, host: str, port: int) -> Any:
    """A uvicorn server that leaves signal handling to `_serve_one_process` (two servers share one loop)."""
    import uvicorn

    class Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

    return Server(uvicorn.Config(app, host=host, port=port, log_config=None, timeout_graceful_shutdown=5))


async def _serve_one_process(host: str, port: int, mcp_port: int) -> None:
    from haystack_agentic.serving.app import create_app

    app = create_app()
    servers = [_uvicorn_server(app, host, port)]
    if mcp_port:
        from haystack_agentic.serving.mcp_server import create_mcp_app

        # One registry: the MCP tools run the HTTP app's pipelines (fixed, or hayhooks' deployed ones).
        servers.append(_uvicorn_server(create_mcp_app(registry=app.state.pipeline_registry), host, mcp_port))

    def stop() -> None:
        for server in servers:
            server.should_exit = True

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop)
    await asyncio.gather(*(server.serve() for server in servers))
