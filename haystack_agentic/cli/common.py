# SPDX-License-Identifier: Apache-2.0
"""What every `haystack-agentic` command shares (imports nothing heavy, so `--help` stays fast)."""

import argparse
import contextlib
import os
from collections.abc import Callable, Iterator
from typing import Any

from haystack_agentic.settings import ENV_MILVUS_URI, ENV_MODEL, default_milvus_uri, default_weaviate_url


class CLIError(Exception):
    """An error the CLI reports as one line (exit code 2), with what to change."""


def add_command(subparsers: Any, name: str, summary: str, description: str, examples: str) -> argparse.ArgumentParser:
    """Add a sub-command whose `--help` shows its description and examples as written (line breaks kept)."""
    return subparsers.add_parser(
        name,
        help=summary,
        description=description,
        epilog=examples,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def open_backend_store(
    backend: str, uri: str | None, collection: str | None, must_exist: bool = False
) -> tuple[Any, str]:
    """
    Open the `milvus` or `weaviate` document store the CLI options name; returns `(store, address)`.

    Returns `(store, address)`: the `milvus` / `weaviate` store at `uri` (default: from `settings`), collection
    `collection` (default: the packaged pipelines'); `must_exist` refuses a Milvus Lite path with no database yet.

    :raises CLIError: If the integration is missing or the store cannot be opened.
    """
    from haystack_agentic.indexing.document_stores import open_document_store
    from haystack_agentic.indexing.store_faults import check_milvus_lite_uri

    address = uri or str(default_milvus_uri() if backend == "milvus" else default_weaviate_url())
    try:
        if backend == "milvus" and must_exist:
            check_milvus_lite_uri(address, must_exist=True)
        return open_document_store(backend, address, collection), address
    except ImportError as exc:
        msg = f"{exc}: install it with `pip install 'haystack-agentic[{backend}]'`."
        raise CLIError(msg) from exc
    except ValueError as exc:
        raise CLIError(str(exc)) from exc


#: Seconds one LLM call may take with `--gguf` unless `--timeout` is given: a small model on this project's 2-core
#: test machine took over the servers' usual 60 s for one call under load (0.5B at ~2 tokens/s), and the in-process
#: server has no other client to wait for.
GGUF_TIMEOUT = 300.0


def add_backend_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the document store options (`--backend`, `--uri`, and for `index`/`collections` `--store-collection`)."""
    parser.add_argument(
        "--backend",
        choices=["memory", "milvus", "weaviate"],
        default="memory",
        help="Document store: memory (JSON file, BM25), milvus (Milvus Lite file or server, hybrid), "
        "weaviate (server).",
    )
    parser.add_argument(
        "--uri",
        help=f"Milvus Lite file or server URI (default: ${ENV_MILVUS_URI} or milvus.db in the cache); Weaviate URL.",
    )
    if parser.prog.endswith(("index", "collections")):
        parser.add_argument(
            "--store-collection",
            help="The Milvus collection / Weaviate class to use (default: the packaged pipelines'). Not a collection "
            "of documents (--collection): one store holds many of those.",
        )


def hide_model_progress_bars() -> None:
    """Turn off transformers' and huggingface_hub's progress bars while loading weights (ours show the stage)."""
    try:
        from huggingface_hub.utils import disable_progress_bars
        from transformers.utils import logging as transformers_logging
    except ImportError:
        return
    disable_progress_bars()
    transformers_logging.disable_progress_bar()


def add_llm_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the LLM options `ask`, `chat` and `serve` share: which LLM, its model and server, every role's limits."""
    parser.add_argument(
        "--llm", choices=["auto", "openai", "embedded"], default="auto", help="Which LLM drives the loop."
    )
    parser.add_argument(
        "--mode", choices=["tools", "json"], help="Router mode for --llm openai (default: tools; json with --gguf)."
    )
    parser.add_argument("--model", help=f"Model name for --llm openai (default: ${ENV_MODEL} or the YAML's).")
    parser.add_argument("--base-url", help="OpenAI-compatible base URL (Ollama, vLLM, llama.cpp); or OPENAI_BASE_URL.")
    parser.add_argument(
        "--gguf",
        metavar="PATH",
        help="A local GGUF model file (or a name from `install-model --model`): llama.cpp runs it in this process "
        "(the `llamacpp` extra) for the run, in json mode unless --mode tools (refused when its chat template has no "
        f"tools), with --timeout {GGUF_TIMEOUT:.0f} unless given.",
    )
    parser.add_argument("--max-iterations", type=int, help="Override the loop's max_iterations.")
    parser.add_argument(
        "--timeout",
        type=float,
        help="Seconds one LLM call may take (default: the pipeline's; 60 s for a server). The embedded LLM cannot be "
        "stopped: a call over the limit fails the run, and the command exits once that call ends.",
    )
    parser.add_argument(
        "--max-tokens", type=int, help="Most tokens one LLM reply may have, every role (default: sized per role)."
    )


def add_loop_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the options `ask` and `chat` share: the LLM and its limits, the pipeline, the store, the filters."""
    add_llm_arguments(parser)
    parser.add_argument("--pipeline", help="A pipeline YAML to run instead of the packaged one.")
    parser.add_argument("--store", help="Store file to load (default: $HAYSTACK_AGENTIC_STORE or the user cache).")
    parser.add_argument("--filters", help="Haystack metadata filters as JSON, applied to every search.")
    parser.add_argument(
        "--collection", action="append", help="Search only this collection (repeatable; all: every one)."
    )
    parser.add_argument(
        "--on-insufficient-evidence",
        choices=["give_up", "answer_with_warning"],
        help="When the documents found do not support an answer: give up saying so (the packaged default), or "
        "answer with a warning.",
    )
    parser.add_argument("--quiet", action="store_true", help="No progress output.")


def telemetry_off_unless_asked() -> None:
    """
    Turn Haystack's telemetry off unless the user set `HAYSTACK_TELEMETRY_ENABLED`.

    It is turned off in this process and the processes it starts, unless the user set `HAYSTACK_TELEMETRY_ENABLED`
    (`True` turns it on). Haystack reads the variable once, when it is first imported: call this before anything imports
    `haystack`.
    """
    os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")


@contextlib.contextmanager
def local_gguf(args: argparse.Namespace, say: Callable[[str], None]) -> Iterator[argparse.Namespace]:
    """
    Serve the `--gguf` file with llama.cpp while the block runs and point `args` at it.

    With `--gguf`: llama.cpp serves the file in this process while the block runs (stopped after it) and the block
    gets a copy of `args` pointing at it: `llm` openai, its `base_url` and `model`, `mode` (`--mode`, default json:
    with Qwen2.5-Coder-1.5B on 40 HotpotQA questions json mode scored F1 0.549 and tools mode 0.220,
    docs/benchmarks.md), `context_tokens` (its context size from `/props`) and `timeout` (`--timeout`, default
    `GGUF_TIMEOUT`). Without: `args` unchanged.

    :raises CLIError: If `--gguf` comes with `--llm embedded` or `--base-url`, `--mode tools` meets a template
        without tools, or the file is missing, not a GGUF, cannot be loaded, or xllamacpp is not installed.
    """
    if not args.gguf:
        yield args
        return
    if args.llm == "embedded" or args.base_url:
        given = "--base-url" if args.base_url else "--llm embedded"
        msg = f"--gguf runs its own llama.cpp server: drop {given}."
        raise CLIError(msg)
    from haystack_agentic.llm.gguf_models import resolve_gguf
    from haystack_agentic.llm.llamacpp_server import LlamaCppServer

    try:
        server = LlamaCppServer(resolve_gguf(args.gguf))
        say(f"Starting llama.cpp on {server.model_path} (in this process)...")
        server.start()
    except (FileNotFoundError, ValueError, ImportError, RuntimeError, TimeoutError) as exc:
        raise CLIError(str(exc)) from exc
    try:
        info = server.info()
        if args.mode == "tools" and info.supports_tools is False:
            msg = f"The chat template of {server.model_path} cannot call tools: use --mode json."
            raise CLIError(msg)
        mode = args.mode or "json"
        yield argparse.Namespace(
            **{
                **vars(args),
                "llm": "openai",
                "base_url": server.base_url,
                "model": server.model_name,
                "mode": mode,
                "context_tokens": info.n_ctx,
                "timeout": GGUF_TIMEOUT if args.timeout is None else args.timeout,
            }
        )
    finally:
        server.stop()
