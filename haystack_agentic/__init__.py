# SPDX-License-Identifier: Apache-2.0
"""haystack-agentic: Haystack components for agentic RAG loops."""

from haystack_agentic.components.routers.agentic_router import AgenticRouter
from haystack_agentic.components.evidence.evidence_checker import EvidenceChecker
from haystack_agentic.components.generators.answerer import Answerer
from haystack_agentic.components.routers.bridge_entity_router import BridgeEntityRouter
from haystack_agentic.components.generators.fallback_synthesizer import FallbackSynthesizer
from haystack_agentic.components.grounders.hhem_grounder import HHEMGrounder
from haystack_agentic.components.grounders.llm_judge_grounder import LLMJudgeGrounder
from haystack_agentic.components.loop.loop_controller import LoopController
from haystack_agentic.pipelines.loop_pipeline import ALLOWED_MODULES, build_loop_pipeline
from haystack_agentic.components.loop.loop_result_builder import LoopResultBuilder
from haystack_agentic.dataclasses.loop_state import LoopState, PendingSearch, ToolStep, merge_chunks

__all__ = [
    "ALLOWED_MODULES",
    "AgenticRouter",
    "Answerer",
    "BridgeEntityRouter",
    "EvidenceChecker",
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
