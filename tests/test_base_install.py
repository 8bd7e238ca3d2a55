# SPDX-License-Identifier: Apache-2.0
"""
The base install (no extras) imports every component and runs the loop: a subprocess whose import system refuses
the optional heavy packages, as a fresh `pip install haystack-agentic` would.
"""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Top-level modules that only extras install.
HEAVY = (
    "torch",
    "transformers",
    "sentence_transformers",
    "haystack_integrations",
    "milvus",
    "milvus_lite",
    "milvus_haystack",
    "pymilvus",
    "weaviate",
    "hayhooks",
    "pysbd",
    "tiktoken",
    "scipy",  # the `eval` extra (confidence intervals)
    "matplotlib",
)

BLOCKER = f"""
import importlib.abc, sys
HEAVY = {HEAVY!r}
class _Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in HEAVY:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None
sys.meta_path.insert(0, _Blocker())
"""


def run_python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", BLOCKER + textwrap.dedent(code)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT / "tests")},  # the scripted test generator lives in tests/
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_every_component_module_imports_without_extras():
    result = run_python(
        """
        import importlib, pkgutil
        import haystack_agentic
        from haystack_agentic import AgenticRAG, EvidenceChecker, build_loop_pipeline  # noqa: F401
        for name in haystack_agentic.__all__:
            getattr(haystack_agentic, name)
        failed = []
        for info in pkgutil.walk_packages(haystack_agentic.__path__, "haystack_agentic."):
            if info.name.startswith("haystack_agentic.serving."):
                continue  # serving is hayhooks itself: the `serve` extra
            try:
                importlib.import_module(info.name)
            except Exception as exc:
                failed.append(f"{info.name}: {exc!r}")
        assert not failed, failed
        print("ok")
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_a_scripted_run_without_extras_uses_the_lexical_evidence_check():
    result = run_python(
        """
        import json, sys
        from haystack import Document
        from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
        from haystack_agentic import AgenticRAG, AgenticRouter, build_loop_pipeline
        from haystack_agentic.document_stores.sparse_bm25_document_store import SparseBM25DocumentStore
        from scripted_chat_generator import ScriptedChatGenerator

        store = SparseBM25DocumentStore()  # the packaged pipelines' in-memory store: numpy only, no scipy
        store.write_documents([
            Document(id="bsg", content="Big Stone Gap is a 2014 film written and directed by Adriana Trigiani."),
            Document(id="trigiani", content="Adriana Trigiani is based in Greenwich Village, New York City."),
        ])
        llm = ScriptedChatGenerator([
            {"tool_calls": [{"tool_name": "search", "arguments": {"query": "Big Stone Gap director"}}]},
            {"tool_calls": [{"tool_name": "answer", "arguments": {"text": "Adriana Trigiani"}}]},
        ])
        rag = AgenticRAG(pipeline=build_loop_pipeline(AgenticRouter(chat_generator=llm), InMemoryBM25Retriever(store)))
        out = rag.run(query="Who directed Big Stone Gap?")
        heavy = sorted(name for name in sys.modules if name.split(".")[0] in HEAVY)
        print(json.dumps({"answer": out["answer"], "evidence": out["result"]["evidence"]["method"], "heavy": heavy}))
        """
    )
    assert result.returncode == 0, result.stderr
    out = __import__("json").loads(result.stdout.strip().splitlines()[-1])
    assert out == {"answer": "Adriana Trigiani [1]", "evidence": "offline-lexical", "heavy": []}  # cited, no extras
    assert 'pip install "haystack-agentic[embeddings]"' in result.stderr
    assert result.stderr.count("pysbd is not installed") == 1  # the fallback splitter is said once, not per split


def test_a_missing_extra_is_one_line_naming_it():
    result = run_python(
        """
        from haystack_agentic.components.embedders.minilm_text_embedder import MiniLMTextEmbedder
        import haystack_agentic.serving as serving
        for use in (lambda: MiniLMTextEmbedder().warm_up(), lambda: serving.AgenticLoopWrapper):
            try:
                use()
            except ImportError as exc:
                print(exc)
        """
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 2
    assert 'pip install "haystack-agentic[embeddings]"' in lines[0]
    assert 'pip install "haystack-agentic[serve]"' in lines[1]


def test_importing_the_package_loads_no_model_library():
    # Haystack itself imports torch when it is installed (haystack.utils.device): only what we add is checked.
    code = """
        import sys
        import haystack.core.pipeline
        before = {n for n in ("torch", "transformers", "sentence_transformers") if n in sys.modules}
        import haystack_agentic
        from haystack_agentic import AgenticRAG, EvidenceChecker, build_loop_pipeline  # noqa: F401
        after = {n for n in ("torch", "transformers", "sentence_transformers") if n in sys.modules}
        print(sorted(after - before))
    """
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
