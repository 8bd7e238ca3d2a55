# SPDX-License-Identifier: Apache-2.0
"""
Running what `haystack-agentic serve` serves: the HTTP app (`serving.app`) and the MCP app (`serving.mcp_server`),
in one process (both uvicorn servers on one event loop, sharing hayhooks' pipeline registry) or, with several
HTTP workers, as uvicorn workers building the app from its factory plus one MCP process beside them.

Both run on uvloop when it is installed (the `serve` extra installs it), as uvicorn's own `loop="auto"` does for its
workers and for the MCP process; asyncio's default loop otherwise. uvicorn only picks the loop when it creates it,
so the one-process path, which runs its two servers on a loop of its own, makes the same choice itself.

The caller sets hayhooks' settings (`HAYHOOKS_*`) and ours (`ServeSecurity.to_env`) in the environment first (`serve`:
`set_serving_environment`): worker processes inherit them.
"""

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: The HTTP app factory uvicorn workers call.
APP_FACTORY = "haystack_agentic.serving.app:create_app"


def run_servers(host: str, port: int, mcp_port: int, workers: int, directory: Path) -> None:
    """
    Serve until interrupted (SIGINT / SIGTERM).

    :param host: Address to bind.
    :param port: HTTP port.
    :param mcp_port: MCP port, or 0 for no MCP server.
    :param workers: HTTP worker processes (1: everything in this process).
    :param directory: hayhooks' pipelines directory (for the MCP process).
    """
    if workers > 1:
        import uvicorn

        mcp = start_mcp_process(host, mcp_port, directory) if mcp_port else None
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
    """
    The event loop to serve on: uvloop's when it is installed (as uvicorn's `loop="auto"` chooses), else `None`
    (asyncio's default).

    :returns: A loop factory for `asyncio.Runner`, or `None`.
    """
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def start_mcp_process(host: str, port: int, directory: Path) -> subprocess.Popen:
    """Start the MCP server as its own process for the serving directory (used with several HTTP workers)."""
    command = [sys.executable, "-m", "haystack_agentic.serving.mcp_server", "--host", host, "--port", str(port),
               "--pipelines-dir", str(directory)]  # fmt: skip
    return subprocess.Popen(command, env=os.environ.copy())


def _uvicorn_server(app: Any, host: str, port: int) -> Any:
    """A uvicorn server that leaves signal handling to `_serve_one_process` (two servers share one loop)."""
    import uvicorn

    class Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self):  # noqa: D102 - handled once for both servers
            yield

    return Server(uvicorn.Config(app, host=host, port=port, log_config=None, timeout_graceful_shutdown=5))


async def _serve_one_process(host: str, port: int, mcp_port: int) -> None:
    from haystack_agentic.serving.app import create_app

    servers = [_uvicorn_server(create_app(), host, port)]
    if mcp_port:
        from haystack_agentic.serving.mcp_server import create_mcp_app

        servers.append(_uvicorn_server(create_mcp_app(), host, mcp_port))

    def stop() -> None:
        for server in servers:
            server.should_exit = True

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop)
    await asyncio.gather(*(server.serve() for server in servers))
