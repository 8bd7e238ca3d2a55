# SPDX-License-Identifier: Apache-2.0
"""
haystack-agentic: Haystack components for agentic RAG loops. The public names below are imported on first use
(PEP 562), as Haystack does for its own packages, so importing `haystack_agentic` (or its CLI) stays cheap.
"""

import sys
from importlib import import_module
from importlib.abc import MetaPathFinder
from importlib.machinery import ModuleSpec, PathFinder
from types import ModuleType
from typing import TYPE_CHECKING, Any

#: Modules the packaged YAML pipelines need besides Haystack's defaults: this package and the Milvus modules of the
#: `*_milvus*` pipelines. Importing `haystack_agentic` trusts them process-wide (Haystack's public
#: `allow_deserialization_module`), so `Pipeline.loads` of a packaged YAML needs no `allowed_modules`.
ALLOWED_MODULES = [
    "haystack_agentic",
    "milvus_haystack.document_store",
    "milvus_haystack.function",
    "milvus_haystack.milvus_embedding_retriever",
    "pymilvus.client.abstract",
]

#: Haystack's module with the public `allow_deserialization_module`.
_SERIALIZATION = "haystack.core.serialization"


def _trust(serialization: ModuleType) -> None:
    for pattern in ALLOWED_MODULES:
        serialization.allow_deserialization_module(pattern)


class _TrustOnHaystackImport(MetaPathFinder):
    """Trusts `ALLOWED_MODULES` once Haystack's serialization module is imported (this package need not import it)."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> ModuleSpec | None:
        if name != _SERIALIZATION:
            return None
        sys.meta_path.remove(self)
        spec = PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_and_trust(module: ModuleType) -> None:
            exec_module(module)
            _trust(module)

        spec.loader.exec_module = exec_and_trust  # type: ignore[method-assign]
        return spec


if _SERIALIZATION in sys.modules:
    _trust(sys.modules[_SERIALIZATION])
elif not any(isinstance(finder, _TrustOnHaystackImport) for finder in sys.meta_path):
    sys.meta_path.insert(0, _TrustOnHaystackImport())

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

__all__ = sorted([*_EXPORTS, "ALLOWED_MODULES"])

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
        LoopLimits, LoopOutcome, LoopState, PendingSearch, ToolStep, merge_chunks,
    )
    from haystack_agentic.pipelines.loop_builder import LoopOptions, build_loop, load_loop_pipeline
    from haystack_agentic.pipelines.loop_pipeline import build_loop_pipeline
    from haystack_agentic.pipelines.snapshots import load_snapshot, resume_from_snapshot, resume_from_snapshot_async


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'haystack_agentic' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
