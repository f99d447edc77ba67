"""Run the eval baselines and the encoder-default sweep in one process; one JSON per run.

Each run writes ``benchmarks/results/runs/<dataset>__<pipeline>__<setting>.json`` (the same object
as ``lmk-rag eval --json``) and is skipped when that file exists, so the script resumes.

    python benchmarks/eval_sweep.py baselines
    python benchmarks/eval_sweep.py sweep-document
    python benchmarks/eval_sweep.py sweep-chunk
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from report import CACHE, DATA, Cell, evaluate_cell  # benchmarks/report.py: one way to run a cell

OUT = Path(__file__).parent / "results" / "runs"
#: (folder, max_queries, max_docs): subsampled to fit a shared 2-core CPU.
SETS = [
    ("manpages-needle/L2048", 20, 20),
    ("manpages-short", 100, 300),
    ("manpages-longdoc", 40, 60),
    ("manpages-needle/L8192", 8, 8),
]
BASELINES = ["bm25", "cls", "mean", "lmk", "maxsim-landmark", "maxsim-chunkmean", "maxsim-chunk", "llamaindex-default"]


def run(folder: str, max_queries: int, max_docs: int, pipeline: str, encoder: dict) -> None:
    """Evaluate one cell unless its JSON exists."""
    setting = "_".join(f"{key}-{value}" for key, value in sorted(encoder.items())) or "default"
    path = OUT / f"{folder.replace('/', '-')}__{pipeline}__{setting}.json"
    if path.exists():
        return
    report = evaluate_cell(Cell(folder, max_queries, max_docs, pipeline), DATA, CACHE, encoder)
    path.write_text(json.dumps(report, indent=1) + "\n")
    print(f"{path.name}: ndcg@10={report['ndcg@10']:.4f} encode_s={report['encode_s']} "
          f"cached={report['cached']} wall_s={report['wall_s']}", flush=True)


def main(stage: str) -> None:
    """Run one stage: ``baselines``, ``sweep-document``, ``sweep-chunk`` or ``overlap``."""
    OUT.mkdir(parents=True, exist_ok=True)
    for folder, max_queries, max_docs in SETS:
        if stage == "baselines":
            for pipeline in BASELINES:
                run(folder, max_queries, max_docs, pipeline, {})
        elif stage in ("sweep-document", "sweep-chunk"):
            context = stage.split("-")[1]
            # With max_length 256 a window holds one chunk of 128 or 256 tokens: the contexts coincide there.
            for granularity in (32, 64, 128, 256) if context == "document" else (32, 64):
                for pipeline in ("maxsim-landmark", "maxsim-chunkmean"):
                    run(folder, max_queries, max_docs, pipeline, {"granularity": granularity, "context": context})
        elif stage == "overlap":
            for pipeline in ("maxsim-landmark", "maxsim-chunkmean"):
                run(folder, max_queries, max_docs, pipeline,
                    {"granularity": 64, "context": "document", "window_overlap": 64})


if __name__ == "__main__":
    for name in sys.argv[1:]:
        main(name)
