# SPDX-License-Identifier: Apache-2.0
"""Test doubles for haystack-agentic: a scripted chat generator for tests, examples and benchmarks."""

from haystack_agentic.testing.scripted_chat_generator import ScriptedChatGenerator

__all__ = ["ScriptedChatGenerator"]
