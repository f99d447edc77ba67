"""Store benchmark: ingest speed, query latency at 10k/100k nodes (Qdrant Edge vs qdrant-client local
mode, same run) with and without BM25 fusion, the share of ingest time spent outside the model, int8 recall,
and peak RSS.

Real nodes come from real manual pages encoded by the default encoder (through the eval states
cache, so a rerun does not re-encode); they are replicated with small noise to the target sizes.
Query encoding is excluded from latencies (queries are encoded once, then ``search_encoded``).

    python benchmarks/store_bench.py                       # writes benchmarks/results/store_bench.md
    python benchmarks/store_bench.py --sizes 10000 --local-max 10000 --overhead-docs 50   # quicker
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import re
import resource
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from lmk_rag.encoder import LandmarkEncoder
from lmk_rag.eval import encode_states_cached, load_beir, subsample
from lmk_rag.research import group_chunks, user_cache_dir
from lmk_rag.store import EncodedQuery, LandmarkStore, NodeRecord, SearchOptions, StorageOptions

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
CACHE = user_cache_dir("eval")
OUT = Path(__file__).resolve().parent / "results" / "store_bench.md"


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far, in MiB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


#: Where a run's real nodes come from: needle haystacks (a store whose rerank is chunk MaxSim alone) or whole Perl
#: pages (one that blends in the document cosine, a second scorer in the Query API call:
#: ``LandmarkStore.document_weight``).
PAGES = {"manpages-needle/L2048": DATA / "manpages-needle" / "L2048",
         "perldoc-longdoc": Path(__file__).resolve().parent / "data" / "perldoc-longdoc"}


def real_nodes(encoder: LandmarkEncoder, n_docs: int, pages: str) -> tuple[list[list[NodeRecord]], list[str]]:
    """Nodes of ``n_docs`` real pages of a set (:data:`PAGES`) and its real query texts."""
    data = subsample(load_beir(PAGES[pages]), n_docs, n_docs, 0)
    result = encode_states_cached(encoder, data.doc_texts, CACHE)
    docs = []
    for index, (text, encoded) in enumerate(zip(data.doc_texts, encoder.pool(result.states))):
        docs.append([
            NodeRecord(f"{index}#{n.index}", str(index), text[n.span[0]:n.span[1]], n.span, n.vector, n.chunk_vectors,
                       chunk_spans=tuple(encoded.spans[n.chunk_range[0] : n.chunk_range[1]]))
            for n in group_chunks(encoded, 256)
        ])
    return docs, list(data.query_texts)


def replicated(docs: list[list[NodeRecord]], n_nodes: int, seed: int = 0) -> Iterator[tuple[str, list[NodeRecord]]]:
    """Copies of the real documents with small Gaussian noise until ``n_nodes`` nodes are yielded."""
    rng = np.random.default_rng(seed)
    made, copy = 0, 0
    while made < n_nodes:
        for records in docs:
            if made >= n_nodes:
                return
            doc_id = f"{records[0].doc_id}~{copy}"
            out = []
            for r in records[: n_nodes - made]:
                chunks = r.chunk_vectors
                if copy:
                    chunks = chunks + rng.normal(0, 0.02, chunks.shape).astype(np.float32)
                chunks = chunks / np.linalg.norm(chunks, axis=1, keepdims=True)
                vector = chunks.mean(0)
                out.append(NodeRecord(f"{doc_id}#{r.node_id.split('#')[1]}", doc_id, r.text, r.span,
                                      vector / np.linalg.norm(vector), chunks, chunk_spans=r.chunk_spans))
            made += len(out)
            yield doc_id, out
        copy += 1


def build(store: LandmarkStore, docs: list[list[NodeRecord]], n_nodes: int) -> dict[str, float]:
    """Write ``n_nodes`` replicated nodes, then build the index; return timings."""
    start = time.perf_counter()
    n_docs = 0

    def count(ids: list[str]) -> None:
        nonlocal n_docs
        n_docs += len(ids)

    store.upsert_encoded_documents(replicated(docs, n_nodes), document_batch_size=64, on_ack=count)
    write_s = time.perf_counter() - start
    start = time.perf_counter()
    store.optimize()
    return {"write_s": write_s, "docs": n_docs, "optimize_s": time.perf_counter() - start}


#: The timed search modes: name -> (rerank, alpha, whether the query text goes along for BM25).
MODES = {
    "fused": ("chunks", None, True),  # the product: MaxSim and BM25 fused (the store's alpha)
    "alpha1": ("chunks", 1.0, True),  # BM25 widens the prefetch, MaxSim alone ranks (the store before fusion)
    "dense": ("chunks", 1.0, False),  # no BM25 at all: dense prefetch, MaxSim rerank
    "norerank": ("node", None, True),  # node-vector cosine fused with BM25
}


def latencies(store: LandmarkStore, queries: list, texts: list[str], mode: str,
              repeats: int) -> tuple[float, float, list]:
    """p50 and p95 (ms) of ``search_encoded`` in one of :data:`MODES`, and the last results."""
    rerank, alpha, with_text = MODES[mode]
    times, results = [], []
    for _ in range(repeats):
        results = []
        for query, text in zip(queries, texts):
            start = time.perf_counter()
            encoded = EncodedQuery.of(query, text if with_text else None)
            results.append(store.search_encoded(encoded, k=10, rerank=rerank, one_per_document=False, alpha=alpha))
            times.append((time.perf_counter() - start) * 1000)
    return float(np.percentile(times, 50)), float(np.percentile(times, 95)), results


def evidence_cost(store: LandmarkStore, queries: list, texts: list[str], repeats: int) -> dict[str, float]:
    """Fused p50 and p95 (ms) with each hit's evidence (the product) and without it (the hits' vectors neither read
    nor scored, as before evidence), each query timed both ways in turn so that both see the same machine."""
    on, off = [], []
    reader = store._reads  # the store's Reader: evidence off is its search without a vector to find it in
    for _ in range(repeats):
        for query, text in zip(queries, texts):
            for times in (on, off) if len(on) % 2 == 0 else (off, on):
                if times is off:
                    reader._matched_vector = lambda scorer: None
                start = time.perf_counter()
                store.search_encoded(EncodedQuery.of(query, text), k=10, rerank="chunks", one_per_document=False)
                times.append((time.perf_counter() - start) * 1000)
                reader.__dict__.pop("_matched_vector", None)
    return {"evidence_p50": float(np.percentile(on, 50)), "evidence_p95": float(np.percentile(on, 95)),
            "noevidence_p50": float(np.percentile(off, 50)), "noevidence_p95": float(np.percentile(off, 95))}


def overhead(encoder: LandmarkEncoder, n_docs: int) -> dict[str, float]:
    """Ingest real short pages end to end; time spent inside the model vs everything else."""
    data = load_beir(DATA / "manpages-short")
    texts = data.doc_texts[:n_docs]
    model_s = 0.0
    original = encoder.encode_documents

    def timed(texts_: list[str], *args: Any, **kwargs: Any):  # a stopwatch around the real encoder
        nonlocal model_s
        start = time.perf_counter()
        out = original(texts_, *args, **kwargs)
        model_s += time.perf_counter() - start
        return out

    folder = tempfile.mkdtemp(prefix="lmk_bench_overhead_")
    try:
        encoder.encode_documents = timed  # type: ignore[method-assign]
        with LandmarkStore(folder, encoder=encoder) as store:
            start = time.perf_counter()
            nodes = store.upsert_documents([(str(i), t, None) for i, t in enumerate(texts)], document_batch_size=16,
                                        show_progress_bar=False)
            total = time.perf_counter() - start
    finally:
        encoder.encode_documents = original  # type: ignore[method-assign]
        shutil.rmtree(folder, ignore_errors=True)
    return {"docs": n_docs, "nodes": nodes, "total_s": total, "model_s": model_s,
            "share_outside": (total - model_s) / total, "docs_per_s": n_docs / total}


def main() -> None:
    """Run the benchmark and write the markdown report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--local-max", type=int, default=10_000, help="largest size run on qdrant-client local mode")
    parser.add_argument("--real-docs", type=int, default=60, help="real pages encoded (cached) for nodes")
    parser.add_argument("--pages", choices=sorted(PAGES), default="manpages-needle/L2048",
                        help="the set whose pages give the nodes")
    parser.add_argument("--overhead-docs", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--local-queries", type=int, default=15, help="queries timed on local mode (it is slow)")
    parser.add_argument("--no-projection", action="store_true", help="encode without the shipped projection")
    parser.add_argument("--no-recall", action="store_true", help="skip the int8 store (recall against float32)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    args.load_at_start = os.getloadavg()[0]
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    started = time.perf_counter()
    encoder = LandmarkEncoder(projection=None) if args.no_projection else LandmarkEncoder()
    docs, query_texts = real_nodes(encoder, args.real_docs, args.pages)
    n_real = sum(len(d) for d in docs)
    queries = encoder.encode_queries(query_texts)
    print(f"real nodes: {n_real} from {len(docs)} pages; queries: {len(queries)}", flush=True)

    rows, recall_rows = [], []
    for size in args.sizes:
        backends = ["edge"] + (["local"] if size <= args.local_max else [])
        reference = None
        for backend in backends:
            folder = tempfile.mkdtemp(prefix=f"lmk_bench_{backend}_")
            kwargs = {"path": folder} if backend == "edge" else {"location": ":memory:"}
            with LandmarkStore(**kwargs, encoder=encoder) as store:
                built = build(store, docs, size)
                row = {"size": size, "backend": store.backend.name, **built,
                       "docs_per_s": built["docs"] / built["write_s"], "document_weight": store.document_weight}
                timed = queries if backend == "edge" else queries[: args.local_queries]
                for mode in MODES:
                    p50, p95, results = latencies(store, timed, query_texts, mode, args.repeats)
                    row[f"{mode}_p50"], row[f"{mode}_p95"] = p50, p95
                    if mode == "dense" and backend == "edge":
                        reference = results
                if backend == "edge":
                    row.update(evidence_cost(store, timed, query_texts, args.repeats))
                row["rss_mb"] = peak_rss_mb()
            if backend == "edge" and row["document_weight"] > 0:  # the same store, without the document request
                with LandmarkStore(folder, encoder=encoder, search=SearchOptions(document_weight=0.0)) as store:
                    row["nodoc_p50"], row["nodoc_p95"], _ = latencies(store, timed, query_texts, "fused", args.repeats)
            rows.append(row)
            print(row, flush=True)
            shutil.rmtree(folder, ignore_errors=True)
        if size == min(args.sizes) and reference is not None and not args.no_recall:
            folder = tempfile.mkdtemp(prefix="lmk_bench_int8_")
            int8 = StorageOptions(quantization="int8")
            with LandmarkStore(folder, encoder=encoder, storage=int8, bm25=False) as store:
                build(store, docs, size)
                p50, p95, results = latencies(store, queries, query_texts, "dense", 1)
            shutil.rmtree(folder, ignore_errors=True)
            overlap = np.mean([len({h.node_id for h in a} & {h.node_id for h in b}) / 10
                               for a, b in zip(reference, results)])
            recall_rows.append({"size": size, "recall@10": float(overlap), "p50": p50, "p95": p95})
            print(recall_rows[-1], flush=True)

    over = overhead(encoder, args.overhead_docs)
    print(over, flush=True)
    write_report(args, rows, recall_rows, over, n_real, len(docs), len(queries), time.perf_counter() - started)


def write_report(args, rows, recall_rows, over, n_real, n_pages, n_queries, wall_s) -> None:
    """Write the markdown report."""
    cpuinfo = Path("/proc/cpuinfo").read_text()
    cpu = next((line.split(":", 1)[1].strip() for line in cpuinfo.splitlines() if line.startswith("model name")),
               platform.processor())
    flags = sorted(set(re.findall(r"\bavx512\w*", cpuinfo))) or ["none"]
    lines = [
        "# Store benchmark (`benchmarks/store_bench.py`)",
        "",
        f"Date: {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC. Machine: {os.cpu_count()} CPU cores ({cpu}), "
        f"load average {args.load_at_start:.1f} when it started; AVX-512 flags: {' '.join(flags)}; "
        f"Python {platform.python_version()}, qdrant-edge-py 0.9.0. "
        f"Whole run: {wall_s / 60:.1f} min.",
        "",
        f"Nodes: {n_real} real nodes (256 tokens) of {n_pages} real pages ({args.pages}, default "
        "encoder; the stores' document weight: "
        + ", ".join(sorted({f"{r['document_weight']:g}" for r in rows}))
        + "), replicated with Gaussian noise (sigma 0.02 per dimension, renormalised) to each size. "
        f"Queries: {n_queries} real query texts (qdrant-client local mode: the first {args.local_queries}), encoded "
        f"once (excluded from latency), each run {args.repeats}x; latency = one `search_encoded` call "
        "(k=10, node level, store defaults: BM25 vectors written), hits with their payloads. "
        "Modes: **fused** = the product (on Edge a plain BM25 search of 100, then one Query API call: chunk MaxSim "
        "over the union of an HNSW node prefetch of 100 and those BM25 nodes by id; on qdrant-client one call "
        "batching the rerank, with a BM25 prefetch of 100 instead, and the plain BM25 search; fused in the store, "
        "ids and scores only, then the payloads of the 10 hits by id, the process being the store's only writer); "
        "**alpha1** = "
        "BM25 widens the prefetch, MaxSim alone ranks (one request); **dense** = no query text, so no BM25 "
        "(dense prefetch, MaxSim rerank); **norerank** = node-vector cosine fused with BM25. Index built "
        "(`optimize`) before querying.",
        "",
        "| nodes | backend | docs written/s | write s | index build s | "
        + " | ".join(f"p50 / p95 ms ({mode})" for mode in MODES) + " | peak RSS MiB |",
        "|---|---|---|---|---|" + "---|" * len(MODES) + "---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['size']:,} | {r['backend']} | {r['docs_per_s']:.0f} | {r['write_s']:.1f} | {r['optimize_s']:.1f} | "
            + " | ".join(f"{r[f'{mode}_p50']:.1f} / {r[f'{mode}_p95']:.1f}" for mode in MODES)
            + f" | {r['rss_mb']:.0f} |"
        )
    for r in (r for r in rows if "nodoc_p50" in r):
        lines += ["", f"Fused on the same {r['size']:,}-node store with `SearchOptions(document_weight=0)` (no "
                      f"document request): {r['nodoc_p50']:.1f} / {r['nodoc_p95']:.1f} ms, against "
                      f"{r['fused_p50']:.1f} / {r['fused_p95']:.1f} ms with it (weight {r['document_weight']:.2f})."]
    for r in (r for r in rows if "evidence_p50" in r):
        lines += ["", f"Evidence (each hit's matched chunk: the hits' chunk vectors read with their payloads, their "
                      f"MaxSim argmax) on the same {r['size']:,}-node Edge store, each query timed with and without it "
                      f"in turn (fused): {r['evidence_p50']:.2f} / {r['evidence_p95']:.2f} ms with it, "
                      f"{r['noevidence_p50']:.2f} / {r['noevidence_p95']:.2f} ms without: p50 "
                      f"{r['evidence_p50'] - r['noevidence_p50']:+.2f} ms."]
    if recall_rows:
        lines += ["", "int8 scalar quantization of the multivectors (Edge), overlap of the top-10 nodes with float32:",
                  "", "| nodes | recall@10 vs float32 | p50 ms | p95 ms |", "|---|---|---|---|"]
        lines += [f"| {r['size']:,} | {r['recall@10']:.3f} | {r['p50']:.1f} | {r['p95']:.1f} |" for r in recall_rows]
    lines += [
        "",
        f"End-to-end ingest of {over['docs']} real short pages (manpages-short, {over['nodes']} nodes, "
        f"`upsert_documents`, batch 16, store defaults: BM25 on): {over['total_s']:.1f} s = "
        f"{over['docs_per_s']:.2f} docs/s; "
        f"inside the model {over['model_s']:.1f} s; **share outside the model {over['share_outside']:.1%}** "
        "(tokenising, pooling, node cutting, writing and flushing).",
        "",
        f"Peak RSS of the whole run: {peak_rss_mb():.0f} MiB (includes the model, numpy copies of the nodes "
        "and qdrant-client local mode's in-memory collection).",
    ]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
