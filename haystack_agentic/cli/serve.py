# SPDX-License-Identifier: Apache-2.0
"""
`haystack-agentic serve`: serve the agentic loop with hayhooks.

It serves REST, OpenAI-compatible chat and MCP. It writes one hayhooks pipeline
directory per served pipeline (`<name>/pipeline_wrapper.py`, an
`AgenticLoopWrapper` pointing at the YAML) and runs the hayhooks app:
`POST /<name>/run`, `/v1/chat/completions` (model `<name>`) and, on --mcp-port,
an MCP server (`/mcp`, `/sse`) listing each pipeline as a tool. YAML files
already in --pipelines-dir are deployed too, by hayhooks: trust the modules they
name in HAYSTACK_DESERIALIZATION_ALLOWLIST (`serve` trusts nothing for them).

Defaults: bound to 127.0.0.1, port 1416 (MCP on the next port), the packaged
pipeline chosen like `ask` does, served as `agentic_rag`.

Limits: request bodies over --max-body-bytes (1 MiB) get a 413, chat requests
of more than --max-messages (1,000) messages a 422.

Safe by default: runtime deployment (routes and MCP tools that upload and run
code) is off unless `--allow-deploy`, which needs an API key; `--api-key` /
`$HAYSTACK_AGENTIC_API_KEY` makes every request but `GET /health` carry
`Authorization: Bearer <key>`. Serving on a non-loopback address without a key
prints a warning. No CORS headers unless --cors-origin lists origins; a Host
header other than the bound address, localhost or an --allowed-host gets a
400 (DNS rebinding). Haystack's telemetry is off
(HAYSTACK_TELEMETRY_ENABLED=True turns it on).
"""

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from haystack_agentic.settings import DEFAULT_SERVE_HOST, DEFAULT_SERVE_PORT, default_store_path, store_path_from_env

if TYPE_CHECKING:
    from haystack_agentic.serving.security import ServeSecurity

from haystack_agentic.cli.common import CLIError, add_command, add_llm_arguments, local_gguf, telemetry_off_unless_asked

#: The name the packaged pipeline is served under (the `model` of chat requests, the MCP tool's name).
DEFAULT_NAME = "agentic_rag"
#: The highest TCP port number
MAX_PORT = 65535
#: Names of hayhooks' own MCP tools, which a pipeline (an MCP tool too) cannot take.
RESERVED_NAMES = frozenset({"deploy_pipeline", "undeploy_pipeline", "get_pipeline_status", "get_all_pipeline_statuses"})

_WRAPPER_TEMPLATE = """\
# Written by `haystack-agentic serve`: serves {yaml} as `{name}`.
from haystack_agentic.serving import AgenticLoopWrapper


class PipelineWrapper(AgenticLoopWrapper):
    pipeline_file = {yaml!r}
    overrides = {overrides!r}
    store_file = {store!r}
"""


_EXAMPLES = """\
examples:
  # the packaged pipeline over the default store, on 127.0.0.1:1416 (MCP: 1417)
  haystack-agentic serve
  # ask it
  curl -s 127.0.0.1:1416/agentic_rag/run -H 'Content-Type: application/json' \\
      -d '{"query": "Who directed Big Stone Gap?"}'
  # a local GGUF model, run by llama.cpp in this process (the llamacpp extra)
  haystack-agentic serve --gguf model.gguf
  # your store and your own loop YAML, served as `docs`; no MCP
  haystack-agentic serve --store my_store.json --pipeline docs=my_loop.yml \\
      --mcp-port 0
"""


class ServeError(Exception):
    """A `serve` set-up problem, reported as one line with what to change."""


