"""Scale benchmark: Qdrant Edge stores of 100k, 300k and 1M nodes, float32 in RAM against compressed storage
(quantized copies pinned in RAM, originals on disk), each measured against an exact reference.

Real nodes come from every dev corpus whose default-encoder states are in the eval cache (manual pages and
perldoc; a set that is not cached is skipped and named in the report, since encoding one takes up to an hour),
replicated with per-copy Gaussian noise (sigma 0.02 per dimension, renormalised) as far as each size needs.

For each size and storage it reports nodes/s written, ``optimize()`` time, size on disk, and, from a fresh
process that opens the built store and runs the queries (query vectors encoded once beforehand, so no model is
loaded there): query p50/p95 fused and dense-only, the top-10 overlap with the exact reference (the same store
searched with ``exact=True``: brute force over the float32 originals, no HNSW, no quantized copies), counted per
original node (a copy of the right node counts as the right node), and that process's anonymous and file-backed
resident memory (memory-mapped vectors count in RSS as file-backed pages). Each finished run is appended to the
report's ``.jsonl`` file and the markdown table is rebuilt from all of them (delete the file to start over).

    python benchmarks/scale_bench.py              # adds to benchmarks/results/scale_bench.jsonl, rewrites its .md
    python benchmarks/scale_bench.py --runs 20000:float32 20000:int8-disk --out /tmp/s.md            # quicker
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
from store_bench import replicated

from lmk_rag.encoder import LandmarkEncoder
from lmk_rag.eval import cache_path, encode_states_cached, load_beir, states_key
from lmk_rag.research import group_chunks, shard_bytes, user_cache_dir
from lmk_rag.store import EncodedQuery, LandmarkStore, NodeRecord, SearchOptions, StorageOptions

ROOT = Path(__file__).resolve().parent
DATA = ROOT.parents[1] / "shared" / "data"
SETS = {
    "manpages-longdoc": DATA / "manpages-longdoc",
    "manpages-short": DATA / "manpages-short",
    "manpages-needle/L512": DATA / "manpages-needle" / "L512",
    "manpages-needle/L2048": DATA / "manpages-needle" / "L2048",
    "manpages-needle/L8192": DATA / "manpages-needle" / "L8192",
    "manpages-needle/L32768": DATA / "manpages-needle" / "L32768",
    "perldoc-longdoc": ROOT / "data" / "perldoc-longdoc",
    "perldoc-ref": ROOT / "data" / "perldoc-ref",
}
CACHE = user_cache_dir("eval")
OUT = ROOT / "results" / "scale_bench.md"

#: The storages compared: name -> LandmarkStore arguments of a new store (each given in full, so that no run
#: depends on the defaults), and the search's oversampling.
STORAGES: dict[str, tuple[dict[str, Any], float | None]] = {
    # Qdrant's defaults: no quantized copies, every vector memory-mapped and warmed into RAM, the HNSW graph in RAM
    "float32": ({"quantization": "none", "node_quantization": "none", "on_disk": False}, None),
    "int8-disk": ({"quantization": "int8", "node_quantization": "int8", "on_disk": True}, 2.0),
    "turbo4-disk": ({"quantization": "turbo4", "node_quantization": "int8", "on_disk": True}, 2.0),
    "binary-disk": ({"quantization": "binary", "node_quantization": "int8", "on_disk": True}, 2.0),
    "int8-disk-hnsw": ({"quantization": "int8", "node_quantization": "int8", "on_disk": True,
                        "hnsw_on_disk": True}, 2.0),
    # the chunks rerank at most 2 x 100 candidates, all rescored with the originals: a quantized copy of them only
    # adds RAM, so only the node vectors (which HNSW searches) have one
    "node-int8-disk": ({"quantization": "none", "node_quantization": "int8", "on_disk": True}, 2.0),
}


def real_corpus(encoder: LandmarkEncoder, per_set_queries: int) -> tuple[list[list[NodeRecord]], list[str], dict]:
    """Nodes of every cached dev corpus, a sample of each set's query texts, and which sets were used."""
    docs: list[list[NodeRecord]] = []
    queries: list[str] = []
    used: dict[str, Any] = {}
    for name, folder in SETS.items():
        data = load_beir(folder)
        if not cache_path(CACHE, states_key(encoder), data.doc_texts).exists():
            used[name] = "not cached"
            continue
        result = encode_states_cached(encoder, data.doc_texts, CACHE)
        n_nodes = 0
        for index, (text, encoded) in enumerate(zip(data.doc_texts, encoder.pool(result.states))):
            doc_id = f"{name}:{index}"
            nodes = [NodeRecord(f"{doc_id}#{n.index}", doc_id, text[n.span[0]:n.span[1]], n.span, n.vector,
                                n.chunk_vectors) for n in group_chunks(encoded, 256)]
            docs.append(nodes)
            n_nodes += len(nodes)
        rng = np.random.default_rng(0)
        picked = rng.choice(len(data.query_texts), min(per_set_queries, len(data.query_texts)), replace=False)
        queries += [data.query_texts[i] for i in sorted(picked)]
        used[name] = {"docs": len(data.doc_texts), "nodes": n_nodes}
        print(f"{name}: {len(data.doc_texts)} docs, {n_nodes} nodes", flush=True)
    return docs, queries, used


