"""Cold start of ``lmk-rag query``: process start to first hit printed (warm disk cache), each run a new process.

Every round runs, each as a fresh process: the interpreter alone, ``import lmk_rag``, ``import lmk_rag.cli``,
``lmk-rag info`` (no model), ``lmk-rag query`` on each store (the console script: time to its first hit line and to
its exit), and the split of one query into its steps (one process timing import, store open, the query encoder's
imports and load, first search and close with ``time.perf_counter``, and whether torch was imported). The commands
that run lmk-rag run twice: on this checkout and on the baseline revision (``--baseline``, by default the commit
before the torch-free query path, unpacked with ``git archive``), alternating which goes first; each store's hits
must be the same on both (doc ids and spans). One warm-up round (it also writes the bytecode caches, as an installed
package has them), then ``--runs`` rounds; the tables give the median and the minimum, and the load average before
each run. The stores: ``--store`` (default: built from the shipped test corpus, ``tests/fixtures/data``, 46 manual
pages; it is only read) and ``--int8-store`` (an ONNX int8 store of the demo's pages, built by this script when the
folder does not exist). Writes ``benchmarks/results/cold_start.md``::

    python benchmarks/cold_start.py [--store DIR] [--int8-store DIR] [--query TEXT] [--runs 5] [--baseline REV|none]
"""

from __future__ import annotations

import argparse
import datetime as dt
import gzip
import io
import json
import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "benchmarks" / "results" / "cold_start.md"
CORPORA = [REPO / "tests" / "fixtures" / "data" / name / "corpus.jsonl.gz" for name in ("manpages-short",
                                                                                        "manpages-longdoc")]
LMK_RAG = Path(sys.executable).parent / "lmk-rag"
BEFORE = "834c7f4"
"""The last commit before the torch-free query path (issue 63 item 1): the default baseline."""
TARGET_S = 1.0
FLAGS = ("avx2", "avx512f", "avx512_vnni")
HIT = re.compile(r"\s*1\. ")
HIT_LINE = re.compile(r"\s*\d+\. +[-\d.]+ +(\S+) +(\[\d+:\d+\])")
"""A hit line of ``lmk-rag query``: rank, score, doc id, span."""

SPLIT = """
import json, sys, time
start = time.perf_counter()
marks = {}
def mark(name):
    marks[name] = time.perf_counter() - start - sum(marks.values())
import lmk_rag.cli
mark("import lmk_rag.cli")
from lmk_rag.store import LandmarkStore
store = LandmarkStore(sys.argv[1], read_only=True)
mark("open the store (Edge shard, settings, committed counts)")
store.encoder
mark("the query encoder (its imports, the model or its export, fingerprint check)")
hits = store.search(sys.argv[2], k=10)
mark("first search (sample check, encode the query, search)")
store.close()
mark("close the store")
torch = "torch" in sys.modules or "transformers" in sys.modules
print(json.dumps({"file": lmk_rag.__file__, "hits": len(hits), "steps": marks, "torch": torch}))
"""


