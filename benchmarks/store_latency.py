# SPDX-License-Identifier: Apache-2.0
"""
Retrieval latency (median, p95) and index time of the document-store backends at 10k and 100k chunks.

Backends: in-memory BM25 (Haystack), Milvus Lite dense, BM25 (built-in function) and hybrid (RRF).
Chunks are synthesised from the shipped HotpotQA sample's paragraphs (each paragraph repeated with a numeric
suffix to reach the size). Embeddings are random unit vectors of 384 dimensions (MiniLM's size): embedding 100k
chunks with MiniLM on 2 CPUs takes far longer than the stores themselves, and retrieval latency does not depend
on what the vectors mean. Queries are paragraph titles (distinct words that occur in the corpus).

Run: `.venv/bin/python benchmarks/store_latency.py [--sizes 10000 100000] [--queries 200]`
"""

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from haystack import Document  # noqa: E402
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever  # noqa: E402
from haystack.document_stores.in_memory import InMemoryDocumentStore  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "examples" / "data" / "hotpotqa_dev_sample.jsonl"
from haystack_agentic.indexing.document_stores import milvus_document_store  # noqa: E402
from haystack_agentic.datasets.hotpotqa import hotpotqa_documents  # noqa: E402

DIM = 384
BATCH = 2000


def unit_vector(rng: random.Random) -> list[float]:
    v = [rng.gauss(0, 1) for _ in range(DIM)]
    n = sum(x * x for x in v) ** 0.5
    return [x / n for x in v]


def synth_chunks(size: int, rng: random.Random) -> list[Document]:
    base = hotpotqa_documents(DATA, title_in_content=True)
    docs = []
    for i in range(size):
        src = base[i % len(base)]
        docs.append(
            Document(
                id=f"chunk-{i}",
                content=f"{src.content} (copy {i // len(base)})",
                meta={"title": src.meta["title"], "tenant": f"t{i % 4}"},
                embedding=unit_vector(rng),
            )
        )
    return docs


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered) * 1000, ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))] * 1000


def time_queries(fn, queries) -> tuple[float, float]:
    fn(queries[0])  # warm
    samples = []
    for q in queries:
        start = time.perf_counter()
        fn(q)
        samples.append(time.perf_counter() - start)
    return percentiles(samples)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--top-k", type=int, default=5)
    args = parser.parse_args()
    rng = random.Random(0)
    rows = []
    for size in args.sizes:
        docs = synth_chunks(size, rng)
        titles = sorted({d.meta["title"] for d in docs})
        queries = [(rng.choice(titles), unit_vector(rng)) for _ in range(args.queries)]

        store = InMemoryDocumentStore()
        start = time.perf_counter()
        for i in range(0, size, BATCH):
            store.write_documents([Document(id=d.id, content=d.content, meta=d.meta) for d in docs[i : i + BATCH]])
        index_s = time.perf_counter() - start
        bm25 = InMemoryBM25Retriever(store, top_k=args.top_k)
        med, p95 = time_queries(lambda q: bm25.run(query=q[0]), queries)
        rows.append((size, "in-memory BM25", index_s, med, p95))
        print(rows[-1], flush=True)
        del store, bm25

        with tempfile.TemporaryDirectory() as tmp:
            from milvus_haystack import (  # noqa: PLC0415
                MilvusEmbeddingRetriever,
                MilvusHybridRetriever,
                MilvusSparseEmbeddingRetriever,
            )

            mstore = milvus_document_store(str(Path(tmp) / "bench.db"))
            start = time.perf_counter()
            for i in range(0, size, BATCH):
                mstore.write_documents(docs[i : i + BATCH])
            mstore.count_documents()
            index_s = time.perf_counter() - start
            dense = MilvusEmbeddingRetriever(mstore, top_k=args.top_k)
            sparse = MilvusSparseEmbeddingRetriever(mstore, top_k=args.top_k)
            hybrid = MilvusHybridRetriever(mstore, top_k=args.top_k)
            for name, fn in (
                ("Milvus Lite dense", lambda q: dense.run(query_embedding=q[1])),
                ("Milvus Lite BM25", lambda q: sparse.run(query_text=q[0])),
                ("Milvus Lite hybrid", lambda q: hybrid.run(query_embedding=q[1], query_text=q[0])),
            ):
                med, p95 = time_queries(fn, queries)
                rows.append((size, name, index_s, med, p95))
                print(rows[-1], flush=True)
            mstore.client.close()

    print()
    print(f"| chunks | backend | index time (s) | median (ms) | p95 (ms) |  (top_k={args.top_k}, {args.queries} queries)")
    print("|---:|---|---:|---:|---:|")
    for size, name, index_s, med, p95 in rows:
        print(f"| {size:,} | {name} | {index_s:.1f} | {med:.2f} | {p95:.2f} |")


if __name__ == "__main__":
    main()