def build(folder: Path, encoder: LandmarkEncoder, docs: list[list[NodeRecord]], size: int,
          storage: dict[str, Any]) -> dict[str, float]:
    """Create a store, write ``size`` replicated nodes and build its index; timings and the size on disk."""
    load = os.getloadavg()[0]
    with LandmarkStore(folder, encoder=encoder, storage=StorageOptions(**storage)) as store:
        start = time.perf_counter()
        written = store.upsert_encoded_documents(replicated(docs, size), document_batch_size=64)
        write_s = time.perf_counter() - start
        start = time.perf_counter()
        store.optimize()
        optimize_s = time.perf_counter() - start
    return {"nodes": written, "write_s": write_s, "nodes_per_s": written / write_s, "optimize_s": optimize_s,
            "disk_gb": shard_bytes(folder)[0] / 1e9, "load_build": load}


def original(node_id: str) -> str:
    """The real node a copy was made from (``doc~copy#n`` -> ``doc#n``)."""
    doc, _, index = node_id.rpartition("#")
    return f"{doc.rsplit('~', 1)[0]}#{index}"


#: The timed searches: name -> (whether the query text goes along, alpha). ``bm25`` (alpha 0: a plain BM25 search
#: of the whole store, what the fused search runs twice: as a prefetch and for the scores) shows what bounds it.
TIMED = {"fused": (True, None), "dense": (False, None), "bm25": (True, 0.0)}


def memory() -> dict[str, float]:
    """This process's resident memory now (anonymous, file-backed) and at its peak so far, in GiB."""
    status = Path("/proc/self/status").read_text()
    return {key: int(re.search(rf"^{key}:\s+(\d+) kB", status, re.M).group(1)) / 2**20
            for key in ("RssAnon", "RssFile", "VmHWM")}


def probe(folder: Path, queries_file: Path, oversampling: float | None, repeats: int) -> dict[str, float]:
    """In this fresh process: open the built store, time the queries and read the resident memory, then measure
    the same queries against the exact reference (after the memory was read: brute force is not the search)."""
    arrays = np.load(queries_file, allow_pickle=False)
    texts = json.loads(str(arrays["texts"]))
    queries = [SimpleNamespace(vector=arrays[f"v{i}"], chunk_vectors=arrays[f"c{i}"]) for i in range(len(texts))]
    row: dict[str, float] = {"load_query": os.getloadavg()[0]}
    with LandmarkStore(folder, read_only=True, search=SearchOptions(oversampling=oversampling)) as store:
        row["open_RssAnon"] = memory()["RssAnon"]
        hits: dict[str, list[list[str]]] = {}
        for mode, (with_text, alpha) in TIMED.items():
            times = []
            faults = resource.getrusage(resource.RUSAGE_SELF).ru_majflt
            for _ in range(repeats):
                hits[mode] = []
                for query, text in zip(queries, texts):
                    start = time.perf_counter()
                    found = store.search_encoded(EncodedQuery.of(query, text if with_text else None), k=10,
                                                 one_per_document=False, alpha=alpha)
                    times.append((time.perf_counter() - start) * 1000)
                    hits[mode].append([h.node_id for h in found])
            row[f"{mode}_p50"], row[f"{mode}_p95"] = np.percentile(times, 50), np.percentile(times, 95)
            row[f"{mode}_majflt"] = (resource.getrusage(resource.RUSAGE_SELF).ru_majflt - faults) / len(times)
        row.update(memory())
        with LandmarkStore(folder, read_only=True, search=SearchOptions(exact=True)) as exact:
            for mode, with_text in (("fused", True), ("dense", False)):
                overlaps = []
                for query, text, got in zip(queries, texts, hits[mode]):
                    want = {original(h.node_id) for h in exact.search_encoded(
                        EncodedQuery.of(query, text if with_text else None), k=10, one_per_document=False)}
                    overlaps.append(len({original(node) for node in got} & want) / len(want))
                row[f"{mode}_overlap"] = float(np.mean(overlaps))
    return row


