"""Ingest as a sync: the time of re-ingesting an unchanged folder against the first ingest, same run.

Writes 36 real manual pages (manpages-longdoc, the first 36 of at most 20,000 characters) into a folder, runs
``lmk-rag ingest FOLDER --store STORE`` three times as separate processes (first ingest, unchanged re-ingest, one
file changed) and writes ``benchmarks/results/ingest_sync.md``::

    python benchmarks/ingest_sync_bench.py
"""

from __future__ import annotations

import datetime as dt
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lmk_rag.eval import load_beir

DATA = Path("/work/shared/data") if Path("/work/shared/data").is_dir() else Path("../shared/data")
OUT = Path(__file__).resolve().parent / "results" / "ingest_sync.md"
PAGES, MAX_CHARS = 36, 20_000


def ingest(folder: Path, store: Path) -> tuple[float, str]:
    """Run ``lmk-rag ingest`` in a new process; its wall time and summary line."""
    start = time.perf_counter()
    result = subprocess.run(
        [str(Path(sys.executable).parent / "lmk-rag"), "ingest", str(folder), "--store", str(store)],
        capture_output=True, text=True, check=True, env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    return time.perf_counter() - start, result.stdout.strip().splitlines()[-1]


def main() -> None:
    """Time the three ingests and write the report."""
    texts = [t for t in load_beir(DATA / "manpages-longdoc").doc_texts if len(t) <= MAX_CHARS][:PAGES]
    with tempfile.TemporaryDirectory() as tmp:
        folder, store = Path(tmp) / "pages", Path(tmp) / "store"
        folder.mkdir()
        for index, text in enumerate(texts):
            (folder / f"page{index:02d}.txt").write_text(text)
        runs = [("first ingest", *ingest(folder, store)), ("unchanged re-ingest", *ingest(folder, store))]
        (folder / "page00.txt").write_text(texts[0] + "\nA line added.")
        runs.append(("one file changed", *ingest(folder, store)))
    chars = sum(len(t) for t in texts)
    lines = [
        "# Ingest as a sync (`benchmarks/ingest_sync_bench.py`)", "",
        f"Date: {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC. Machine: {os.cpu_count()} CPU cores "
        f"({platform.processor() or platform.machine()}), no GPU. {len(texts)} real manual pages "
        f"(manpages-longdoc, {chars:,} characters), each run a new `lmk-rag ingest` process (model load included).",
        "", "| run | wall s | summary |", "|---|---|---|",
        *[f"| {name} | {seconds:.1f} | {summary} |" for name, seconds, summary in runs],
        "", f"Unchanged re-ingest / first ingest: {runs[1][1] / runs[0][1]:.2f}.",
    ]
    OUT.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
