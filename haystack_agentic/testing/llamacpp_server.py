# SPDX-License-Identifier: Apache-2.0
"""A real llama.cpp server (`xllamacpp`, OpenAI-compatible) on 127.0.0.1 running the packaged SmolLM2-135M GGUF, for
tests and benchmarks (`with LlamaCppServer() as server: server.base_url`). Needs the `llamacpp` extra."""

import json
import socket
import time
import urllib.request
from typing import Any

#: Seconds a server may take to load its model and answer `/health` (SmolLM2-135M: ~0.5 s here).
START_DEADLINE = 60.0
#: The model name the server answers to.
MODEL_ALIAS = "smollm2"


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class LlamaCppServer:
    """llama.cpp's server in this process (`xllamacpp.Server`, Jinja chat template). `n_ctx`: context size in tokens;
    `threads`: CPU threads. `FileNotFoundError` when the packaged GGUF is not installed."""

    def __init__(self, n_ctx: int = 4096, threads: int = 2) -> None:
        from haystack_agentic.components.generators._smollm2_gguf import _locate_default_gguf  # noqa: PLC0415

        self.model_path = _locate_default_gguf()
        if self.model_path is None:
            raise FileNotFoundError("The packaged SmolLM2 GGUF is not installed (run `haystack-agentic install-model`).")
        self.n_ctx, self.threads = n_ctx, threads
        self.port = 0
        self._server: Any = None

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible base URL (`http://127.0.0.1:<port>/v1`)."""
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> "LlamaCppServer":
        """Start the server and poll `/health` until it answers; `ImportError` without xllamacpp, `TimeoutError`."""
        try:
            import xllamacpp  # noqa: PLC0415
        except ImportError as exc:
            raise ImportError('A llama.cpp server needs xllamacpp: pip install "haystack-agentic[llamacpp]"') from exc
        params = xllamacpp.CommonParams()
        params.model.path = str(self.model_path)
        params.hostnames = ["127.0.0.1"]
        self.port = params.port = free_port()
        params.use_jinja = True
        params.n_ctx = self.n_ctx
        params.n_parallel = 1
        params.cpuparams.n_threads = self.threads
        params.cpuparams_batch.n_threads = self.threads
        params.model_alias = {MODEL_ALIAS}
        params.endpoint_props = True
        self._server = xllamacpp.Server(params)
        deadline = time.monotonic() + START_DEADLINE
        while not self.healthy():
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError(f"llama.cpp server on port {self.port} not healthy after {START_DEADLINE} s")
            time.sleep(0.05)  # polling interval of the health check
        return self

    def healthy(self) -> bool:
        """Whether `/health` answers `ok`."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=1.0) as response:  # noqa: S310
                return json.loads(response.read()).get("status") == "ok"
        except (OSError, ValueError):  # URLError is an OSError
            return False

    def stop(self) -> None:
        """Stop the server (its main loop exits when the handle is released)."""
        self._server = None

    def __enter__(self) -> "LlamaCppServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
