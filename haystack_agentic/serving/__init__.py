# SPDX-License-Identifier: Apache-2.0
"""Serving the agentic loop with hayhooks (install the `serve` extra: `pip install "haystack-agentic[serve]"`)."""

from haystack_agentic.serving.agentic_loop_wrapper import (
    AgenticLoopWrapper,
    BadRequest,
    answer_text,
    check_question,
    load_served_pipeline,
    progress_line,
    question_from_messages,
)

__all__ = [
    "AgenticLoopWrapper",
    "BadRequest",
    "answer_text",
    "check_question",
    "load_served_pipeline",
    "progress_line",
    "question_from_messages",
]
