# SPDX-License-Identifier: Apache-2.0
"""
`haystack-agentic chat`: answer question after question with the conversation so far.

The loop is loaded once and answers question after question, each follow-up with the conversation so far (the loop's
`messages` result fed back as its next input).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any, TextIO

from haystack_agentic.cli.ask import PreparedLoop, prepare_loop, run_question, say_on_stderr
from haystack_agentic.cli.ask_output import print_trace
from haystack_agentic.cli.common import CLIError, add_backend_arguments, add_command, add_loop_arguments, local_gguf

if TYPE_CHECKING:
    from rich.console import Console

_DESCRIPTION = """\
Answer several questions with one loaded loop: the pipeline, the store and the
models load once, then each line read from standard input is a question. A
follow-up is asked with the conversation so far, so with an LLM router
(`--llm openai`) "Where is she based?" can refer to the previous answer; the
offline default's bridge-entity router searches each question's own words and
does not resolve "she". `/new` starts a new conversation; an empty line
is skipped; end of input (Ctrl-D) or `/exit` ends the session. The options are
`ask`'s.

Exit codes: 0 at the end of input, 2 bad options. A question the loop refuses
(too long, unknown collection) prints the reason and the session goes on.
"""

_EXAMPLES = """\
examples:
  # offline, type questions one after another
  haystack-agentic chat
  # several questions from a file, one result JSON per line
  haystack-agentic chat --json --new-each < questions.txt
"""

#: The commands a chat line can be instead of a question.
NEW_CONVERSATION = "/new"
END_SESSION = "/exit"


def add_chat_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the `chat` sub-command."""
    summary = "Answer question after question with one loaded loop (follow-ups in a conversation)."
    chat = add_command(subparsers, "chat", summary, _DESCRIPTION, _EXAMPLES)
    chat.add_argument("--json", action="store_true", help="Print each result as one line of JSON.")
    chat.add_argument("--new-each", action="store_true", help="Every question starts a new conversation.")
    add_loop_arguments(chat)
    add_backend_arguments(chat)
    return chat


def cmd_chat(args: argparse.Namespace, console: Console, lines: TextIO | None = None) -> int:
    """
    Run `haystack-agentic chat`: answer each line of input; returns the exit code.

    Prepare the loop once, then answer each line of `lines` (default: stdin); 0 at the end of input (`CLIError`: bad
    options, before any question is read). With `--gguf`, llama.cpp runs the file for the session.
    """
    lines = sys.stdin if lines is None else lines
    with local_gguf(args, say_on_stderr(args.quiet or args.json)) as local_args:
        return _chat_session(local_args, console, lines)


def _chat_session(args: argparse.Namespace, console: Console, lines: TextIO) -> int:
    """Prepare the loop once and answer each line of `lines` (see `cmd_chat`)."""
    loop = prepare_loop(args, args.quiet or args.json)
    try:
        return _answer_lines(args, console, lines, loop)
    finally:
        loop.close()


def _answer_lines(args: argparse.Namespace, console: Console, lines: TextIO, loop: PreparedLoop) -> int:
    """Answer each line of `lines` with the prepared `loop` until the end of input or `/exit` (see `cmd_chat`)."""
    from haystack.dataclasses import ChatMessage

    from haystack_agentic.components.loop.loop_result_builder import result_to_dict

    interactive = lines.isatty()
    conversation: list[ChatMessage] = []
    while True:
        if interactive:
            console.print("[bold]>[/bold] ", end="")
        line = lines.readline()
        if not line or line.strip() == END_SESSION:
            return 0
        question = line.strip()
        if not question:
            continue
        if question == NEW_CONVERSATION:
            conversation = []
            continue
        messages = [*conversation, ChatMessage.from_user(question)]
        try:
            result, seconds = run_question(loop, args, question, messages)
        except CLIError as exc:  # a refused question: say why (on stderr: stdout keeps one JSON line per answer
            # with --json), keep the session and its conversation
            print(f"error: {exc}", file=sys.stderr)
            continue
        messages = result["messages"]
        result = result_to_dict(result)
        if args.json:
            print(json.dumps({**result, "question": question, "seconds": round(seconds, 3)}, ensure_ascii=False))
        else:
            print_trace(console, question, result, seconds, loop.describe)
        if args.new_each or result["terminated_by"] == "error":
            conversation = []
        else:
            conversation = list(messages)
