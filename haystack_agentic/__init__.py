# SPDX-License-Identifier: Apache-2.0
"""
haystack-agentic: Haystack components for agentic RAG loops.

The public names below are imported on first use (PEP 562), as Haystack does for its own packages, so importing
`haystack_agentic` (or its CLI) stays cheap.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

#: Third-party modules the packaged Milvus YAMLs name (exact module names). Importing `haystack_agentic` trusts
#: nothing: the package's loaders pass these to Haystack only for a YAML that names them (`allowed_modules_for`).
ALLOWED_MODULES = [
    "milvus_haystack.document_store",
    "milvus_haystack.function",
    "milvus_haystack.milvus_embedding_retriever",
    "pymilvus.client.abstract",
]

_EXPORTS = {
    "AgenticRAG": "haystack_agentic.components.loop.agentic_rag",
    "AgenticRAGError": "haystack_agentic.components.loop.agentic_rag",
    "AgenticRouter": "haystack_agentic.components.routers.agentic_router",
    "Answerer": "haystack_agentic.components.generators.answerer",
    "EvidenceChecker": "haystack_agentic.components.evidence.evidence_checker",
    "BridgeEntityRouter": "haystack_agentic.components.routers.bridge_entity_router",
    "FallbackSynthesizer": "haystack_agentic.components.generators.fallback_synthesizer",
    "ShortAnswerExtractor": "haystack_agentic.components.extractors.short_answer_extractor",
    "HHEMGrounder": "haystack_agentic.components.grounders.hhem_grounder",
    "LLMJudgeGrounder": "haystack_agentic.components.grounders.llm_judge_grounder",
    "LoopController": "haystack_agentic.components.loop.loop_controller",
    "build_loop_pipeline": "haystack_agentic.pipelines.loop_pipeline",
    "LoopOptions": "haystack_agentic.pipelines.loop_builder",
    "allowed_modules_for": "haystack_agentic.loop_loading",
    "build_loop": "haystack_agentic.pipelines.loop_builder",
    "load_loop_pipeline": "haystack_agentic.pipelines.loop_builder",
    "load_snapshot": "haystack_agentic.pipelines.snapshots",
    "resume_from_snapshot": "haystack_agentic.pipelines.snapshots",
    "resume_from_snapshot_async": "haystack_agentic.pipelines.snapshots",
    "LoopResultBuilder": "haystack_agentic.components.loop.loop_result_builder",
    "LoopStateJoiner": "haystack_agentic.components.loop.loop_state_joiner",
    "LoopLimits": "haystack_agentic.dataclasses.loop_state",
    "LoopOutcome": "haystack_agentic.dataclasses.loop_state",
    "LoopState": "haystack_agentic.dataclasses.loop_state",
    "PendingSearch": "haystack_agentic.dataclasses.loop_state",
    "ToolStep": "haystack_agentic.dataclasses.loop_state",
    "merge_chunks": "haystack_agentic.dataclasses.loop_state",
}

__all__ = [  # ALLOWED_MODULES and the keys of _EXPORTS (tests/test_layout.py checks it)
    "ALLOWED_MODULES",
    "AgenticRAG",
    "AgenticRAGError",
    "AgenticRouter",
    "Answerer",
    "BridgeEntityRouter",
    "EvidenceChecker",
    "FallbackSynthesizer",
    "HHEMGrounder",
    "LLMJudgeGrounder",
    "LoopController",
    "LoopLimits",
    "LoopOptions",
    "LoopOutcome",
    "LoopResultBuilder",
    "LoopState",
    "LoopStateJoiner",
    "PendingSearch",
    "ShortAnswerExtractor",
    "ToolStep",
    "allowed_modules_for",
    "build_loop",
    "build_loop_pipeline",
    "load_loop_pipeline",
    "load_snapshot",
    "merge_chunks",
    "resume_from_snapshot",
    "resume_from_snapshot_async",
]

if TYPE_CHECKING:  # for type checkers and IDEs; at run time the names load lazily
    from haystack_agentic.components.evidence.evidence_checker import EvidenceChecker
    from haystack_agentic.components.extractors.short_answer_extractor import ShortAnswerExtractor
    from haystack_agentic.components.generators.answerer import Answerer
    from haystack_agentic.components.generators.fallback_synthesizer import FallbackSynthesizer
    from haystack_agentic.components.grounders.hhem_grounder import HHEMGrounder
    from haystack_agentic.components.grounders.llm_judge_grounder import LLMJudgeGrounder
    from haystack_agentic.components.loop.agentic_rag import AgenticRAG, AgenticRAGError
    from haystack_agentic.components.loop.loop_controller import LoopController
    from haystack_agentic.components.loop.loop_result_builder import LoopResultBuilder
    from haystack_agentic.components.loop.loop_state_joiner import LoopStateJoiner
    from haystack_agentic.components.routers.agentic_router import AgenticRouter
    from haystack_agentic.components.routers.bridge_entity_router import BridgeEntityRouter
    from haystack_agentic.dataclasses.loop_state import (
        LoopLimits,
        LoopOutcome,
        LoopState,
        PendingSearch,
        ToolStep,
        merge_chunks,
    )
    from haystack_agentic.loop_loading import allowed_modules_for
    from haystack_agentic.pipelines.loop_builder import LoopOptions, build_loop, load_loop_pipeline
    from haystack_agentic.pipelines.loop_pipeline import build_loop_pipeline
    from haystack_agentic.pipelines.snapshots import load_snapshot, resume_from_snapshot, resume_from_snapshot_async


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        msg = f"module 'haystack_agentic' has no attribute {name!r}"
        raise AttributeError(msg)
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