def child_env(tree: Path) -> dict[str, str]:
    """The environment of a measured process: ``tree``'s lmk_rag first on the path, offline, bytecode written."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    return {**env, "PYTHONPATH": str(tree), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


@dataclass(frozen=True)
class Run:
    """One measured process.

    :param hit: wall seconds from its start to its first hit line (its exit for commands that print no hits).
    :param exit: wall seconds from its start to its exit.
    :param cpu: its user + system CPU seconds.
    :param load: the 1-minute load average just before it started.
    :param out: its standard output.
    """

    hit: float
    exit: float
    cpu: float
    load: float
    out: str


def timed(command: list[str], env: dict[str, str], first_hit: bool = False) -> Run:
    """Run a command in a new process and time it (see :class:`Run`).

    :param first_hit: the command is a query: time its first line, which must be hit number 1.
    :raises RuntimeError: when it fails, or a query prints no hit.
    """
    load = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    with tempfile.TemporaryFile() as errors:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=errors, env=env, text=True,
                                   cwd=tempfile.gettempdir())  # not the checkout: `python -c` puts the cwd first
        assert process.stdout is not None
        line = process.stdout.readline() if first_hit else ""
        hit = time.perf_counter() - start
        out = line + process.stdout.read()
        status = process.wait()
        end = time.perf_counter() - start
        errors.seek(0)
        message = errors.read().decode(errors="replace")[-2000:]
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if status != 0 or (first_hit and not HIT.match(line)):
        raise RuntimeError(f"{command[:3]} failed (status {status}): {out[-500:]} {message}")
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return Run(hit=hit if first_hit else end, exit=end, cpu=cpu, load=load, out=out)


def build_store(folder: Path) -> Path:
    """A store of the shipped test corpus, ingested with ``lmk-rag ingest`` of this checkout."""
    pages = folder / "pages"
    pages.mkdir()
    for corpus in CORPORA:
        with gzip.open(corpus, "rt") as lines:
            for line in lines:
                row = json.loads(line)
                (pages / f"{corpus.parent.name}-{row['_id']}.txt").write_text(row["text"])
    store = folder / "store"
    subprocess.run([str(LMK_RAG), "ingest", str(pages), "--store", str(store)], check=True, capture_output=True,
                   env=child_env(REPO))
    return store


def build_int8_store(store: Path) -> Path:
    """An ONNX int8 store of the demo's pages (``examples/demo.py``: this machine's manual), ingested by this
    checkout."""
    script = (f"import sys; sys.path.insert(0, {str(REPO / 'examples')!r})\n"
              "from demo import render_pages\n"
              "from lmk_rag import LandmarkEncoder, LandmarkStore\n"
              f"with LandmarkStore({str(store)!r}, encoder=LandmarkEncoder(backend='onnx', dtype='int8')) as store:\n"
              "    store.upsert_documents(render_pages(40))\n")
    subprocess.run([sys.executable, "-c", script], check=True, capture_output=True, env=child_env(REPO))
    return store


def hit_lines(out: str) -> list[tuple[str, str]]:
    """The (doc id, span) of each hit line ``lmk-rag query`` printed."""
    return [(match[1], match[2]) for line in out.splitlines() if (match := HIT_LINE.match(line))]


def unpack(revision: str, folder: Path) -> Path:
    """The package of a revision, unpacked from ``git archive`` into ``folder``."""
    archive = subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", revision, "lmk_rag"],
                             check=True, capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(folder, filter="data")
    return folder


def machine() -> str:
    """CPU model, cores and the vector flags that decide torch's kernels."""
    info = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    model = next((line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("model name")),
                 platform.processor() or platform.machine())
    flags = set(next((line.split(":", 1)[1].split() for line in info.splitlines() if line.startswith("flags")), []))
    present = ", ".join(f"{flag} {'yes' if flag in flags else 'no'}" for flag in FLAGS)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"{model}, {cores} cores ({os.cpu_count()} online); {present}; no GPU used"


def store_size(store: Path) -> str:
    """Documents and nodes the store records, and its size on disk."""
    meta = json.loads((store / "lmk_rag.json").read_text())
    committed = meta.get("committed") or {}
    files = [path.stat() for path in store.rglob("*") if path.is_file()]
    used, apparent = sum(s.st_blocks * 512 for s in files) / 1e6, sum(s.st_size for s in files) / 1e6
    return (f"{committed.get('documents', '?')} documents, {committed.get('nodes', '?')} nodes, {len(files)} files, "
            f"{used:.1f} MB on disk ({apparent:.1f} MB apparent: Edge's files are sparse; encoder "
            f"{meta['encoder']['settings']['model_name']}, "
            f"fingerprint {meta['encoder']['fingerprint']}, bm25 {meta.get('bm25')})")


