"""Payload benchmark: the cost of a fused search returning the payloads its hits need with every scored point (the
store's one engine call), against asking three keys and reading the final k's payloads in a second call, and
against the search before issue 26 (three keys, a look-up of the candidates' markers, a look-up of the hits'
payloads), all on one Qdrant Edge store (docs/decisions.md, "store: one engine call per search").

The nodes of ``benchmarks/store_bench.py`` (real pages, replicated to the size), planned by the store's own planner
at the product's candidate counts (prefetch 100, BM25 prefetch 100, a plain BM25 search of 100); the variants run
one after the other for every query, so load on the machine falls on all alike.

    python benchmarks/payload_bench.py --size 100000      # writes benchmarks/results/payload_bench.md
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
from store_bench import build, real_nodes

from lmk_rag.encoder import LandmarkEncoder
from lmk_rag.research import (
    HIT_KEYS,
    QueryVectors,
    SearchDefaults,
    VectorSpec,
    best_hits,
    fuse,
    latest,
    markers,
    nodes_filter,
    plan_search,
    shown_filter,
)
from lmk_rag.store import EncodedQuery, LandmarkStore, SearchOptions

OUT = Path(__file__).resolve().parent / "results" / "payload_bench.md"
#: The keys the store asked for before issue 26 (its payloads came from a second call).
LIGHT_KEYS = ["doc_id", "node_id", "version"]


def main() -> None:
    """Build the store, time both variants, write the report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    load = os.getloadavg()[0]
    encoder = LandmarkEncoder()
    docs, texts = real_nodes(encoder, 60)
    queries = encoder.encode_queries(texts)
    folder = tempfile.mkdtemp(prefix="lmk_bench_payload_")
    times: dict[str, list[float]] = {"one call, payloads with every point (this store)": [],
                                     "3 keys only (the query alone)": [],
                                     "3 keys, then a retrieve of the final 10": [],
                                     "before issue 26: 3 keys, markers look-up, payloads look-up": []}
    candidates, sizes = [], []
    try:
        with LandmarkStore(folder, encoder=encoder) as store:
            build(store, docs, args.size)
            vectors = QueryVectors(VectorSpec.from_settings(store.settings, store.where), None)
            defaults = SearchDefaults(store.where, store.bm25, store.alpha, store.default_rerank,  # no document weight
                                      SearchOptions(prefetch_limit=100), lambda: 0.0)
            backend = store.backend
            for _ in range(args.repeats):
                for query, text in zip(queries, texts):
                    for variant in ("now", "light", "before"):
                        keys = HIT_KEYS if variant == "now" else LIGHT_KEYS
                        shown = nodes_filter if variant == "before" else shown_filter
                        planned = plan_search(defaults, alpha=store.alpha, one_per_document=False, text=text)
                        plan = planned.request(np.asarray(query.vector).tolist(),
                                               vectors.scorer(planned.rerank, EncodedQuery.of(query, text)),
                                               vectors.sparse_query(text), shown(backend, None), keys)
                        start = time.perf_counter()
                        results = backend.query(plan)
                        queried = time.perf_counter()
                        if variant == "now":
                            best = best_hits(fuse(plan, latest(results)), 10, False)
                            times["one call, payloads with every point (this store)"].append(
                                (time.perf_counter() - start) * 1000)
                            points = {p.id: p for points in results for p in points}
                            candidates.append(len(points))
                            sizes += [len(json.dumps(p.payload)) for p in points.values()]
                        elif variant == "light":
                            best = best_hits(fuse(plan, latest(results)), 10, False)
                            backend.retrieve([point.id for point in best], False)
                            times["3 keys only (the query alone)"].append((queried - start) * 1000)
                            times["3 keys, then a retrieve of the final 10"].append(
                                (time.perf_counter() - start) * 1000)
                        else:  # the reader before issue 26, with the modules of today
                            doc_ids = sorted({p.payload["doc_id"] for points in results for p in points})
                            found = markers(backend, doc_ids, page=max(1, len(doc_ids)))
                            current = {doc_id: marker.get("version") for doc_id, marker in found.items()}
                            kept = [[p for p in points if current.get(p.payload["doc_id"]) == p.payload["version"]]
                                    for points in results]
                            best = best_hits(fuse(plan, kept), 10, False)
                            backend.retrieve([point.id for point in best], False)
                            times["before issue 26: 3 keys, markers look-up, payloads look-up"].append(
                                (time.perf_counter() - start) * 1000)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    lines = [
        "# Payload benchmark (`benchmarks/payload_bench.py`)",
        "",
        f"Date: {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC; {os.cpu_count()} CPU cores, load average "
        f"{load:.1f} when it started. {args.size:,} nodes (Qdrant Edge, index built), {len(queries)} real queries x "
        f"{args.repeats}, fused search (k=10, node level): {np.mean(candidates):.0f} distinct candidates per search, "
        f"their payloads {np.mean(sizes):.0f} bytes each as JSON ({np.mean(candidates) * np.mean(sizes) / 1024:.0f} "
        "KiB per search).",
        "",
        "| variant | p50 ms | p95 ms |",
        "|---|---|---|",
        *[f"| {name} | {np.percentile(v, 50):.2f} | {np.percentile(v, 95):.2f} |" for name, v in times.items()],
    ]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
