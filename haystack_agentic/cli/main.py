# SPDX-License-Identifier: Apache-2.0
"""
`haystack-agentic`: the parser and dispatch of the commands (one module each).

Only argument parsing is imported up front, so `--help` is fast: a command imports Haystack, models and servers when it
runs.
"""

import argparse
import json
import sys
import traceback
from importlib import import_module

from haystack_agentic.cli.ask import add_ask_parser
from haystack_agentic.cli.chat import add_chat_parser
from haystack_agentic.cli.collections import add_collections_parser
from haystack_agentic.cli.common import CLIError, telemetry_off_unless_asked
from haystack_agentic.cli.index import add_index_parser
from haystack_agentic.cli.install_model import add_install_model_parser
from haystack_agentic.cli.serve import add_serve_parser

_EXAMPLES = """\
examples:
  # offline: indexes the shipped HotpotQA sample on first use
  haystack-agentic ask 'Who directed Big Stone Gap?'
  # your documents (.jsonl .txt .md .html .pdf), then questions over them
  haystack-agentic index my_docs/ --store my_store.json
  haystack-agentic ask 'What is in my docs?' --store my_store.json
  # collections: index into named ones, list them, ask within one
  haystack-agentic index manuals/ --store my_store.json --collection docs
  haystack-agentic collections --store my_store.json
  haystack-agentic ask 'How do I reset it?' --store my_store.json --collection docs
  # REST, OpenAI-compatible chat and MCP on 127.0.0.1
  haystack-agentic serve --port 1416

`haystack-agentic COMMAND --help` describes a command, with examples.
"""


_DEBUG_HELP = "On an error, show the traceback and the store libraries' own logs (default: one line)."


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of `haystack-agentic`."""
    parser = argparse.ArgumentParser(
        prog="haystack-agentic",
        description="Agentic RAG loops for Haystack: index documents, ask questions, serve.",
        epilog=_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--debug", action="store_true", help=_DEBUG_HELP)
    sub = parser.add_subparsers(dest="command", required=True)
    add_index_parser(sub)
    add_ask_parser(sub)
    add_chat_parser(sub)
    add_collections_parser(sub)
    add_serve_parser(sub)
    add_install_model_parser(sub)
    for command in sub.choices.values():  # also accepted after the command; SUPPRESS keeps a global --debug
        command.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=_DEBUG_HELP)
    return parser


def main(argv: list[str] | None = None) -> int:
    """
    Entry point of `haystack-agentic`; returns the exit code.

    `argv` defaults to `sys.argv[1:]`. Exit code: 0 success, 1 the loop ended in error (or an unexpected error), 2 bad
    input or a store fault, 130 interrupted (Ctrl-C).
    """
    telemetry_off_unless_asked()  # before the first import of haystack (store_faults below, or the command's)
    args = build_parser().parse_args(argv)
    from rich.console import Console

    from haystack_agentic.indexing.store_faults import one_line, quiet_store_logs

    debug = getattr(args, "debug", False)
    if not debug:
        quiet_store_logs()

    # Piped output has no terminal width; tables then get room instead of rich's 80-column fallback.
    console = Console(soft_wrap=True, width=None if sys.stdout.isatty() else 200)
    try:
        if args.command in ("ask", "chat") and args.filters:
            try:
                if not isinstance(json.loads(args.filters), dict):
                    msg = "not an object"
                    raise ValueError(msg)
            except ValueError as exc:
                msg = f"--filters must be a JSON object of Haystack filters ({exc})."
                raise CLIError(msg) from exc
        name = args.command.replace("-", "_")
        return getattr(import_module(f"haystack_agentic.cli.{name}"), f"cmd_{name}")(args, console)
    except CLIError as exc:
        _print_error(str(exc), exc if debug else None)
        return 2
    except KeyboardInterrupt:
        _print_error("interrupted.")
        return 130
    except Exception as exc:
        if debug:
            raise
        _print_error(f"unexpected {type(exc).__name__}: {one_line(exc)} (run again with --debug for the traceback)")
        return 1


def _print_error(message: str, exc: BaseException | None = None) -> None:
    """One line on stderr (`error: ...`), after the traceback of `exc` if given (`--debug`)."""
    from rich.console import Console

    if exc is not None:
        traceback.print_exception(exc)
    err = Console(stderr=True, soft_wrap=True)
    err.print("[bold red]error:[/bold red] ", end="")
    err.print(message, highlight=False, markup=False)


if __name__ == "__main__":
    sys.exit(main())