def run_probe(folder: Path, queries_file: Path, oversampling: float | None, repeats: int) -> dict[str, float]:
    """:func:`probe` in a fresh Python process."""
    command = [sys.executable, __file__, "--probe", str(folder), "--queries-file", str(queries_file),
               "--repeats", str(repeats)] + ([] if oversampling is None else ["--oversampling", str(oversampling)])
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"probe failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def save_queries(encoder: LandmarkEncoder, texts: list[str], path: Path) -> None:
    """Encode the query texts once and save their vectors for the probes."""
    encoded = encoder.encode_queries(texts)
    arrays = {"texts": np.array(json.dumps(texts))}
    for i, query in enumerate(encoded):
        arrays[f"v{i}"], arrays[f"c{i}"] = query.vector, query.chunk_vectors
    np.savez(path, **arrays)


#: The default runs, in order: every storage at 100k, the float32 baseline and the chosen storage at 300k and 1M.
DEFAULT_RUNS = [f"100000:{name}" for name in STORAGES] + [
    f"{size}:{name}" for size in (300_000, 1_000_000) for name in ("node-int8-disk", "float32")]


def parse_run(run: str) -> tuple[int, str]:
    """``"SIZE:STORAGE"`` -> (size, storage)."""
    size, _, name = run.partition(":")
    if name not in STORAGES or not size.isdigit():
        raise argparse.ArgumentTypeError(f"a run is SIZE:STORAGE with a storage of {list(STORAGES)}, got {run!r}")
    return int(size), name


