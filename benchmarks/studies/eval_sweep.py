"""Run the eval baselines and the encoder-default sweep (issue 3) in one process; one JSON per run.

Each run goes through the eval harness (:func:`lmk_rag.eval.run.evaluate`, the code behind ``lmk-rag eval``) on a
seeded subsample and writes ``benchmarks/studies/results/runs/<dataset>__<pipeline>__<setting>.json`` (the same
object as ``lmk-rag eval --json``); a run whose file exists is skipped, so the script resumes. Tables:
``eval_table.py``::

    python benchmarks/studies/eval_sweep.py baselines
    python benchmarks/studies/eval_sweep.py sweep-document sweep-chunk overlap
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from common import DATA, register_stock_pipelines

from lmk_rag.eval import PipelineOptions, evaluate, load_beir, subsample
from lmk_rag.research import user_cache_dir

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
    dataset = subsample(load_beir(DATA / folder), max_queries, max_docs, seed=0)
    options = PipelineOptions(cache_dir=user_cache_dir("eval"), encoder=encoder)
    report = evaluate(dataset, pipeline, options, keep_per_query=True)
    report.update({"max_queries": max_queries, "max_docs": max_docs, "seed": 0})
    path.write_text(json.dumps(report, indent=1) + "\n")
    print(f"{path.name}: ndcg@10={report['ndcg@10']:.4f} encode_s={report['encode_s']} cached={report['cached']}",
          flush=True)


def main(stage: str) -> None:
    """Run one stage: ``baselines``, ``sweep-document``, ``sweep-chunk`` or ``overlap``."""
    OUT.mkdir(parents=True, exist_ok=True)
    register_stock_pipelines()
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
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("stages", nargs="+", choices=["baselines", "sweep-document", "sweep-chunk", "overlap"])
    for stage in parser.parse_args().stages:
        main(stage)