def add_serve_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the `serve` sub-command."""
    summary = "Serve the loop with hayhooks: REST, OpenAI-compatible chat, MCP."
    serve = add_command(subparsers, "serve", summary, __doc__, _EXAMPLES)
    serve.add_argument("--host", default=DEFAULT_SERVE_HOST, help=f"Address to bind (default {DEFAULT_SERVE_HOST}).")
    serve.add_argument(
        "--port", type=int, default=DEFAULT_SERVE_PORT, help=f"HTTP port (default {DEFAULT_SERVE_PORT})."
    )
    serve.add_argument("--mcp-port", type=int, help="MCP port (default: --port + 1; 0 disables MCP).")
    serve.add_argument(
        "--workers",
        type=int,
        default=1,
        help="HTTP worker processes (default 1). With more than one, MCP runs as one extra process beside them.",
    )
    serve.add_argument(
        "--pipeline",
        action="append",
        metavar="[NAME=]PATH",
        help="A loop pipeline YAML to serve (repeatable; default: the packaged one chosen from the environment).",
    )
    serve.add_argument("--pipelines-dir", help="Serving directory to write the wrappers into (default: a temp dir).")
    serve.add_argument("--name", default=DEFAULT_NAME, help=f"Name of the packaged pipeline (default {DEFAULT_NAME}).")
    serve.add_argument("--store", help="Saved in-memory store to load (default: $HAYSTACK_AGENTIC_STORE or cache).")
    add_llm_arguments(serve)
    serve.add_argument(
        "--api-key",
        help="Require `Authorization: Bearer KEY` on every request (REST, chat, MCP; not /health). "
        "Default: $HAYSTACK_AGENTIC_API_KEY, else no authentication.",
    )
    serve.add_argument(
        "--allow-deploy",
        action="store_true",
        help="Keep hayhooks' runtime deployment (POST /deploy_files, /deploy-yaml, /undeploy/NAME and the MCP "
        "deploy_pipeline / undeploy_pipeline tools), which runs uploaded code. Needs an API key. Default: off.",
    )
    serve.add_argument(
        "--cors-origin",
        action="append",
        metavar="ORIGIN",
        help="An origin (e.g. https://app.example.org) whose web pages may read responses (CORS); repeatable. "
        "Default: none (no CORS headers, preflights refused).",
    )
    serve.add_argument(
        "--allowed-host",
        action="append",
        metavar="NAME",
        help="A host name clients may use in the Host header, besides the bound address and localhost "
        "(e.g. the machine's DNS name when binding 0.0.0.0); repeatable. Other Host headers get a 400.",
    )
    serve.add_argument(
        "--max-body-bytes",
        type=int,
        metavar="N",
        help="Largest request body accepted, in bytes; larger ones get a 413 "
        "(default: $HAYSTACK_AGENTIC_MAX_BODY_BYTES, else 1048576, 1 MiB).",
    )
    serve.add_argument(
        "--max-messages",
        type=int,
        metavar="N",
        help="Most messages a chat request may hold; more get a 422 (default: $HAYSTACK_AGENTIC_MAX_MESSAGES, "
        "else 1000).",
    )
    return serve


def _check_name(name: str) -> str:
    if not name.replace("_", "").replace("-", "").isalnum():
        msg = f"Pipeline name {name!r} must be letters, digits, '_' or '-' (it becomes a URL path)."
        raise ServeError(msg)
    if name in RESERVED_NAMES:
        msg = f"Pipeline name {name!r} is the name of a hayhooks MCP tool: choose another one."
        raise ServeError(msg)
    return name


def _parse_pipeline_arg(value: str) -> tuple[str, Path]:
    name, sep, path = value.partition("=")
    if not sep:
        path, name = value, Path(value).stem
    _check_name(name)
    resolved = Path(path).expanduser().resolve()
    if not resolved.is_file():
        msg = f"Pipeline YAML {resolved} does not exist."
        raise ServeError(msg)
    return name, resolved


def plan(args: argparse.Namespace) -> tuple[dict[str, Path], dict[str, Any], str | None]:
    """`({name: yaml path}, overrides, store file or None)` to serve (`ServeError`: bad arguments, no key or URL)."""
    from haystack_agentic.pipelines.loop_builder import LoopOptions

    given = {
        "llm": None if args.llm == "auto" else args.llm,
        "model": args.model,
        "base_url": args.base_url,
        "max_iterations": args.max_iterations,
        "timeout": args.timeout,
        "max_tokens": args.max_tokens,
        "context_tokens": vars(args).get("context_tokens"),  # set by `--gguf` (`local_gguf`)
    }
    overrides: dict[str, Any] = {key: value for key, value in given.items() if value is not None}
    try:
        options = LoopOptions(**overrides, mode=args.mode)  # every option checked now, not in each worker
    except ValueError as exc:
        raise ServeError(str(exc)) from exc
    store = args.store or store_path_from_env()
    if args.pipeline:
        pipelines = dict(_parse_pipeline_arg(value) for value in args.pipeline)
        return pipelines, overrides, str(Path(store).resolve()) if store else None
    try:
        path = options.pipeline_path()
    except ValueError as exc:
        raise ServeError(str(exc)) from exc
    return {_check_name(args.name): path}, overrides, str(Path(store or default_store_path()).resolve())


def write_serving_dir(
    directory: Path, pipelines: dict[str, Path], overrides: dict[str, Any], store: str | None
) -> list[Path]:
    """Write `<directory>/<name>/pipeline_wrapper.py` per pipeline, with `overrides` and `store`; returns the files."""
    written = []
    for name, path in pipelines.items():
        (directory / name).mkdir(parents=True, exist_ok=True)
        written.append(directory / name / "pipeline_wrapper.py")
        text = _WRAPPER_TEMPLATE.format(name=name, yaml=str(path), overrides=overrides, store=store)
        written[-1].write_text(text, encoding="utf-8")
    return written


def _ensure_store(store: str | None) -> None:
    """Index the shipped sample into `store` when it does not exist yet (packaged pipelines only)."""
    if not store or Path(store).exists():
        return
    from rich.console import Console

    from haystack_agentic.cli.index import index_path
    from haystack_agentic.resources import sample_corpus_path

    console = Console(stderr=True)
    console.print(f"No index at {store}; indexing the shipped sample first.")
    index_path(sample_corpus_path(), Path(store), console, quiet=True)


def _check_stores(pipelines: dict[str, Path], store: str | None) -> None:
    """Open the stores to serve once, so that a fault is one line before the server starts."""
    from haystack_agentic.indexing.store_files import read_store_file
    from haystack_agentic.loop_loading import check_pipeline_stores

    try:
        if store and Path(store).exists():
            read_store_file(store)  # readable and a store; the worker builds the served store from it
        for path in pipelines.values():
            check_pipeline_stores(path)
    except ValueError as exc:  # StoreError included
        raise ServeError(str(exc)) from exc


def set_serving_environment(host: str, port: int, directory: Path, security: "ServeSecurity") -> None:
    """
    Write the serving settings into `os.environ` for hayhooks and its worker processes.

    Write what hayhooks (on first import) and `ServeSecurity.from_env` read into `os.environ`, which the worker and
    MCP processes inherit: the one place the package writes the environment.
    """
    os.environ["HAYHOOKS_HOST"] = host
    os.environ["HAYHOOKS_PORT"] = str(port)
    os.environ["HAYHOOKS_PIPELINES_DIR"] = str(directory)
    # hayhooks' default parallel start-up imports the wrapper modules from several threads, which sometimes fails
    # ("dictionary changed size during iteration") and leaves a worker without that pipeline: one at a time.
    os.environ.setdefault("HAYHOOKS_STARTUP_DEPLOY_STRATEGY", "sequential")
    telemetry_off_unless_asked()  # for the worker and MCP processes (this one's entry points call it earlier)
    security.to_env(os.environ)


def cmd_serve(args: argparse.Namespace, console: Any = None) -> int:  # noqa: ARG001 - as every command
    """
    Run `haystack-agentic serve` until interrupted; returns the exit code.

    0 after a clean shutdown, 2 on bad arguments. With `--gguf`, llama.cpp runs the file in this process (once, for
    every worker) until the server stops.
    """
    try:
        _check_ports(args)
        security = _security(args)
        with local_gguf(args, lambda line: print(line, file=sys.stderr, flush=True)) as local_args:
            return _prepare_and_serve(local_args, security)
    except (ServeError, CLIError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _prepare_and_serve(args: argparse.Namespace, security: "ServeSecurity") -> int:
    """Plan, check the stores, write the serving directory (a temporary one unless `--pipelines-dir`) and serve."""
    scratch = None
    try:
        pipelines, overrides, store = plan(args)
        explicit_store = bool(args.store or store_path_from_env())
        if store and explicit_store and not Path(store).exists():
            msg = (
                f"The store {store} does not exist: check the path, or create it with "
                f"`haystack-agentic index PATH --store {store}`."
            )
            raise ServeError(msg)
        if not args.pipeline:
            _ensure_store(store)
        _check_stores(pipelines, store)
        if not args.pipelines_dir:
            scratch = tempfile.mkdtemp(prefix="haystack-agentic-serve-")
        directory = Path(args.pipelines_dir or scratch).resolve()
        write_serving_dir(directory, pipelines, overrides, store)
        return _serve(args, pipelines, directory, security)
    finally:
        if scratch:  # the wrapper files written for this run
            shutil.rmtree(scratch, ignore_errors=True)


def _check_ports(args: argparse.Namespace) -> None:
    """Refuse (`ServeError`) a port outside 1-65535 (`--mcp-port` may be 0) or `--workers` below 1."""
    if not 1 <= args.port <= MAX_PORT:
        msg = f"--port must be between 1 and 65535, got {args.port}."
        raise ServeError(msg)
    if args.mcp_port is not None and not 0 <= args.mcp_port <= MAX_PORT:
        msg = f"--mcp-port must be between 0 (no MCP) and 65535, got {args.mcp_port}."
        raise ServeError(msg)
    if args.mcp_port is None and args.port == MAX_PORT:
        msg = "--port 65535 leaves no port for MCP (--port + 1): pass --mcp-port PORT, or 0 for no MCP."
        raise ServeError(msg)
    if args.workers < 1:
        msg = "--workers must be at least 1."
        raise ServeError(msg)


def _security(args: argparse.Namespace) -> "ServeSecurity":
    """What to expose (`ServeError`: a weak key, `--allow-deploy` without a key, a malformed origin or host)."""
    from haystack_agentic.serving.security import (
        ENV_API_KEY,
        ServeSecurity,
        check_api_key,
        check_host_name,
        check_limit,
        check_origin,
    )

    key = args.api_key or os.environ.get(ENV_API_KEY) or None
    if args.allow_deploy and key is None:
        msg = (
            "--allow-deploy lets clients upload and run Python code in the server: it needs an API key. "
            f"Pass --api-key KEY or set ${ENV_API_KEY} (e.g. `openssl rand -hex 24`)."
        )
        raise ServeError(msg)
    try:
        if key is not None:
            check_api_key(key)
        origins = tuple(check_origin(origin) for origin in args.cors_origin or ())
        hosts = tuple(check_host_name(host) for host in args.allowed_host or ())
        limits = ServeSecurity.from_env()  # the environment's limits (`ValueError`: not whole numbers >= 1)
        max_body, max_messages = limits.max_body_bytes, limits.max_messages
        if args.max_body_bytes is not None:
            max_body = check_limit(args.max_body_bytes, "--max-body-bytes")
        if args.max_messages is not None:
            max_messages = check_limit(args.max_messages, "--max-messages")
    except ValueError as exc:
        raise ServeError(str(exc)) from exc
    return ServeSecurity(
        api_key=key,
        allow_deploy=args.allow_deploy,
        cors_origins=origins,
        allowed_hosts=hosts,
        bind_host=args.host,
        max_body_bytes=max_body,
        max_messages=max_messages,
    )


def _serve(args: argparse.Namespace, pipelines: dict[str, Path], directory: Path, security: "ServeSecurity") -> int:
    from haystack_agentic.serving.security import is_loopback

    mcp_port = args.port + 1 if args.mcp_port is None else args.mcp_port
    set_serving_environment(args.host, args.port, directory, security)
    if not security.api_key and not is_loopback(args.host):
        print(
            f"warning: serving on {args.host} without an API key: anyone who can reach this address can run "
            "questions (and spend your LLM budget). Pass --api-key KEY or set $HAYSTACK_AGENTIC_API_KEY.",
            file=sys.stderr,
            flush=True,
        )
    print(
        f"Serving {', '.join(sorted(pipelines))} from {directory} on http://{args.host}:{args.port}"
        + (f" (MCP on http://{args.host}:{mcp_port}/mcp)" if mcp_port else "")
        + (f" with {args.workers} workers" if args.workers > 1 else "")
        + ("; API key required" if security.api_key else "")
        + ("; runtime deployment ON (deploy routes, MCP deploy tools)" if security.allow_deploy else ""),
        file=sys.stderr,
        flush=True,
    )
    from haystack_agentic.serving.server import run_servers

    run_servers(args.host, args.port, mcp_port, args.workers, directory)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run `serve` on its own: `python -m haystack_agentic.cli.serve [options]`."""
    telemetry_off_unless_asked()  # before anything imports haystack
    parser = argparse.ArgumentParser(prog="haystack-agentic")
    add_serve_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["serve", *(sys.argv[1:] if argv is None else argv)])
    return cmd_serve(args)


if __name__ == "__main__":
    sys.exit(main())