def revision(tree: Path) -> str:
    """This checkout's commit, marked when the work tree differs from it."""
    head = subprocess.run(["git", "-C", str(tree), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(["git", "-C", str(tree), "status", "--porcelain", "lmk_rag"], capture_output=True,
                           text=True).stdout.strip()
    return head.stdout.strip() + (" with uncommitted changes" if dirty else "")


def summary(runs: list[Run], key: str) -> str:
    """``median / min`` of one measure (a :class:`Run` field) over the runs."""
    values = [getattr(run, key) for run in runs]
    return f"{statistics.median(values):.2f} / {min(values):.2f}"


def main() -> None:
    """Measure the rounds and write the report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, help="an existing store to query (default: build one)")
    parser.add_argument("--int8-store", type=Path, help="an ONNX int8 store to query (built when missing)")
    parser.add_argument("--query", default="compress files with Lempel-Ziv coding")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--baseline", default=BEFORE, help="the revision to compare with, or 'none'")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        stores = {"default store": args.store.resolve() if args.store else build_store(Path(tmp))}
        if args.int8_store:
            folder = args.int8_store.resolve()
            stores["int8 store"] = folder if folder.exists() else build_int8_store(folder)
        trees = {"now": REPO}
        if args.baseline != "none":
            trees[f"before ({args.baseline})"] = unpack(args.baseline, Path(tmp) / "baseline")
        started, load_start = dt.datetime.now(dt.timezone.utc), os.getloadavg()
        py = sys.executable
        plain = {"interpreter alone (`python -c pass`)": [py, "-c", "pass"],
                 "`python -c 'import lmk_rag'`": [py, "-c", "import lmk_rag"],
                 "`python -c 'import lmk_rag.cli'`": [py, "-c", "import lmk_rag.cli"]}
        info = [str(LMK_RAG), "info", "--store", str(stores["default store"])]
        rows: dict[str, list[Run]] = {}
        hits: dict[tuple[str, str], set[tuple[tuple[str, str], ...]]] = {}
        splits: dict[str, list[dict[str, Any]]] = {}
        for round_ in range(args.runs + 1):
            warm_up = round_ == 0
            for name, command in plain.items():
                result = timed(command, child_env(REPO))
                rows.setdefault(name, []).extend([] if warm_up else [result])
            order = list(trees.items()) if round_ % 2 else list(reversed(trees.items()))
            for tree_name, tree in order:
                env = child_env(tree)
                result = timed(info, env)
                rows.setdefault(f"`lmk-rag info`, {tree_name}", []).extend([] if warm_up else [result])
                for store_name, store in stores.items():
                    query = [str(LMK_RAG), "query", args.query, "--store", str(store), "-k", "10"]
                    result = timed(query, env, first_hit=True)
                    rows.setdefault(f"`lmk-rag query`, {store_name}, {tree_name}", []).extend(
                        [] if warm_up else [result])
                    hits.setdefault((store_name, tree_name), set()).add(tuple(hit_lines(result.out)))
                    split = timed([py, "-c", SPLIT, str(store), args.query], env)
                    report = json.loads(split.out.strip().splitlines()[-1])
                    if not Path(report["file"]).is_relative_to(tree):
                        raise RuntimeError(f"the split of {tree_name} imported {report['file']}, not {tree}")
                    if not warm_up:
                        splits.setdefault(f"{store_name}, {tree_name}", []).append(report)
        load_end = os.getloadavg()
        sizes = {name: store_size(store) for name, store in stores.items()}
    same = {name: len({hit for (store, _), found in hits.items() if store == name for hit in found}) == 1
            for name in stores}
    lines = [
        "# Cold start of `lmk-rag query` (`benchmarks/cold_start.py`)", "",
        f"Date: {started:%Y-%m-%d %H:%M} UTC. Machine: {machine()}. Python {platform.python_version()}, torch "
        f"{version('torch')}, transformers {version('transformers')}, onnxruntime {version('onnxruntime')}, "
        f"qdrant-edge-py {version('qdrant-edge-py')}. Load average (1, 5, 15 min) at the start: "
        f"{', '.join(f'{v:.2f}' for v in load_start)}; at the end: {', '.join(f'{v:.2f}' for v in load_end)} (the "
        "machine is shared: other jobs ran beside this one; the load before each run is in the table).", "",
        *[f"{name.capitalize()}: {'built by this script' if name == 'default store' and not args.store else 'given'}"
          f", {store.name}: {sizes[name]}." for name, store in stores.items()], "",
        f"Query: `{args.query}`, `-k 10`. Code: {revision(REPO)}"
        + (f"; baseline {args.baseline}." if len(trees) > 1 else "."), "",
        f"Each run is a new process, warm disk cache; {args.runs} runs after one warm-up, interleaved. First hit: "
        "wall seconds from the process start to the first hit line on stdout; exit: to the process's end; CPU: its "
        "user + system seconds.", "",
        "| command | first hit s, median / min | exit s, median / min | CPU s, median / min | load at start, "
        "median |",
        "|---|---|---|---|---|",
    ]
    for name, runs in rows.items():
        hit = summary(runs, "hit") if name.startswith("`lmk-rag query`") else "-"
        load = statistics.median(run.load for run in runs)
        lines.append(f"| {name} | {hit} | {summary(runs, 'exit')} | {summary(runs, 'cpu')} | {load:.2f} |")
    lines += ["", "Hits (doc id and span of the 10 hits, every run of both revisions):", ""]
    for name in stores:
        found = sorted({hit for (store, _), runs in hits.items() if store == name for hit in runs})
        verdict = "the same in every run, now and before" if same[name] else "NOT the same"
        lines.append(f"- {name}: {verdict}: {', '.join(f'{doc} {span}' for doc, span in found[0])}")
    steps = list(next(iter(splits.values()))[0]["steps"])
    lines += ["", "Split of one query in one process (median seconds of the runs; the interpreter's start is not "
              "in it):", "", "| step | " + " | ".join(splits) + " |", "|---|" + "---|" * len(splits)]
    for step in steps:
        lines.append(f"| {step} | " + " | ".join(f"{statistics.median(run['steps'][step] for run in runs):.2f}"
                                                  for runs in splits.values()) + " |")
    lines.append("| total | " + " | ".join(f"{statistics.median(sum(run['steps'].values()) for run in runs):.2f}"
                                           for runs in splits.values()) + " |")
    lines.append("| torch or transformers imported | " + " | ".join(
        "yes" if any(run["torch"] for run in runs) else "no" for runs in splits.values()) + " |")
    lines += [""]
    for name in stores:
        now = statistics.median(run.hit for run in rows[f"`lmk-rag query`, {name}, now"])
        lines.append(f"Target: first hit <= {TARGET_S:.1f} s median on the {name}. This run: {now:.2f} s: "
                     f"{'met' if now <= TARGET_S else 'not met'} at the load above.")
    OUT.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    if not all(same.values()):
        raise SystemExit("the hits differ between runs or revisions: see the report")

if __name__ == "__main__":
    main()
