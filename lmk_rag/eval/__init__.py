"""Evaluation harness: BEIR loading, sampling, pipelines, metrics and the encoding cache behind ``lmk-rag eval``.

The names below are its public API: what ``lmk-rag eval`` runs, and what ``benchmarks/`` (the quality report,
the studies, the stock LlamaIndex pipelines it registers, the bootstrap intervals of ``benchmarks/intervals.py``)
measures the product with. Importing it imports no
LlamaIndex package and no torch (``tests/eval/test_isolation.py``).
"""

from lmk_rag.eval.beir import BeirDataset, load_beir
from lmk_rag.eval.cache import cache_path, cached_arrays
from lmk_rag.eval.metrics import breakdown, mean_metrics, per_query_metrics
from lmk_rag.eval.pairset import pairs_dataset
from lmk_rag.eval.pipelines import (
    IndexStats,
    Pipeline,
    PipelineOptions,
    Ranking,
    get_pipeline,
    pipeline_names,
    register_pipeline,
)
from lmk_rag.eval.run import DEFAULT_MODEL, RANK_DEPTH, evaluate
from lmk_rag.eval.sample import subsample
from lmk_rag.eval.states import encode_states_cached, states_key

__all__ = [
    "DEFAULT_MODEL",
    "RANK_DEPTH",
    "BeirDataset",
    "IndexStats",
    "Pipeline",
    "PipelineOptions",
    "Ranking",
    "breakdown",
    "cache_path",
    "cached_arrays",
    "encode_states_cached",
    "evaluate",
    "get_pipeline",
    "load_beir",
    "mean_metrics",
    "pairs_dataset",
    "per_query_metrics",
    "pipeline_names",
    "register_pipeline",
    "states_key",
    "subsample",
]
