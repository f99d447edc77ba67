"""Print markdown tables from the JSON runs of ``eval_sweep.py`` in ``benchmarks/studies/results/runs/``
(``results/baselines.md``).

    python benchmarks/studies/eval_table.py baselines   # every pipeline at the encoder defaults, per set
    python benchmarks/studies/eval_table.py sweep       # granularity x context x chunk vector, best-chunk scoring
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

RUNS = Path(__file__).parent / "results" / "runs"
#: The issue-3 pipelines; other helpers' runs (lmk-rag, static, fine-tuned) share the folder but not this table.
BASELINES = {"bm25", "cls", "mean", "lmk", "maxsim-landmark", "maxsim-chunkmean", "maxsim-chunk", "llamaindex-default"}
#: Each set's subsample in the sweep (queries, docs), as in eval_sweep.py; runs of other sizes are left out.
SIZES = {"manpages-longdoc": (40, 60), "manpages-needle/L2048": (20, 20), "manpages-needle/L8192": (8, 8),
         "manpages-short": (100, 300)}
SETS = list(SIZES)


BASE_MODEL = "sentence-transformers/all-MiniLM-L6-v2"


def load() -> list[dict]:
    """Every run report of the base model (other helpers keep fine-tuned runs in the same folder)."""
    runs = [json.loads(path.read_text()) | {"file": path.name} for path in sorted(RUNS.glob("*.json"))]
    return [run for run in runs if run["model"] == BASE_MODEL]


def baselines(runs: list[dict]) -> None:
    """One table per set: pipeline rows, metric columns."""
    for name in SETS:
        rows = [run for run in runs if run["dataset"] == name and run["file"].endswith("__default.json")
                and run["pipeline"] in BASELINES]
        if not rows:
            continue
        first = rows[0]
        print(f"\n### {name} ({first['queries']} queries, {first['docs']} docs, seed 0)\n")
        print("| pipeline | nDCG@10 | R@1 | R@10 | R@100 | MRR@10 | encode_s | query_ms |")
        print("|---|---|---|---|---|---|---|---|")
        for run in sorted(rows, key=lambda run: -run["ndcg@10"]):
            print(f"| {run['pipeline']} | {run['ndcg@10']:.3f} | {run['recall@1']:.3f} | {run['recall@10']:.3f} | "
                  f"{run['recall@100']:.3f} | {run['mrr@10']:.3f} | {run['encode_s']:.0f} | {run['query_ms']:.0f} |")
        for key in ("by_position",):
            best = [run for run in rows if key in run]
            if best:
                positions = list(best[0][key])
                print(f"\nnDCG@10 by needle position:\n\n| pipeline | {' | '.join(positions)} |")
                print("|---|" + "---|" * len(positions))
                for run in sorted(best, key=lambda run: -run["ndcg@10"]):
                    cells = " | ".join(f"{run[key][p]['ndcg@10']:.2f}" for p in positions)
                    print(f"| {run['pipeline']} | {cells} |")


def sweep(runs: list[dict]) -> None:
    """nDCG@10 per (granularity, context, chunk vector, overlap) and set, the mean over sets, and mean R@1."""
    cells: dict[tuple, dict[str, float]] = {}
    recall1: dict[tuple, dict[str, float]] = {}
    for run in runs:
        if not run["pipeline"].startswith("maxsim-") or run["pipeline"] == "maxsim-chunk":
            continue
        if SIZES.get(run["dataset"]) != (run["queries"], run["docs"]):
            continue
        settings = run["encoder"]
        cell = (settings["granularity"], settings["context"], settings["chunk_vector"], settings["window_overlap"])
        cells.setdefault(cell, {})[run["dataset"]] = run["ndcg@10"]
        recall1.setdefault(cell, {})[run["dataset"]] = run["recall@1"]
    print("| granularity | context | chunk vector | overlap | " + " | ".join(SETS) + " | mean | mean R@1 |")
    print("|---|---|---|---|" + "---|" * (len(SETS) + 2))
    for cell, scores in sorted(cells.items(), key=lambda item: (str(item[0][0]).zfill(9), *map(str, item[0][1:]))):
        values = [scores.get(name) for name in SETS]
        mean = sum(values) / len(values) if None not in values else None
        shown = " | ".join("-" if value is None else f"{value:.3f}" for value in values)
        r1 = [recall1[cell].get(name) for name in SETS]
        mean_r1 = sum(r1) / len(r1) if None not in r1 else None
        print(f"| {cell[0]} | {cell[1]} | {cell[2]} | {cell[3]} | {shown} | "
              f"{'-' if mean is None else f'{mean:.3f}'} | {'-' if mean_r1 is None else f'{mean_r1:.3f}'} |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("table", choices=["baselines", "sweep"])
    {"baselines": baselines, "sweep": sweep}[parser.parse_args().table](load())
