"""Retrieval pipelines for ``lmk-rag eval``, found by name in a registry.

How to add a pipeline
---------------------
1. Write a module in this folder (e.g. ``my_pipeline.py``). Keep heavy imports (torch, qdrant) *inside* methods
   so that importing this package stays cheap. (A pipeline outside the package registers the same way when its
   module is imported: the stock LlamaIndex pipelines of ``benchmarks/stock_pipelines.py`` do.)
2. Register a factory: anything that takes a :class:`PipelineOptions` and returns an object with
   ``index(docs) -> IndexStats`` and ``search(queries, k) -> list[Ranking]``::

       from lmk_rag.eval.pipelines.base import IndexStats, PipelineOptions, Ranking, register_pipeline

       @register_pipeline("my-pipeline")
       class MyPipeline:
           def __init__(self, options: PipelineOptions) -> None:
               self.options = options

           def index(self, docs: Sequence[str]) -> IndexStats:
               ...  # encode docs (list of str; a doc's identity is its list index)
               return IndexStats(encode_s=seconds, cached=False)

           def search(self, queries: Sequence[str], k: int) -> list[Ranking]:
               ...  # one list of (doc_index, score) per query, best first, at most k long

3. Add one import line for the module below. ``lmk-rag eval --pipeline my-pipeline`` then works.

Optionally give the object a ``settings`` property (a JSON-able dict); the report shows it as
``encoder``. Pipeline-specific settings arrive in ``options.encoder`` (``lmk-rag eval --encoder
KEY=VALUE`` sets any of them).

Rules: a pipeline only sees texts (never ids, qrels or query metadata); ``search`` is timed as
query latency, so do all document work in ``index``. To reuse the harness's on-disk encoding
cache for :class:`lmk_rag.LandmarkEncoder` states, see :mod:`lmk_rag.eval.cache`.
"""

from __future__ import annotations

from lmk_rag.eval.pipelines.base import (
    IndexStats,
    Pipeline,
    PipelineFactory,
    PipelineOptions,
    Ranking,
    get_pipeline,
    pipeline_names,
    register_pipeline,
)

# One import line per pipeline module; importing a module registers its pipelines.
from lmk_rag.eval.pipelines import bm25_pipeline, dense_pipelines  # noqa: F401  isort: skip
from lmk_rag.eval.pipelines import static_pipelines  # noqa: F401  isort: skip
from lmk_rag.eval.pipelines import lmk_rag_pipeline  # noqa: F401  isort: skip
from lmk_rag.eval.pipelines import static_store_pipeline  # noqa: F401  isort: skip

__all__ = [
    "IndexStats",
    "Pipeline",
    "PipelineFactory",
    "PipelineOptions",
    "Ranking",
    "get_pipeline",
    "pipeline_names",
    "register_pipeline",
]
