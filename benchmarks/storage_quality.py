"""Whole-set quality of the product under each storage of the scale benchmark: nDCG@10 of the ``lmk-rag`` pipeline
with float32 vectors in RAM against compressed storage, on every dev set whose default-encoder states are cached,
with the paired 95% interval of the difference (``benchmarks/results/storage_quality.md``).

    python benchmarks/storage_quality.py                               # node-int8-disk against float32
    python benchmarks/storage_quality.py --storages int8-disk turbo4-disk --sets perldoc-ref --out /tmp/q.md
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import re
from pathlib import Path

import numpy as np
from intervals import paired_difference
from scale_bench import SETS, STORAGES

from lmk_rag.encoder import LandmarkEncoder
from lmk_rag.eval import PipelineOptions, cache_path, evaluate, load_beir, states_key

OUT = Path(__file__).resolve().parent / "results" / "storage_quality.md"


def per_query_ndcg(dataset, storage: str) -> dict[str, float]:
    """nDCG@10 of every query of the ``lmk-rag`` pipeline on a store of this storage."""
    spec, oversampling = STORAGES[storage]
    settings = {**spec, **({} if oversampling is None else {"oversampling": oversampling})}
    report = evaluate(dataset, "lmk-rag", PipelineOptions(encoder=settings), keep_per_query=True)
    return {qid: metrics["ndcg@10"] for qid, metrics in report["per_query"].items()}


def main() -> None:
    """Evaluate each cached set under the baseline and each storage, and write the report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--storages", nargs="+", default=["node-int8-disk"], choices=list(STORAGES))
    parser.add_argument("--sets", nargs="+", default=list(SETS), choices=list(SETS))
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    key = states_key(LandmarkEncoder())
    rows, skipped = [], []
    for name in args.sets:
        dataset = load_beir(SETS[name])
        if not cache_path(Path(PipelineOptions().cache_dir), key, dataset.doc_texts).exists():
            skipped.append(name)
            continue
        base = per_query_ndcg(dataset, "float32")
        ids = sorted(base)
        for storage in args.storages:
            other = per_query_ndcg(dataset, storage)
            diff, low, high = paired_difference([other[q] for q in ids], [base[q] for q in ids])
            rows.append({"set": name, "queries": len(ids), "storage": storage, "float32": np.mean(list(base.values())),
                         "other": np.mean([other[q] for q in ids]), "diff": diff, "low": low, "high": high,
                         "moved": sum(other[q] != base[q] for q in ids)})
            print(rows[-1], flush=True)
    flags = sorted(set(re.findall(r"\bavx512\w*", Path("/proc/cpuinfo").read_text()))) or ["none"]
    lines = [
        "# Quality under compressed storage (`benchmarks/storage_quality.py`)",
        "",
        f"Date: {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC. Machine: {os.cpu_count()} CPU cores, AVX-512 "
        f"flags: {' '.join(flags)}; Python {platform.python_version()}. The `lmk-rag` pipeline (the product: fused "
        "search, documents by their best node) on whole dev sets, each storage in its own fresh Edge store built "
        "from the same cached encodings. diff = storage - float32 with its paired 95% bootstrap interval; moved = "
        "queries whose nDCG@10 changed."
        + (f" Not run (encodings not cached): {', '.join(skipped)}." if skipped else ""),
        "",
        "| set | queries | storage | nDCG@10 float32 | nDCG@10 storage | diff [95% CI] | queries moved |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += [f"| {r['set']} | {r['queries']} | {r['storage']} | {r['float32']:.4f} | {r['other']:.4f} | "
              f"{r['diff']:+.4f} [{r['low']:+.4f}, {r['high']:+.4f}] | {r['moved']} |" for r in rows]
    args.out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
