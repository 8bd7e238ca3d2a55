# SPDX-License-Identifier: Apache-2.0
"""
What collections cost: listing a store's collections (`list_collections`, what a scoped run's start reads when the
cache is cold), and a BM25 search scoped to one of three collections against an unscoped one, on the packaged
in-memory store (`SparseBM25DocumentStore`) and on Milvus Lite (listing only: `--milvus`).

Chunks are the shipped HotpotQA paragraphs repeated to the size, spread round-robin over three collections.
Milvus chunks get random 384-d vectors (embedding them with MiniLM would take far longer than what is measured).

Run: `python benchmarks/collections_cost.py [--sizes 10000 100000] [--queries 100] [--milvus]`
"""

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from haystack import Document

from haystack_agentic.document_stores.sparse_bm25_document_store import SparseBM25DocumentStore
from haystack_agentic.indexing.collections import collection_filter, list_collections, tag_documents
from haystack_agentic.indexing.hotpotqa import hotpotqa_documents, load_hotpotqa_questions
from haystack_agentic.resources import sample_corpus_path

NAMES = ("alpha", "beta", "gamma")


def corpus(size: int) -> list[Document]:
    paragraphs = hotpotqa_documents(load_hotpotqa_questions(sample_corpus_path()), title_in_content=True)
    docs = []
    for i in range(size):
        base = paragraphs[i % len(paragraphs)]
        plain = Document(content=f"{base.content} [{i}]", meta={"title": base.meta.get("title")})
        docs.extend(tag_documents([plain], NAMES[i % 3], f"Collection {NAMES[i % 3]}"))
    return docs


def timed(fn, repeat: int) -> tuple[float, float]:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    samples.sort()
    return statistics.median(samples), samples[min(len(samples) - 1, int(0.95 * len(samples)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--milvus", action="store_true", help="Also list collections on Milvus Lite.")
    args = parser.parse_args()
    titles = [d.meta.get("title") for d in hotpotqa_documents(load_hotpotqa_questions(sample_corpus_path()))]
    queries = random.Random(0).sample(titles, args.queries)
    for size in args.sizes:
        docs = corpus(size)
        store = SparseBM25DocumentStore(index=f"bench-{size}")
        store.write_documents(docs)
        store.bm25_retrieval(query="warm up", top_k=5)
        median, p95 = timed(lambda store=store: list_collections(store), 5)
        print(f"in-memory {size:>7} chunks: list_collections median {median:.1f} ms, p95 {p95:.1f} ms")
        scope = collection_filter(["beta"])
        for label, filters in (("unscoped", None), ("one of 3", scope)):
            it = iter(queries * 2)
            search = lambda f=filters, it=it, store=store: store.bm25_retrieval(query=next(it), top_k=5, filters=f)  # noqa: E731
            median, p95 = timed(search, len(queries))
            print(f"in-memory {size:>7} chunks: BM25 top-5 {label:<9} median {median:.2f} ms, p95 {p95:.2f} ms")
        if args.milvus:
            from haystack_agentic.indexing.document_stores import milvus_document_store

            rng = random.Random(1)
            with tempfile.TemporaryDirectory() as folder:
                milvus = milvus_document_store(str(Path(folder) / "bench.db"))
                for start in range(0, size, 2000):
                    batch = [
                        Document(id=d.id, content=d.content, meta=d.meta, embedding=[rng.random() for _ in range(384)])
                        for d in docs[start : start + 2000]
                    ]
                    milvus.write_documents(batch)
                median, p95 = timed(lambda m=milvus: list_collections(m), 3)
                print(f"milvus    {size:>7} chunks: list_collections median {median:.1f} ms, p95 {p95:.1f} ms")


if __name__ == "__main__":
    main()
