"""A torch float32 store's queries on its ONNX float32 twin: the cosine of its query vectors to torch's, the hits.

Encodes every query of a BEIR set (default: the shared manpages-short, 500 queries) with the default encoder on torch
and with its twin (the same settings, ``backend="onnx"``, what a read-only store encodes queries with,
docs/store.md), and searches a store (default: ``demo_store``, written by ``make demo``) with both: a writable handle
(torch) and a read-only one (the twin). Writes ``benchmarks/results/query_twin.md``::

    python benchmarks/query_twin.py [--queries FILE] [--store DIR] [-k 10]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
from pathlib import Path

import numpy as np

from lmk_rag.store import LandmarkStore

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "benchmarks" / "results" / "query_twin.md"
QUERIES = REPO.parent / "shared" / "data" / "manpages-short" / "queries.jsonl"


def machine() -> str:
    """CPU model, cores and the vector flags that decide the kernels."""
    info = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    model = next((line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("model name")),
                 platform.processor() or platform.machine())
    flags = set(next((line.split(":", 1)[1].split() for line in info.splitlines() if line.startswith("flags")), []))
    present = ", ".join(f"{flag} {'yes' if flag in flags else 'no'}" for flag in ("avx2", "avx512f", "avx512_vnni"))
    return f"{model}, {os.cpu_count()} cores; {present}"


def main() -> None:
    """Encode, search, compare and write the report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=Path, default=QUERIES)
    parser.add_argument("--store", type=Path, default=REPO / "demo_store")
    parser.add_argument("-k", type=int, default=10)
    args = parser.parse_args()
    queries = [json.loads(line)["text"] for line in args.queries.read_text().splitlines() if line.strip()]
    started, load_start = dt.datetime.now(dt.timezone.utc), os.getloadavg()
    with LandmarkStore(args.store) as store:  # writable: the recorded torch encoder
        torch_encoder = store.encoder
        ours = [torch_encoder.encode_queries(query) for query in queries]
        torch_hits = [[hit.node_id for hit in store.search(query, k=args.k)] for query in queries]
    with LandmarkStore(args.store, read_only=True) as store:  # read-only: the ONNX float32 twin
        twin = store.encoder
        theirs = [twin.encode_queries(query) for query in queries]
        twin_hits = [[hit.node_id for hit in store.search(query, k=args.k)] for query in queries]
    vectors = np.array([float(a.vector @ b.vector) for a, b in zip(ours, theirs)])
    chunks = np.concatenate([np.sum(a.chunk_vectors * b.chunk_vectors, axis=1) for a, b in zip(ours, theirs)])
    same_spans = sum(a.spans == b.spans for a, b in zip(ours, theirs))
    same_hits = sum(a == b for a, b in zip(torch_hits, twin_hits))
    same_sets = sum(set(a) == set(b) for a, b in zip(torch_hits, twin_hits))
    lines = [
        "# A torch float32 store's queries on its ONNX float32 twin (`benchmarks/query_twin.py`)", "",
        f"Date: {started:%Y-%m-%d %H:%M} UTC. Machine: {machine()}; load average at the start "
        f"{', '.join(f'{v:.2f}' for v in load_start)}.", "",
        f"Queries: {len(queries)} ({args.queries.parent.name}/{args.queries.name}). Store: {args.store.name} "
        f"(searched with `k={args.k}`). Torch encoder: "
        f"`{torch_encoder.settings}`; twin: `{twin.settings}`, fingerprint {twin.fingerprint} (on torch: "
        f"{twin.fingerprint_with('torch', 'float32')}, the store's {torch_encoder.fingerprint}).", "",
        "| measure | value |", "|---|---|",
        f"| query vector cosine, min / mean | {vectors.min():.7f} / {vectors.mean():.7f} |",
        f"| chunk vector cosine, min / mean ({len(chunks)} chunks) | {chunks.min():.7f} / {chunks.mean():.7f} |",
        f"| queries with the same chunk spans | {same_spans} / {len(queries)} |",
        f"| queries with the same {args.k} hits in the same order | {same_hits} / {len(queries)} |",
        f"| queries with the same {args.k} hits in any order | {same_sets} / {len(queries)} |",
    ]
    OUT.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
