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


def differences(first: dict, second: dict) -> int:
    """Queries whose ranked documents differ between two run files."""
    return sum(1 for qid in first.keys() | second.keys() if first.get(qid) != second.get(qid))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("sets", nargs="+")
    parser.add_argument("--before", required=True, help="the commit before the refactor")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "same_behaviour.md")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        before = unpack(args.before, Path(scratch))
        for dataset in args.sets:
            tag = dataset.replace("/", "_")
            old_a = run(before, dataset, Path(scratch) / f"{tag}.old1.json")
            old_b = run(before, dataset, Path(scratch) / f"{tag}.old2.json")
            new = run(ROOT, dataset, Path(scratch) / f"{tag}.new.json")
            rows.append((dataset, len(old_a), differences(old_a, old_b), differences(old_a, new)))
            print(rows[-1], flush=True)
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    lines = [
        "# Same behaviour across the store refactor",
        "",
        f"- Date: {datetime.date.today()}; machine: {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} cores; before: {args.before}, after: {head.stdout.strip()} (working tree)",
        "- Each cell: queries whose top documents (the run file's ranking) differ; every run is a fresh process.",
        f"- Regenerate: `python benchmarks/same_behaviour.py --before {args.before} {' '.join(args.sets)}`",
        "",
        "| set | queries | old vs old | old vs new |",
        "|---|---|---|---|",
        *(f"| {dataset} | {n} | {a} | {b} |" for dataset, n, a, b in rows),
        "",
    ]
    args.out.write_text("\n".join(lines))


if __name__ == "__main__":
    main()
