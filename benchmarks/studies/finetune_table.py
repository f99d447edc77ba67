"""Print Markdown tables comparing zero-shot and fine-tuned models from ``lmk-rag eval --json`` run files.

Run files are named ``TAG__SET__PIPELINE.json`` (SET with ``/`` as ``_``), e.g. written by::

    lmk-rag eval DATA/manpages-needle/L2048 -p maxsim-landmark --model DIR --max-queries 100 --max-docs 100 \\
        --json > runs/finetune/run4__manpages-needle_L2048__maxsim-landmark.json

    python benchmarks/studies/finetune_table.py benchmarks/studies/results/runs/finetune
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

PIPELINE_NAMES = {
    "mean": "mean pooling (single vector)",
    "lmk": "LMK (single vector)",
    "maxsim-landmark": "landmark MaxSim",
    "maxsim-chunkmean": "chunk-mean MaxSim",
}


def load(folder: Path) -> list[dict]:
    """Every run file in ``folder``, with its tag."""
    return [json.loads(path.read_text()) | {"tag": path.name.split("__")[0]} for path in sorted(folder.glob("*.json"))]


def table(runs: list[dict], dataset: str) -> list[str]:
    """One Markdown table for a set: a row per (model tag, pipeline)."""
    rows = [run for run in runs if run["dataset"] == dataset]
    if not rows:
        return []
    positions = sorted(rows[0].get("by_position", {}), key=float)
    header = "| model | pipeline | nDCG@10 | R@1 |" + ("".join(f" R@1 at {p} |" for p in positions))
    lines = [f"**{dataset}** ({rows[0]['queries']} queries, {rows[0]['docs']} docs, seed 0)", "", header,
             "|---|---|---|---|" + "---|" * len(positions)]
    order = list(PIPELINE_NAMES)
    for run in sorted(rows, key=lambda run: (run["tag"] != "zeroshot", run["tag"], order.index(run["pipeline"]))):
        cells = "".join(f" {run['by_position'][p]['recall@1']:.2f} |" for p in positions)
        lines.append(f"| {run['tag']} | {PIPELINE_NAMES[run['pipeline']]} | {run['ndcg@10']:.3f} | "
                     f"{run['recall@1']:.3f} |{cells}")
    return [*lines, ""]


def main() -> None:
    """Print one table per dev set found in the folder."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folder", type=Path)
    runs = load(parser.parse_args().folder)
    for dataset in sorted({run["dataset"] for run in runs}):
        print("\n".join(table(runs, dataset)))


if __name__ == "__main__":
    main()
