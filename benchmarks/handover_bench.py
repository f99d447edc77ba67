"""A writer opening a store that readers hold, across processes (issue 46): what the handover costs.

Readers open a local Edge store first (read-only; the first holds the folder, the others read copies) and search
a pre-encoded query every ``--search-every`` seconds; then a writer opens the store (the holding reader hands it
over: it copies the folder, swaps the copy in, releases the lock), commits one batch and closes. Measured, beside 1
and 4 readers: how long the writer's open takes (against the same open with no reader), each reader's search
latency before, across and after the handover, and the disk the copies take. No encoder runs (random unit vectors
of MiniLM's size). The copy every non-holding reader takes at open is also what each reader would pay at open if
no reader ever held the folder (the alternative weighed in docs/decisions.md).

    python benchmarks/handover_bench.py                       # writes benchmarks/results/handover_bench.md
    python benchmarks/handover_bench.py --docs 500 --out /tmp/quick.md
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from readers_bench import NODES_PER_DOC, build, document, machine, pct, query  # this script's folder

from lmk_rag.research import READERS_DIR, shard_bytes
from lmk_rag.store import LandmarkStore

OUT = Path(__file__).resolve().parent / "results" / "handover_bench.md"


def reader(folder: str, every: float, ready: str, stop: str, out: str) -> None:
    """Open read-only, say so, search every ``every`` seconds until ``stop`` exists; record each search."""
    rng = np.random.default_rng()
    searches: list[tuple[float, float, str]] = []  # (start time, seconds, backend)
    start = time.perf_counter()
    with LandmarkStore(folder, read_only=True) as store:
        opened = time.perf_counter() - start
        Path(ready).write_text(store.backend.name)
        while not Path(stop).exists():
            begin = time.time()
            tick = time.perf_counter()
            store.search_encoded(query(rng), k=10)
            searches.append((begin, time.perf_counter() - tick, store.backend.name))
            time.sleep(max(0.0, every - (time.perf_counter() - tick)))
    Path(out).write_text(json.dumps({"opened": opened, "searches": searches}))


def writer_open(folder: Path, n_docs: int) -> tuple[float, float, float]:
    """Open to write (timed), commit one batch of 8 documents (timed), close: ``(open s, commit s, start time)``."""
    rng = np.random.default_rng(2)
    began = time.time()
    start = time.perf_counter()
    store = LandmarkStore(folder)
    opened = time.perf_counter() - start
    try:
        start = time.perf_counter()
        store.upsert_encoded_documents((f"d{i}", document(rng, f"d{i}", 1)) for i in range(min(8, n_docs)))
        committed = time.perf_counter() - start
    finally:
        store.close()
    return opened, committed, began


def phase(folder: Path, work: Path, readers: int, args: argparse.Namespace) -> dict[str, Any]:
    """Readers first, then the writer; the records."""
    context = multiprocessing.get_context("spawn")
    stop = work / f"stop-{readers}"
    processes = []
    for i in range(readers):
        ready = work / f"ready-{readers}-{i}"
        process = context.Process(target=reader, args=(str(folder), args.search_every, str(ready), str(stop),
                                                       str(work / f"reader-{readers}-{i}.json")))
        process.start()
        processes.append(process)
        while not ready.exists():  # one at a time: the first holds the folder
            assert process.is_alive(), "a reader died"
            time.sleep(0.05)
    held = [(work / f"ready-{readers}-{i}").read_text() for i in range(readers)]
    disk_before = shard_bytes(folder / READERS_DIR)[1] if (folder / READERS_DIR).exists() else 0
    time.sleep(args.settle)
    opened, committed, began = writer_open(folder, args.docs)
    disk_after = shard_bytes(folder / READERS_DIR)[1] if (folder / READERS_DIR).exists() else 0
    time.sleep(args.after)
    stop.write_text("")
    for process in processes:
        process.join(600)
        if process.is_alive():
            process.kill()
    records = [json.loads((work / f"reader-{readers}-{i}.json").read_text()) for i in range(readers)]
    stop.unlink()
    return {"held": held, "open": opened, "commit": committed, "began": began, "readers": records,
            "disk": (disk_before, disk_after)}


#: The windows of a reader's searches: before the writer opens, overlapping the writer's open (the handover),
#: the first search after the writer's commit (it takes a new copy, as any reader beside a writer does), the rest.
WINDOWS = ("before the writer", "during the writer's open (the handover)", "first after the commit (a refresh)",
           "later")


def latencies(records: dict[str, Any], holder_only: bool = False) -> dict[str, list[float]]:
    """Search latencies (ms) in each of :data:`WINDOWS` (of the holding reader alone, or of every reader)."""
    began = records["began"]
    opened, committed = began + records["open"], began + records["open"] + records["commit"]
    out: dict[str, list[float]] = {window: [] for window in WINDOWS}
    for one in records["readers"][:1] if holder_only else records["readers"]:
        refreshed = False
        for at, seconds, _ in one["searches"]:
            if at + seconds < began:
                window = WINDOWS[0]
            elif at < opened:
                window = WINDOWS[1]
            elif at > committed and not refreshed:
                window, refreshed = WINDOWS[2], True
            else:
                window = WINDOWS[3]
            out[window].append(1000 * seconds)
    return out


def main() -> None:
    """Build the store, time a writer's open alone, then beside 1 and 4 readers; write the report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--docs", type=int, default=12500, help="documents in the store (8 nodes each)")
    parser.add_argument("--search-every", type=float, default=0.1, help="seconds between a reader's searches")
    parser.add_argument("--settle", type=float, default=3.0, help="seconds the readers search before the writer")
    parser.add_argument("--after", type=float, default=30.0, help="seconds they search after the writer closed")
    parser.add_argument("--store", type=Path, help="a store this benchmark built before (kept; built when missing)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="lmk-handover-bench-"))
    try:
        folder = args.store or work / "store"
        start = time.perf_counter()
        if not folder.exists():
            build(folder, args.docs)
        built = time.perf_counter() - start
        size = shard_bytes(folder)
        alone = [writer_open(folder, args.docs)[:2] for _ in range(2)][-1]
        phases = {readers: phase(folder, work, readers, args) for readers in (1, 4)}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    write_report(args, machine(), size, built, alone, phases)


def write_report(args: argparse.Namespace, host: dict[str, str], size: tuple[int, int], built: float,
                 alone: tuple[float, float], phases: dict[int, dict[str, Any]]) -> None:
    """benchmarks/results/handover_bench.md."""
    f = "{:.1f}".format
    made = f"built in {built:.0f} s" if built > 1 else "built by an earlier run"
    lines = [
        "# A writer opening a store readers hold (benchmarks/handover_bench.py, issue 46)",
        "",
        f"{host['date']}; {host['cpu']}, {host['cores']} cores shared with other work; Python {host['python']}; "
        f"store on {host['fs']}. Local Qdrant Edge store, pre-encoded random vectors, no encoder running.",
        "",
        f"Store: {args.docs} documents of {NODES_PER_DOC} nodes ({args.docs * NODES_PER_DOC} nodes), optimized; "
        f"{size[0] / 1e6:.0f} MB of files ({size[1] / 1e6:.0f} MB allocated), {made}. Readers open "
        f"first (the first holds the folder, the others copy it) and search every {args.search_every} s; "
        f"{args.settle:.0f} s later a writer opens the store, commits 8 documents and closes; they search on for "
        f"{args.after:.0f} s.",
        "",
        "| | no reader | beside 1 reader | beside 4 readers |",
        "|---|---|---|---|",
        f"| writer's open (s) | {alone[0]:.2f} | {phases[1]['open']:.2f} | {phases[4]['open']:.2f} |",
        f"| writer's first commit (s) | {alone[1]:.2f} | {phases[1]['commit']:.2f} | {phases[4]['commit']:.2f} |",
    ]
    for holder_only in (True, False):
        for name in WINDOWS:
            cells = []
            for readers in (1, 4):
                values = latencies(phases[readers], holder_only)[name]
                cells.append(f"{f(pct(values, 50))} / {f(max(values) if values else float('nan'))} ({len(values)})")
            who = "the holding reader's" if holder_only else "every reader's"
            lines.append(f"| {who} searches p50 / max (ms, count), {name} | - | {cells[0]} | {cells[1]} |")
    opens = {readers: [one["opened"] for one in phases[readers]["readers"]] for readers in (1, 4)}
    lines.append(f"| readers' open: the holder / the others, median (s) | - | {opens[1][0]:.2f} / - | "
                 f"{opens[4][0]:.2f} / {np.median(opens[4][1:]):.2f} |")
    lines += [
        f"| copies on disk before the writer / after the handover (MB allocated) | - | "
        f"{phases[1]['disk'][0] / 1e6:.0f} / {phases[1]['disk'][1] / 1e6:.0f} | "
        f"{phases[4]['disk'][0] / 1e6:.0f} / {phases[4]['disk'][1] / 1e6:.0f} |",
        "",
        f"Backends the readers opened with (4 readers): {', '.join(phases[4]['held'])}.",
        "",
    ]
    args.out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
