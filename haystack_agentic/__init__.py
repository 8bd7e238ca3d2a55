# SPDX-License-Identifier: Apache-2.0
"""haystack-agentic: Haystack components for agentic RAG loops."""

from haystack_agentic.agentic_router import AgenticRouter
from haystack_agentic.answerer import Answerer
from haystack_agentic.bridge_entity_router import BridgeEntityRouter
from haystack_agentic.fallback_synthesizer import FallbackSynthesizer
from haystack_agentic.hhem_grounder import HHEMGrounder
from haystack_agentic.llm_judge_grounder import LLMJudgeGrounder
from haystack_agentic.loop_controller import LoopController
from haystack_agentic.loop_pipeline import ALLOWED_MODULES, build_loop_pipeline
from haystack_agentic.loop_result_builder import LoopResultBuilder
from haystack_agentic.loop_state import LoopState, PendingSearch, ToolStep, merge_chunks

__all__ = [
    "ALLOWED_MODULES",
    "AgenticRouter",
    "Answerer",
    "BridgeEntityRouter",
    "FallbackSynthesizer",
    "HHEMGrounder",
    "LLMJudgeGrounder",
    "LoopController",
    "LoopResultBuilder",
    "LoopState",
    "PendingSearch",
    "ToolStep",
    "build_loop_pipeline",
    "merge_chunks",
]