def main() -> None:
    """Build, probe and report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=parse_run, nargs="+", default=[parse_run(run) for run in DEFAULT_RUNS],
                        help=f"SIZE:STORAGE runs in order (default: {' '.join(DEFAULT_RUNS)})")
    parser.add_argument("--queries", type=int, default=20, help="queries sampled from each set")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--folder", type=Path, default=None, help="where the stores are built (default: a temp dir)")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--keep", action="store_true", help="keep the built stores (under --folder) for later probes")
    parser.add_argument("--probe", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--queries-file", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--oversampling", type=float, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.probe is not None:
        print(json.dumps(probe(args.probe, args.queries_file, args.oversampling, args.repeats)))
        return
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    started = time.perf_counter()
    encoder = LandmarkEncoder()
    docs, texts, used = real_corpus(encoder, args.queries)
    n_real = sum(len(d) for d in docs)
    chunk_vectors = sum(len(r.chunk_vectors) for d in docs for r in d) / n_real
    work = Path(tempfile.mkdtemp(prefix="lmk_scale_", dir=args.folder))
    queries_file = work / "queries.npz"
    save_queries(encoder, texts, queries_file)
    finished = args.out.with_suffix(".jsonl")  # every finished run, this invocation's and earlier ones'
    finished.parent.mkdir(parents=True, exist_ok=True)
    for size, name in args.runs:
        storage, oversampling = STORAGES[name]
        folder = work / f"{name}-{size}"
        try:
            row = {"size": size, "storage": name, "replication": size / n_real, "oversampling": oversampling,
                   **build(folder, encoder, docs, size, storage)}
            print(row, flush=True)
            row.update(run_probe(folder, queries_file, oversampling, args.repeats))
        except (OSError, RuntimeError, MemoryError) as error:
            row = {"size": size, "storage": name, "skipped": f"{type(error).__name__}: {str(error)[-300:]}"}
        finally:
            if not args.keep:
                shutil.rmtree(folder, ignore_errors=True)
        print(row, flush=True)
        with finished.open("a") as handle:
            handle.write(json.dumps(row) + "\n")
        rows = [json.loads(line) for line in finished.read_text().splitlines()]
        write_report(args, rows, used, n_real, chunk_vectors, len(texts), time.perf_counter() - started)
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


def write_report(args: argparse.Namespace, rows: list[dict[str, Any]], used: dict[str, Any], n_real: int,
                 chunk_vectors: float, n_queries: int, wall_s: float) -> None:
    """Write the markdown report of every finished run (rewritten after each, so a long run keeps its rows)."""
    cpuinfo = Path("/proc/cpuinfo").read_text()
    cpu = next((line.split(":", 1)[1].strip() for line in cpuinfo.splitlines() if line.startswith("model name")),
               platform.processor())
    flags = sorted(set(re.findall(r"\bavx512\w*", cpuinfo))) or ["none"]
    sets = "; ".join(f"{name}: {v['docs']} docs, {v['nodes']:,} nodes" if isinstance(v, dict) else f"{name}: {v}"
                     for name, v in used.items())
    lines = [
        "# Scale benchmark (`benchmarks/scale_bench.py`)",
        "",
        f"Date: {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC. Machine: {os.cpu_count()} CPU cores ({cpu}), "
        f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB RAM; AVX-512 flags: "
        f"{' '.join(flags)}; Python {platform.python_version()}, qdrant-edge-py 0.9.0. The last invocation so far: "
        f"{wall_s / 60:.0f} min.",
        "",
        f"Real nodes: {n_real:,} (256 tokens, {chunk_vectors:.1f} chunk vectors each on average) from {sets}. "
        f"Queries: {n_queries} real query texts ({args.queries} per set used), encoded once; each timed "
        f"{args.repeats}x in a fresh process that opened the built store (k=10, node level). **fused** = the product "
        "(a plain BM25 search of 100, then one Query API call: chunk MaxSim over an HNSW node prefetch of 100 and "
        "those BM25 nodes by id, fused with BM25; until 2026-12-02 one call that ran the BM25 search twice, as a "
        "prefetch and for the scores); **dense** = no query text (HNSW prefetch, MaxSim rerank); **bm25** = alpha "
        "0, a plain BM25 search of the whole store (not timed in the first runs). **overlap** = top-10 overlap with "
        "the exact reference (the same store searched with `exact=True`), per original node. Memory of that process, "
        "in GiB: RssAnon (heap: what must fit in RAM) right after opening the store and after the timed queries, "
        "RssFile (memory-mapped files in the page cache, which the OS can evict) after them, and its peak RSS (VmHWM) "
        "up to then (the exact reference runs afterwards). **faults** = major page faults per fused search (pages "
        "read from disk: what the page cache did not hold; not counted before 2026-12-02). Load: the 1-minute load "
        "average when the build and the queries started.",
        "",
        "| nodes | storage | replication | nodes/s written | optimize s | disk GB | p50 / p95 ms fused | "
        "p50 / p95 ms dense | p50 ms bm25 | overlap fused | overlap dense | RssAnon open / searched | RssFile | "
        "peak RSS | faults | load build / query |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        bm25 = f"{r['bm25_p50']:.1f}" if "bm25_p50" in r else "-"
        faults = f"{r['fused_majflt']:.1f}" if "fused_majflt" in r else "-"
        if "skipped" in r:
            lines.append(f"| {r['size']:,} | {r['storage']} | not run: {r['skipped']} |" + " |" * 13)
            continue
        lines.append(
            f"| {r['size']:,} | {r['storage']} | {r['replication']:.1f}x | {r['nodes_per_s']:,.0f} | "
            f"{r['optimize_s']:.0f} | {r['disk_gb']:.1f} | {r['fused_p50']:.1f} / {r['fused_p95']:.1f} | "
            f"{r['dense_p50']:.1f} / {r['dense_p95']:.1f} | {bm25} | {r['fused_overlap']:.3f} | "
            f"{r['dense_overlap']:.3f} | "
            f"{r['open_RssAnon']:.2f} / {r['RssAnon']:.2f} | {r['RssFile']:.2f} | {r['VmHWM']:.2f} | {faults} | "
            f"{r['load_build']:.1f} / {r['load_query']:.1f} |"
        )
    lines += ["", "Storages: " + "; ".join(
        f"**{name}** = `{spec or 'defaults'}`" + (f", oversampling {over}" if over else "")
        for name, (spec, over) in STORAGES.items()) + "."]
    args.out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
