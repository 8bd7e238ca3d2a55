# SPDX-License-Identifier: Apache-2.0
"""
Dense search latency in Milvus Lite by index type, at a given collection size (issue 12, goal 3).

`store_latency.py` measures the packaged Milvus collection (milvus-haystack's default `AUTOINDEX`). This script
asks why dense search grows so fast with size there: it writes N random 384-d unit vectors (the MiniLM size)
straight through `pymilvus.MilvusClient` into a fresh Milvus Lite file per index type, flushes, and times
`top_k=5` searches (median and minimum of `--queries`). Milvus Lite builds the index type it reports, but
only some of them change how it searches; the figures show which.

Run: `python benchmarks/milvus_lite_index.py [--size 100000] [--queries 30]`
"""

import argparse
import os
import tempfile
import time

import numpy as np

INDEXES = {
    "AUTOINDEX (milvus-haystack's default)": ({"index_type": "AUTOINDEX", "metric_type": "L2"}, {}),
    "FLAT": ({"index_type": "FLAT", "metric_type": "L2"}, {}),
    "IVF_FLAT nlist=sqrt(N), nprobe=16": ({"index_type": "IVF_FLAT", "metric_type": "L2"}, {"nprobe": 16}),
    "HNSW M=16, ef=64": (
        {"index_type": "HNSW", "metric_type": "L2", "params": {"M": 16, "efConstruction": 100}},
        {"ef": 64},
    ),
}


def measure(size: int, queries: int, index: dict, search: dict) -> tuple[float, float, float, str]:
    """Write, flush and search one collection: (write + flush s, search p50 ms, search min ms, reported index)."""
    from pymilvus import DataType, MilvusClient

    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((size, 384)).astype("float32")
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    probes = rng.standard_normal((queries, 384)).astype("float32").tolist()
    if index["index_type"] == "IVF_FLAT":
        index = {**index, "params": {"nlist": max(1, int(size**0.5))}}
    # Milvus Lite may still be writing its files after close(): a leftover file must not fail the measurement
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        client = MilvusClient(os.path.join(tmp, "bench.db"))
        schema = client.create_schema(auto_id=False)
        schema.add_field("id", DataType.INT64, is_primary=True)
        schema.add_field("vector", DataType.FLOAT_VECTOR, dim=384)
        params = client.prepare_index_params()
        params.add_index(field_name="vector", **index)
        client.create_collection("bench", schema=schema, index_params=params, consistency_level="Session")
        start = time.perf_counter()
        for i in range(0, size, 5000):
            client.insert("bench", [{"id": j, "vector": vectors[j].tolist()} for j in range(i, min(size, i + 5000))])
        client.flush("bench")
        written = time.perf_counter() - start
        client.search("bench", data=[probes[0]], limit=5, search_params={"params": search})  # loads the segments
        times = []
        for probe in probes:
            t0 = time.perf_counter()
            client.search("bench", data=[probe], limit=5, search_params={"params": search})
            times.append(1000 * (time.perf_counter() - t0))
        reported = client.describe_index("bench", "vector").get("index_type", "?")
        client.close()
    times.sort()
    return written, times[len(times) // 2], times[0], reported


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=30)
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} CPUs, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("| index | N | write + flush (s) | search p50 (ms) | search min (ms) | reported |")
    print("|---|---:|---:|---:|---:|---|")
    for name, (index, search) in INDEXES.items():
        try:
            written, p50, fastest, reported = measure(args.size, args.queries, index, search)
        except Exception as exc:  # an index type this Milvus Lite refuses: say so and go on
            print(f"| {name} | {args.size:,} | failed: {type(exc).__name__}: {exc} | | | |")
            continue
        print(f"| {name} | {args.size:,} | {written:.1f} | {p50:.1f} | {fastest:.1f} | {reported} |", flush=True)


if __name__ == "__main__":
    main()
