# SPDX-License-Identifier: Apache-2.0
"""
Retrieval latency of the document-store backends at 10k and 100k chunks: per search, and per question.

Backends: in-memory BM25 with Haystack's `InMemoryDocumentStore` (scores every document in Python) and with
`SparseBM25DocumentStore` (the packaged offline default: the same scores from a sparse matrix); Milvus Lite
dense, BM25 (built-in function) and hybrid (RRF), flushed after writing as `haystack-agentic index` does
(`--no-flush` shows the unflushed state).

- per search: `top_k=5` searches for paragraph titles, one at a time: median and p95;
- per question: the offline default's bridge-entity loop (`BridgeEntityRouter`: the question, then up to two
  bridge-entity searches, each with a `meta.title == ...` filter, and the router's check of the store's document
  count) with a retrieval-only answerer, over the shipped HotpotQA questions: median and p95 per question.

Chunks are the shipped HotpotQA paragraphs repeated to the size. Embeddings are random 384-d unit vectors (and
a hash-seeded random query embedder): embedding 100k chunks with MiniLM on 2 CPUs takes far longer than the
stores themselves, and latency does not depend on what the vectors mean.

Run: `python benchmarks/store_latency.py [--sizes 10000 100000] [--queries 100] [--questions 50]`
"""

import argparse
import hashlib
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from haystack import Document, component
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.document_stores.in_memory import InMemoryDocumentStore

from benchmarks.harness.retrieval_only_answerer import RetrievalOnlyAnswerer
from haystack_agentic.components.loop.loop_controller import LoopController
from haystack_agentic.components.retrievers.safe_retriever import SafeRetriever
from haystack_agentic.components.routers.bridge_entity_router import BridgeEntityRouter
from haystack_agentic.document_stores import milvus_support
from haystack_agentic.document_stores.sparse_bm25_document_store import SparseBM25DocumentStore
from haystack_agentic.indexing.document_stores import milvus_document_store
from haystack_agentic.indexing.hotpotqa import hotpotqa_documents, load_hotpotqa_questions
from haystack_agentic.pipelines.loop_pipeline import build_loop_pipeline

DATA = Path(__file__).resolve().parents[1] / "examples" / "data" / "hotpotqa_dev_sample.jsonl"
DIM = 384
BATCH = 2000
TARGETS = {"in-memory": 20.0, "Milvus": 30.0}


def unit_vector(rng: random.Random) -> list[float]:
    v = [rng.gauss(0, 1) for _ in range(DIM)]
    n = sum(x * x for x in v) ** 0.5
    return [x / n for x in v]


@component
class HashEmbedder:
    """A stand-in query embedder: a random unit vector seeded by the text (no model, ~0.3 ms)."""

    @component.output_types(embedding=list[float])
    def run(self, text: str) -> dict[str, list[float]]:
        return {"embedding": unit_vector(random.Random(hashlib.sha256(text.encode()).digest()))}


def synth_chunks(size: int, rng: random.Random, embed: bool = True) -> list[Document]:
    base = hotpotqa_documents(DATA, title_in_content=True)
    return [
        Document(
            id=f"chunk-{i}",
            content=f"{base[i % len(base)].content} (copy {i // len(base)})",
            meta={"title": base[i % len(base)].meta["title"], "tenant": f"t{i % 4}"},
            embedding=unit_vector(rng) if embed else None,
        )
        for i in range(size)
    ]


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered) * 1000, ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))] * 1000


def time_calls(fn, inputs) -> tuple[float, float]:
    fn(inputs[0])  # warm (builds the sparse matrix, loads Milvus segments)
    samples = []
    for item in inputs:
        start = time.perf_counter()
        fn(item)
        samples.append(time.perf_counter() - start)
    return percentiles(samples)


def question_loop(store, retriever, embedder=None):
    """The offline default's bridge-entity loop, retrieval only (no LLM)."""
    router = BridgeEntityRouter(document_store=store, first_top_k=4, follow_up_top_k=1, max_follow_ups=2)
    pipeline = build_loop_pipeline(
        router,
        SafeRetriever(retriever),
        query_embedder=embedder,
        controller=LoopController(max_iterations=router.max_follow_ups + 2, chunk_cap=router.max_chunks),
        answerer=RetrievalOnlyAnswerer(),
        fallback=RetrievalOnlyAnswerer(),
        check_evidence=False,  # retrieval only: the evidence check's cost is benchmarks/evidence_check.py's
    )
    pipeline.warm_up()  # the router indexes the store's titles once

    def ask(question: str) -> None:
        result = pipeline.run({"controller": {"query": question}})["result"]
        assert result["error"] is None, result["error"]

    return ask


