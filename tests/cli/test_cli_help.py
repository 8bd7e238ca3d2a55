# SPDX-License-Identifier: Apache-2.0
"""`haystack-agentic [COMMAND] --help`: cheap (no Haystack, no models imported), described, with examples."""

import json
import subprocess
import sys

import pytest

from haystack_agentic.cli.main import build_parser

COMMANDS = ["index", "ask", "collections", "serve"]

#: Top-level packages `--help` must not import: each one costs from a second (haystack) to ten (torch).
HEAVY = ("haystack", "haystack_integrations", "torch", "transformers", "hayhooks", "matplotlib", "milvus_haystack")

_PROBE = """
import contextlib, io, json, sys
{preamble}
from haystack_agentic.cli.main import main
with contextlib.redirect_stdout(io.StringIO()) as out:
    try:
        main({argv!r})
    except SystemExit:
        pass
heavy = sorted({{m.split(".")[0] for m in sys.modules}} & set({heavy!r}))
print(json.dumps({{"heavy": heavy, "help": out.getvalue()}}))
"""


def heavy_modules_after_help(argv: list[str], preamble: str = "") -> tuple[list[str], str]:
    """Run `main(argv)` in a fresh interpreter; return the heavy packages it imported and the help text."""
    code = _PROBE.format(preamble=preamble, argv=argv, heavy=HEAVY)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    result = json.loads(done.stdout)
    return result["heavy"], result["help"]


@pytest.mark.parametrize("command", [None, *COMMANDS])
def test_help_imports_no_haystack_and_no_model_library(command):
    argv = [command, "--help"] if command else ["--help"]
    heavy, text = heavy_modules_after_help(argv)
    assert text.startswith("usage: haystack-agentic"), text[:200]
    assert heavy == [], f"`haystack-agentic {' '.join(argv)}` imported {heavy}: import them inside the command"


@pytest.mark.slow  # runs for many seconds
def test_the_help_probe_sees_a_heavy_import():
    heavy, _ = heavy_modules_after_help(["--help"], preamble="import haystack")
    assert "haystack" in heavy


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_a_description_and_examples(command):
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices[command]
    assert sub.description and len(sub.description.split()) >= 20, f"`{command}` needs a description"
    assert sub.epilog and sub.epilog.startswith("examples:"), f"`{command}` needs examples"
    assert f"haystack-agentic {command}" in sub.epilog
    assert "RawDescription" in sub.formatter_class.__name__  # the examples keep their lines
    too_wide = [line for line in (sub.description + sub.epilog).splitlines() if len(line) > 80]
    assert too_wide == [], f"`{command} --help` lines wider than 80 columns: {too_wide}"


def test_index_help_lists_every_format_it_reads():
    from haystack_agentic.indexing.indexing_pipeline import SUPPORTED_SUFFIXES

    parser = build_parser()
    text = next(a for a in parser._actions if a.dest == "command").choices["index"].format_help()
    table = [line.split() for line in text.splitlines() if line.lstrip().startswith(".")]  # the formats table
    missing = [suffix for suffix in SUPPORTED_SUFFIXES if not any(suffix in words for words in table)]
    assert missing == [], f"`index --help` does not list {missing}"
