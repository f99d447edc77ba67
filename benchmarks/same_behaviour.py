"""Same behaviour across a refactor: the ``lmk-rag`` eval pipeline's run files from an earlier commit (twice) and from
this checkout (once), on whole dev sets, compared query by query.

Each run is a fresh process (``lmk-rag eval SET --pipeline lmk-rag --run-file ...``) with the tree
under test first on ``PYTHONPATH``; the earlier commit is unpacked with ``git archive``. Encodings come from the eval
cache (the encoder is the same, so only the first run encodes). Writes ``benchmarks/results/same_behaviour.md``::

    python benchmarks/same_behaviour.py --before a403bfc manpages-needle/L2048 manpages-short
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = Path("/work/shared/data") if Path("/work/shared/data").is_dir() else ROOT.parent / "shared" / "data"
CLI = "import sys; from lmk_rag.cli import app; sys.argv[0] = 'lmk-rag'; app()"
INTEGRATIONS = ["llama-index-vector-stores-landmark", "llama-index-node-parser-landmark",
                "llama-index-embeddings-landmark"]


def unpack(commit: str, into: Path) -> Path:
    """The tree of ``commit`` in a fresh folder."""
    archive = into / "tree.tar"
    subprocess.run(["git", "-C", str(ROOT), "archive", "-o", str(archive), commit], check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(into / "tree", filter="data")
    return into / "tree"


def run(tree: Path, dataset: str, run_file: Path) -> dict:
    """One eval of the ``lmk-rag`` pipeline with ``tree``'s code; the run file's rankings by query id."""
    path = os.pathsep.join([str(tree), *(str(tree / "integrations" / name) for name in INTEGRATIONS)])
    env = {**os.environ, "PYTHONPATH": path}
    subprocess.run([sys.executable, "-c", CLI, "eval", str(DATA / dataset), "--pipeline", "lmk-rag",
                    "--run-file", str(run_file), "--no-progress"], check=True, env=env, cwd=tree,
                   stdout=subprocess.DEVNULL)
    rankings: dict[str, list[str]] = {}
    for line in run_file.read_text().splitlines():  # TREC: qid Q0 doc_id rank score tag
        qid, _, doc_id, *_ = line.split()
        rankings.setdefault(qid, []).append(doc_id)
    return rankings


def differences(first: dict, second: dict, depth: int | None = None) -> int:
    """Queries whose ranked documents (the first ``depth``; None: all) differ between two run files."""
    return sum(1 for qid in first.keys() | second.keys() if first.get(qid, [])[:depth] != second.get(qid, [])[:depth])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("sets", nargs="+")
    parser.add_argument("--before", required=True, help="the commit before the refactor")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "same_behaviour.md")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as scratch:  # run files are kept only in the table
        before = unpack(args.before, Path(scratch))
        for dataset in args.sets:
            tag = dataset.replace("/", "_")
            old_a = run(before, dataset, Path(scratch) / f"{tag}.old1.json")
            old_b = run(before, dataset, Path(scratch) / f"{tag}.old2.json")
            new = run(ROOT, dataset, Path(scratch) / f"{tag}.new.json")
            rows.append((Path(dataset).name if Path(dataset).is_absolute() else dataset, len(old_a),
                         *(differences(old_a, other, depth) for other in (old_b, new) for depth in (10, None))))
            print(rows[-1], flush=True)
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    lines = [
        "# Same behaviour across the store refactor",
        "",
        f"- Date: {datetime.date.today()}; machine: {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} cores; before: {args.before}, after: {head.stdout.strip()} (working tree)",
        "- Each cell: queries whose ranked documents differ, in the top 10 and in the whole run file (100 per query);",
        "  every run is a fresh process that builds its store anew (HNSW graphs are built at random, so deep ranks of",
        "  two runs of the same code may differ where the approximate prefetch found other candidates).",
        f"- Regenerate: `python benchmarks/same_behaviour.py --before {args.before} {' '.join(args.sets)}`",
        "",
        "| set | queries | old vs old, top 10 | old vs new, top 10 | old vs old, whole run | old vs new, whole run |",
        "|---|---|---|---|---|---|",
        *(f"| {dataset} | {n} | {a10} | {b10} | {a} | {b} |" for dataset, n, a10, a, b10, b in rows),
        "",
    ]
    args.out.write_text("\n".join(lines))


if __name__ == "__main__":
    main()
