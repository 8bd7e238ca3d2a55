# SPDX-License-Identifier: Apache-2.0
"""
llama.cpp's OpenAI-compatible server in this process, for a local GGUF file.

llama.cpp's OpenAI-compatible server in this process (`xllamacpp`, the `llamacpp` extra) for a local GGUF file, on
127.0.0.1 and a free port: what lets a loop pipeline run on a user's GGUF with no separate server. Nothing starts at
import or construction; `start` (or `with`) starts it, `stop` (or leaving the `with` block) stops it.
"""

import json
import os
import socket
import time
import urllib.request
from pathlib import Path
from typing import Any

from haystack import logging

from haystack_agentic.llm.server_info import ServerInfo, read_server_info

logger = logging.getLogger(__name__)

#: Seconds a server may take to load its model and answer `/health` (SmolLM2-135M: ~0.5 s here; a 1.5B Q4 model a few
#: seconds; a 7B model from a slow disk can take a minute).
START_DEADLINE = 120.0
#: Seconds between two `/health` polls while the model loads.
HEALTH_POLL_INTERVAL = 0.05
#: The first bytes of every GGUF file.
GGUF_MAGIC = b"GGUF"
#: What to install when xllamacpp is missing.
INSTALL_HINT = 'A llama.cpp server needs xllamacpp: pip install "haystack-agentic[llamacpp]"'


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def check_gguf(model_path: Path | str) -> Path:
    """
    The path of a readable GGUF file (checked by its first four bytes, `GGUF`).

    :raises FileNotFoundError: If there is no file at `model_path`.
    :raises ValueError: If the file is not a GGUF model.
    """
    path = Path(model_path).expanduser()
    if not path.is_file():
        msg = f"No GGUF file at {path}: check the path."
        raise FileNotFoundError(msg)
    with open(path, "rb") as file:
        magic = file.read(len(GGUF_MAGIC))
    if magic != GGUF_MAGIC:
        msg = f"{path} is not a GGUF model file (it does not start with {GGUF_MAGIC!r})."
        raise ValueError(msg)
    return path


class LlamaCppServer:
    """
    llama.cpp's server for one GGUF file in this process, on 127.0.0.1.

    llama.cpp's server for one GGUF file in this process, on 127.0.0.1 (Jinja chat templates on, so a template with
    tools gets native tool calls). Point any OpenAI-compatible generator at `base_url`.

    ### Usage example
    ```python
    from haystack import Document

    from haystack_agentic.llm.llamacpp_server import LlamaCppServer
    from haystack_agentic.loop_loading import retriever_store
    from haystack_agentic.pipelines.loop_builder import LoopOptions, build_loop

    with LlamaCppServer("qwen2.5-coder-1.5b-instruct-q4_k_m.gguf") as server:
        info = server.info()  # info.supports_tools: whether mode="tools" can work with this chat template
        options = LoopOptions(llm="openai", base_url=server.base_url, model=server.model_name, mode="json",
                              context_tokens=info.n_ctx, timeout=300)  # s per LLM call: a CPU can be slow
        pipeline = build_loop(options)  # its in-memory store starts empty: fill it (or fill_in_memory_store)
        retriever_store(pipeline).write_documents([
            Document(content="Big Stone Gap is a 2014 film written and directed by Adriana Trigiani.",
                     meta={"title": "Big Stone Gap (film)"}),
            Document(content="Adriana Trigiani is an author and film director based in Greenwich Village.",
                     meta={"title": "Adriana Trigiani"}),
        ])
        result = pipeline.run({"controller": {"query": "Who directed Big Stone Gap?"}})["result"]
    ```
    """

    def __init__(self, model_path: Path | str, n_ctx: int = 8192, threads: int | None = None) -> None:
        """
        Create a LlamaCppServer for a GGUF file; nothing starts until `start`.

        :param model_path: The GGUF file.
        :param n_ctx: Context size in tokens (prompt and reply), default 8192.
        :param threads: CPU threads for generation and prompt processing (default: the CPUs of this machine).
        :raises FileNotFoundError: If there is no file at `model_path`.
        :raises ValueError: If it is not a GGUF file, or `n_ctx` / `threads` is below 1.
        """
        if n_ctx < 1 or (threads is not None and threads < 1):
            msg = f"n_ctx and threads must be at least 1, got n_ctx={n_ctx}, threads={threads}"
            raise ValueError(msg)
        self.model_path = check_gguf(model_path)
        self.n_ctx = n_ctx
        self.threads = threads
        self.port = 0
        self._server: Any = None

    @property
    def model_name(self) -> str:
        """The model name the server answers to: the file name without `.gguf`."""
        return self.model_path.stem

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible base URL (`http://127.0.0.1:<port>/v1`)."""
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> "LlamaCppServer":
        """
        Load the model and serve it; returns once `/health` answers.

        :raises ImportError: If xllamacpp is not installed (the `llamacpp` extra).
        :raises RuntimeError: If llama.cpp cannot load the file.
        :raises TimeoutError: If the server is not healthy within `START_DEADLINE` seconds.
        """
        if self._server is not None:
            return self
        try:
            import xllamacpp  # noqa: PLC0415 - the extra, only when a server starts
        except ImportError as exc:
            raise ImportError(INSTALL_HINT) from exc
        threads = self.threads or os.cpu_count() or 1
        params = xllamacpp.CommonParams()
        params.model.path = str(self.model_path)
        params.hostnames = ["127.0.0.1"]
        self.port = params.port = free_port()
        params.use_jinja = True
        params.n_ctx = self.n_ctx
        params.n_parallel = 1
        params.cpuparams.n_threads = threads
        params.cpuparams_batch.n_threads = threads
        params.model_alias = {self.model_name}
        params.endpoint_props = True
        logger.info("Starting llama.cpp on {path} at {url}", path=str(self.model_path), url=self.base_url)
        try:
            self._server = xllamacpp.Server(params)
        except Exception as exc:
            msg = f"llama.cpp could not load {self.model_path}: {exc}"
            raise RuntimeError(msg) from exc
        deadline = time.monotonic() + START_DEADLINE
        while not self.healthy():
            if time.monotonic() > deadline:
                self.stop()
                msg = f"llama.cpp server on port {self.port} not healthy after {START_DEADLINE} s"
                raise TimeoutError(msg)
            time.sleep(HEALTH_POLL_INTERVAL)
        return self

    def healthy(self) -> bool:
        """Whether the server is started and `/health` answers `ok`."""
        if self._server is None:
            return False
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=1.0) as response:
                return json.loads(response.read()).get("status") == "ok"
        except (OSError, ValueError):  # URLError is an OSError
            return False

    def info(self) -> ServerInfo:
        """What the running server's `/props` reports: whether the model's chat template has tools, its context size."""
        return read_server_info(self.base_url)

    def stop(self) -> None:
        """Stop the server (its main loop exits when the handle is released); stopping twice is harmless."""
        self._server = None

    def __enter__(self) -> "LlamaCppServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
