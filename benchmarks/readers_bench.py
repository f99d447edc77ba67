"""Readers beside a writer, across processes: 1 writer and 4 reader processes on one local Edge store for 60 s.

The writer commits a batch of pre-encoded documents every ``--write-every`` seconds (and a ``probe`` document
naming the commit); each reader searches a pre-encoded query every ``--search-every`` seconds, which takes a new
copy of the store when the writer committed since (see docs/store.md, "Concurrency"), then reads the probe. No
encoder runs: vectors are random unit vectors of MiniLM's size (384), the store is made with a stand-in encoder's
settings. Measured: the refresh delay (a commit's ack to the first search of each reader that sees it), each
refresh's cost (copy and open: seconds, bytes copied, per GB), the search latency with refreshes, and the writer's
commit latency beside readers against a writer alone.

    python benchmarks/readers_bench.py                     # writes benchmarks/results/readers_bench.md
    python benchmarks/readers_bench.py --seconds 10 --docs 200 --out /tmp/quick.md   # quicker
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import multiprocessing
import os
import platform
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from lmk_rag import EncodedText
from lmk_rag.research import shard_bytes
from lmk_rag.store import LandmarkStore, NodeRecord

OUT = Path(__file__).resolve().parent / "results" / "readers_bench.md"
DIM = 384
NODES_PER_DOC = 8
CHUNKS_PER_NODE = 4


class StandIn:
    """The settings a store records of its encoder (no model: the vectors are made here)."""

    dim = DIM
    fingerprint = "readers-bench-random-384"
    settings: ClassVar[dict[str, Any]] = {"projection": "none"}  # a store of format 3 records it


def unit(rng: np.random.Generator, *shape: int) -> np.ndarray:
    """Random unit vectors."""
    vectors = rng.standard_normal(shape).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=-1, keepdims=True)


def document(rng: np.random.Generator, doc_id: str, tag: int) -> list[NodeRecord]:
    """A document of random nodes whose texts say version ``tag``."""
    return [NodeRecord(f"{doc_id}#{i}", doc_id, f"[{tag}] node {i} of {doc_id}", (0, 1), unit(rng, DIM),
                       unit(rng, CHUNKS_PER_NODE, DIM)) for i in range(NODES_PER_DOC)]


def query(rng: np.random.Generator) -> EncodedText:
    """A random encoded query."""
    return EncodedText(vector=unit(rng, DIM), chunk_vectors=unit(rng, 3, DIM), spans=[(0, 1)] * 3)


def writer(folder: str, seconds: float, every: float, batch: int, out: str) -> None:
    """Commit ``batch`` rewritten documents and the probe every ``every`` seconds for ``seconds``."""
    rng = np.random.default_rng(1)
    commits: list[tuple[int, float, float]] = []  # (probe, ack time, commit seconds)
    with LandmarkStore(folder) as store:
        n_docs = store.count_documents()
        end = time.time() + seconds
        probe = 0
        while time.time() < end:
            probe += 1
            docs = [(f"d{(probe * batch + i) % n_docs}", document(rng, f"d{(probe * batch + i) % n_docs}", probe))
                    for i in range(batch)]
            start = time.perf_counter()
            store.upsert_encoded_documents([*docs, ("probe", document(rng, "probe", probe))])
            commits.append((probe, time.time(), time.perf_counter() - start))
            time.sleep(max(0.0, every - (time.perf_counter() - start)))
    Path(out).write_text(json.dumps({"commits": commits}))


def reader(folder: str, seconds: float, every: float, out: str) -> None:
    """Search every ``every`` seconds for ``seconds``; note when each probe was first seen and every refresh."""
    rng = np.random.default_rng(os.getpid())
    seen: dict[int, float] = {}
    refreshes: list[tuple[float, int, int]] = []  # (seconds, bytes copied, generation)
    searches: list[float] = []
    with LandmarkStore(folder, read_only=True) as store:
        first = store.backend.last
        copy = store.backend.copy_folder
        end = time.time() + seconds
        while time.time() < end:
            start = time.perf_counter()
            store.search_encoded(query(rng), k=10)
            searches.append(time.perf_counter() - start)
            if store.backend.copy_folder != copy:
                copy, last = store.backend.copy_folder, store.backend.last
                refreshes.append((last.seconds, last.bytes, last.generation))
            (node,) = store.get_nodes(["probe#0"])
            seen.setdefault(int(node.text[1 : node.text.index("]")]), time.time())
            time.sleep(max(0.0, every - (time.perf_counter() - start)))
    Path(out).write_text(json.dumps({"seen": seen, "refreshes": refreshes, "searches": searches,
                                     "first": [first.seconds, first.bytes]}))


def build(folder: Path, n_docs: int) -> None:
    """The store: ``n_docs`` documents and the probe, optimized."""
    rng = np.random.default_rng(0)
    with LandmarkStore(folder, encoder=StandIn()) as store:
        store.upsert_encoded_documents(((f"d{i}", document(rng, f"d{i}", 0)) for i in range(n_docs)),
                                       document_batch_size=64)
        store.upsert_encoded_document("probe", document(rng, "probe", 0))
        store.optimize()


def run(folder: Path, work: Path, readers: int, args: argparse.Namespace, seconds: float) -> dict[str, Any]:
    """One phase: the writer and ``readers`` reader processes at once; their records."""
    context = multiprocessing.get_context("spawn")
    processes = [context.Process(target=writer, args=(str(folder), seconds, args.write_every, args.batch,
                                                      str(work / f"writer-{readers}.json")))]
    processes += [context.Process(target=reader, args=(str(folder), seconds, args.search_every,
                                                       str(work / f"reader-{readers}-{i}.json")))
                  for i in range(readers)]
    processes[0].start()
    time.sleep(args.warmup)  # the writer holds the store before readers open it
    for process in processes[1:]:
        process.start()
    for process in processes:
        process.join(seconds + 600)  # bounded: a stuck process is killed, its phase then fails below
        if process.is_alive():
            process.kill()
    records = {"writer": json.loads((work / f"writer-{readers}.json").read_text())}
    records["readers"] = [json.loads((work / f"reader-{readers}-{i}.json").read_text()) for i in range(readers)]
    return records


def pct(values: list[float], q: float) -> float:
    """A percentile (nan for none)."""
    return float(np.percentile(values, q)) if values else float("nan")


def summary(records: dict[str, Any]) -> dict[str, Any]:
    """Refresh delays, refresh costs, search and commit latencies of one phase."""
    acked = {probe: at for probe, at, _ in records["writer"]["commits"]}
    delays, costs, copied, searches = [], [], [], []
    for one in records["readers"]:
        seen = {int(probe): at for probe, at in one["seen"].items()}
        delays += [at - acked[probe] for probe, at in seen.items() if probe in acked]
        costs += [seconds for seconds, _, _ in one["refreshes"]]
        copied += [(bytes_, seconds) for seconds, bytes_, _ in one["refreshes"]]
        searches += one["searches"]
    gb = sum(b for b, _ in copied) / 1e9
    return {
        "commits": len(acked),
        "commit_ms": [1000 * pct([s for _, _, s in records["writer"]["commits"]], q) for q in (50, 95)],
        "delay_ms": [1000 * pct(delays, q) for q in (50, 95, 100)],
        "refreshes": len(costs),
        "refresh_ms": [1000 * pct(costs, q) for q in (50, 95)],
        "copied_mb": 1000 * gb / max(len(copied), 1),
        "s_per_gb": sum(s for _, s in copied) / gb if gb else float("nan"),
        "search_ms": [1000 * pct(searches, q) for q in (50, 95, 99)],
        "first_copy": records["readers"][0]["first"] if records["readers"] else None,
    }


def machine() -> dict[str, str]:
    """The machine, CPU flags and file system the run was on."""
    cpu = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    model = next((line.split(":", 1)[1].strip() for line in cpu.splitlines() if line.startswith("model name")), "?")
    flags = next((line.split(":", 1)[1].split() for line in cpu.splitlines() if line.startswith("flags")), [])
    fs = subprocess.run(["df", "-T", tempfile.gettempdir()], capture_output=True, text=True).stdout.splitlines()
    return {"cpu": model, "cores": str(os.cpu_count()), "avx512": " ".join(f for f in flags if "avx512" in f) or "none",
            "python": platform.python_version(), "fs": fs[-1].split()[1] if len(fs) > 1 else "?",
            "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}


def main() -> None:
    """Build the store, run the writer alone, then beside the readers; write the report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--docs", type=int, default=1000, help="documents in the store (8 nodes each)")
    parser.add_argument("--readers", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=60.0, help="length of the phase with readers")
    parser.add_argument("--alone", type=float, default=15.0, help="length of the writer-alone phase")
    parser.add_argument("--write-every", type=float, default=1.0, help="seconds between the writer's commits")
    parser.add_argument("--batch", type=int, default=8, help="documents rewritten per commit")
    parser.add_argument("--search-every", type=float, default=0.5, help="seconds between a reader's searches")
    parser.add_argument("--warmup", type=float, default=5.0, help="seconds the writer runs before readers open")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="lmk-readers-bench-"))
    try:
        folder = work / "store"
        start = time.perf_counter()
        build(folder, args.docs)
        built = time.perf_counter() - start
        size = shard_bytes(folder)
        alone = summary(run(folder, work, 0, args, args.alone))
        beside = summary(run(folder, work, args.readers, args, args.seconds))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    write_report(args, machine(), size, built, alone, beside)


