"""The research surface: what ``benchmarks/`` (the product benchmarks, the quality report, the studies) measures the
product through beyond its public names.

A study re-scores a set's candidates with the store's own planning and fusion instead of a copy of them, a
benchmark times one step of the store, the quality report keys the eval cache by the model's digest: each needs a
name the product does not offer its users. They are all here, each imported from where it lives, and nowhere else:
``tests/test_architecture.py`` checks that ``benchmarks/`` imports from lmk_rag only the public packages' names
and these (docs/architecture.md, "What benchmarks/ may import"). A change inside the product that moves or changes
one of them changes it here and in the benchmarks that use it, in the same commit. Nothing in ``lmk_rag`` imports
this module; it needs every extra.

- how a search is planned and scored: the weights and the question rule (``DEFAULT_ALPHA``, ``DOCUMENT_WEIGHT``,
  ``LENGTH_PENALTY``, ``QUESTION_SHARE``, ``is_question``, ``query_alpha``, ``document_weight``, ``length_penalty``),
  the plan and the fusion (``plan_search`` over a store's ``SearchDefaults``, ``fuse``, ``best_hits`` and their value
  types ``Branch``, ``ScoredPointData``, ``SparseVector``), the query's and the nodes' vectors (``QueryVectors``,
  ``VectorSpec``, ``Bm25Encoder``) and chunk MaxSim (``maxsim_scores``, ``l2_normalize``, ``pack_rows``);
- how a document becomes node records (``group_chunks``, ``node_records``, ``records_from_encoding``) and how a
  reader sees the store's points (``HIT_KEYS``, ``latest``, ``markers``, ``nodes_filter``, ``shown_filter``:
  payload_bench.py's variants);
- where a store and the caches live on disk (``shard_bytes``, ``READERS_DIR``, ``user_cache_dir``, the eval cache's
  ``model_digest``);
- the trained parts the studies fit again or compare (``LinearProjection``, ``SHIPPED_PROJECTION_DIR``,
  ``train_projection``, ``ProjectionConfig``, ``EncodedPairs``, ``default_mixer_dir``, ``split_heldout``);
- the product's eval pipeline, for a benchmark that reads more of each search than its ranking
  (``LmkRagPipeline``, its depth ``PRODUCT_K``: evidence_questions.py reads each hit's evidence);
- the module whose steps ingest_profile.py times by wrapping them (``encoder_steps``: tokenisation, planning,
  windows and the forward pass of :class:`~lmk_rag.LandmarkEncoder`);
- the CPU flags a new store's runtime follows, which encode_throughput.py names with its table (``cpu_flags``).
"""

from __future__ import annotations

from lmk_rag.encoder import encoder as encoder_steps
from lmk_rag.encoder.projection import SHIPPED_PROJECTION_DIR, LinearProjection
from lmk_rag.encoder.resolve import model_digest
from lmk_rag.encoder.runtime import cpu_flags
from lmk_rag.eval.pipelines.lmk_rag_pipeline import PRODUCT_K, LmkRagPipeline
from lmk_rag.nodes import group_chunks
from lmk_rag.paths import user_cache_dir
from lmk_rag.splits import split_heldout
from lmk_rag.static.mixer import default_mixer_dir
from lmk_rag.store.bm25 import Bm25Encoder
from lmk_rag.store.documents import node_records, records_from_encoding
from lmk_rag.store.edge import shard_bytes
from lmk_rag.store.folder_copy import READERS_DIR
from lmk_rag.store.query import (
    DEFAULT_ALPHA,
    DOCUMENT_WEIGHT,
    LENGTH_PENALTY,
    QUESTION_SHARE,
    SearchDefaults,
    best_hits,
    document_weight,
    fuse,
    is_question,
    length_penalty,
    plan_search,
    query_alpha,
)
from lmk_rag.store.records import HIT_KEYS, latest, markers, nodes_filter, shown_filter
from lmk_rag.store.types import Branch, ScoredPointData, SparseVector
from lmk_rag.store.vectors import QueryVectors, VectorSpec
from lmk_rag.train.projection import EncodedPairs, ProjectionConfig, train_projection
from lmk_rag.vector_math import l2_normalize, maxsim_scores, pack_rows

__all__ = [
    "DEFAULT_ALPHA",
    "DOCUMENT_WEIGHT",
    "HIT_KEYS",
    "LENGTH_PENALTY",
    "PRODUCT_K",
    "QUESTION_SHARE",
    "READERS_DIR",
    "SHIPPED_PROJECTION_DIR",
    "Bm25Encoder",
    "Branch",
    "EncodedPairs",
    "LinearProjection",
    "LmkRagPipeline",
    "ProjectionConfig",
    "QueryVectors",
    "ScoredPointData",
    "SearchDefaults",
    "SparseVector",
    "VectorSpec",
    "best_hits",
    "cpu_flags",
    "default_mixer_dir",
    "document_weight",
    "encoder_steps",
    "fuse",
    "group_chunks",
    "is_question",
    "l2_normalize",
    "latest",
    "length_penalty",
    "markers",
    "maxsim_scores",
    "model_digest",
    "node_records",
    "nodes_filter",
    "pack_rows",
    "plan_search",
    "query_alpha",
    "records_from_encoding",
    "shard_bytes",
    "shown_filter",
    "split_heldout",
    "train_projection",
    "user_cache_dir",
]