def measure(rows, size, name, search, ask, queries, questions, index_s) -> None:
    med, p95 = time_calls(search, queries)
    q_med, q_p95 = time_calls(ask, questions) if ask is not None else (float("nan"), float("nan"))
    target = next((t for prefix, t in TARGETS.items() if name.startswith(prefix)), None)
    rows.append((size, name, index_s, med, p95, q_med, q_p95, target))
    print(rows[-1], flush=True)


def in_memory_rows(rows, size, docs, queries, questions, baseline_queries: int) -> None:
    for name, cls in (
        ("in-memory BM25, SparseBM25DocumentStore", SparseBM25DocumentStore),
        ("Haystack InMemoryDocumentStore BM25 (before)", InMemoryDocumentStore),
    ):
        store = cls()
        start = time.perf_counter()
        for i in range(0, size, BATCH):
            store.write_documents([Document(id=d.id, content=d.content, meta=d.meta) for d in docs[i : i + BATCH]])
        index_s = time.perf_counter() - start
        retriever = InMemoryBM25Retriever(store, top_k=5)
        slow = cls is InMemoryDocumentStore
        searches = queries[:baseline_queries] if slow else queries
        asked = questions[: max(3, baseline_queries // 4)] if slow else questions
        ask = question_loop(store, retriever)
        measure(
            rows, size, name, lambda q, retriever=retriever: retriever.run(query=q[0]), ask, searches, asked, index_s
        )


def milvus_rows(rows, size, docs, queries, questions, flush: bool) -> None:
    from milvus_haystack import MilvusEmbeddingRetriever, MilvusHybridRetriever, MilvusSparseEmbeddingRetriever

    with tempfile.TemporaryDirectory() as tmp:
        store = milvus_document_store(str(Path(tmp) / "bench.db"))
        start = time.perf_counter()
        for i in range(0, size, BATCH):
            store.write_documents(docs[i : i + BATCH])
        if flush:
            milvus_support.flush(store)
        store.count_documents()
        index_s = time.perf_counter() - start
        suffix = "" if flush else " (not flushed)"
        dense = MilvusEmbeddingRetriever(store, top_k=5)
        sparse = MilvusSparseEmbeddingRetriever(store, top_k=5)
        hybrid = MilvusHybridRetriever(store, top_k=5)
        for name, search, ask in (
            (
                "Milvus Lite dense",
                lambda q: dense.run(query_embedding=q[1]),
                question_loop(store, dense, HashEmbedder()),
            ),
            ("Milvus Lite BM25", lambda q: sparse.run(query_text=q[0]), question_loop(store, sparse)),
            (
                "Milvus Lite hybrid",
                lambda q: hybrid.run(query_embedding=q[1], query_text=q[0]),
                question_loop(store, hybrid, HashEmbedder()),
            ),
        ):
            measure(rows, size, name + suffix, search, ask, queries, questions, index_s)
        store.client.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=100, help="title searches per backend")
    parser.add_argument("--questions", type=int, default=50, help="HotpotQA questions through the bridge loop")
    parser.add_argument("--baseline-queries", type=int, default=20, help="searches for Haystack's slow store")
    parser.add_argument("--no-flush", action="store_true", help="query Milvus Lite without flushing after writing")
    parser.add_argument("--skip-milvus", action="store_true")
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} CPUs, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} at start")
    rng = random.Random(0)
    questions = [r["question"] for r in load_hotpotqa_questions(DATA)[: args.questions]]
    rows: list[tuple] = []
    for size in args.sizes:
        docs = synth_chunks(size, rng, embed=not args.skip_milvus)
        titles = sorted({d.meta["title"] for d in docs})
        queries = [(rng.choice(titles), unit_vector(rng)) for _ in range(args.queries)]
        in_memory_rows(rows, size, docs, queries, questions, args.baseline_queries)
        if not args.skip_milvus:
            milvus_rows(rows, size, docs, queries, questions, flush=not args.no_flush)

    print(f"\nload average {' '.join(f'{x:.2f}' for x in os.getloadavg())} at end")
    print(
        "| chunks | backend | index (s) | search p50 (ms) | search p95 (ms) | question p50 (ms) | question p95 (ms) "
        "| target (search p50) |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|---|")
    for size, name, index_s, med, p95, q_med, q_p95, target in rows:
        verdict = (
            ""
            if target is None or "before" in name
            else (f"<= {target:.0f} ms: {med / target:.2f}x, {'met' if med <= target else 'NOT met'}")
        )
        print(f"| {size:,} | {name} | {index_s:.1f} | {med:.2f} | {p95:.2f} | {q_med:.1f} | {q_p95:.1f} | {verdict} |")


if __name__ == "__main__":
    main()