def write_report(args: argparse.Namespace, host: dict[str, str], size: tuple[int, int], built: float,
                 alone: dict[str, Any], beside: dict[str, Any]) -> None:
    """benchmarks/results/readers_bench.md."""
    f = "{:.1f}".format
    first = beside["first_copy"]
    lines = [
        "# Readers beside a writer, across processes (benchmarks/readers_bench.py)",
        "",
        f"{host['date']}; {host['cpu']}, {host['cores']} cores shared with other work, AVX-512: {host['avx512']}; "
        f"Python {host['python']}; store on {host['fs']}. Local Qdrant Edge store, pre-encoded random vectors "
        f"(dim {DIM}, {CHUNKS_PER_NODE} chunk vectors a node), no encoder running.",
        "",
        f"Store: {args.docs} documents of {NODES_PER_DOC} nodes ({args.docs * NODES_PER_DOC} nodes), optimized; "
        f"{size[0] / 1e6:.0f} MB of files ({size[1] / 1e6:.0f} MB allocated: the rest are holes), built in "
        f"{built:.0f} s. The writer commits {args.batch} rewritten documents and a probe every {args.write_every} s; "
        f"each of {args.readers} reader processes searches every {args.search_every} s for {args.seconds:.0f} s "
        "(a search first takes a new copy when the writer committed since).",
        "",
        "| | writer alone | beside the readers |",
        "|---|---|---|",
        f"| commits | {alone['commits']} in {args.alone:.0f} s | {beside['commits']} in {args.seconds:.0f} s |",
        f"| commit latency p50 / p95 (ms) | {f(alone['commit_ms'][0])} / {f(alone['commit_ms'][1])} | "
        f"{f(beside['commit_ms'][0])} / {f(beside['commit_ms'][1])} |",
        "",
        "| readers | value |",
        "|---|---|",
        f"| refresh delay, commit ack to a reader's first search that sees it, p50 / p95 / max (ms) | "
        f"{f(beside['delay_ms'][0])} / {f(beside['delay_ms'][1])} / {f(beside['delay_ms'][2])} |",
        f"| refreshes (all readers) | {beside['refreshes']} |",
        f"| refresh cost, copy and open, p50 / p95 (ms) | {f(beside['refresh_ms'][0])} / "
        f"{f(beside['refresh_ms'][1])} |",
        f"| data copied per refresh (MB) | {f(beside['copied_mb'])} |",
        f"| refresh seconds per GB copied | {beside['s_per_gb']:.2f} |",
        f"| first copy at open (ms, MB) | {f(1000 * first[0])}, {f(first[1] / 1e6)} |" if first else "",
        f"| search latency with refreshes, p50 / p95 / p99 (ms) | {f(beside['search_ms'][0])} / "
        f"{f(beside['search_ms'][1])} / {f(beside['search_ms'][2])} |",
        "",
    ]
    args.out.write_text("\n".join(line for line in lines if line is not None) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
