"""Landmark-encoder pipelines: one vector per document (``cls``, ``mean``, ``lmk``) and best chunk per
document (``maxsim-landmark``, ``maxsim-chunkmean``, ``maxsim-chunk``).

All of them encode the corpus with :meth:`lmk_rag.LandmarkEncoder.encode_states` through the disk
cache, so one pass per encoder setting serves every pooling. Queries are encoded the same way as
documents and get the same kind of vectors (queries get landmarks too).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from lmk_rag.eval.pipelines.base import IndexStats, PipelineOptions, Ranking, landmark_encoder, register_pipeline
from lmk_rag.eval.scoring import rank_best_chunk, rank_single
from lmk_rag.eval.states import encode_states_cached
from lmk_rag.vector_math import l2_normalize

if TYPE_CHECKING:  # pragma: no cover
    from lmk_rag.encoder import ChunkStates, LandmarkEncoder


class _StatesPipeline:
    """Shared flow: build the encoder, encode (cached) documents, encode queries at search time."""

    def __init__(self, options: PipelineOptions, **overrides: Any) -> None:
        self.options = options
        self._overrides = overrides
        self._encoder: LandmarkEncoder | None = None
        self._docs: Any = None

    @property
    def settings(self) -> dict[str, Any]:
        """The effective encoder settings (after :meth:`index`), reported in the eval JSON."""
        return self._encoder.settings if self._encoder is not None else {}

    def index(self, docs: Sequence[str]) -> IndexStats:
        """Encode the documents (or load their states from the cache) and keep their vectors.

        :param docs: the document texts.
        :return: the cold encoding time and whether the cache was hit.
        """
        self._encoder = landmark_encoder(self.options, {**self.options.encoder, **self._overrides})
        result = encode_states_cached(self._encoder, docs, self.options.cache_dir)
        self._docs = self._represent(result.states)
        return IndexStats(encode_s=result.encode_s, cached=result.cached)

    def search(self, queries: Sequence[str], k: int) -> list[Ranking]:
        """Encode the queries and rank the documents.

        :param queries: the query texts.
        :param k: results per query.
        :return: one ranking per query.
        """
        assert self._encoder is not None, "index() must be called before search()"
        return self._rank(self._represent(self._encoder.encode_states(queries, query=True)), k)

    def _represent(self, states: list[ChunkStates]) -> Any:
        raise NotImplementedError

    def _rank(self, queries: Any, k: int) -> list[Ranking]:
        raise NotImplementedError


class SingleVectorPipeline(_StatesPipeline):
    """One pooled vector per text, ranked by dot product (cosine: vectors are normalised)."""

    def __init__(self, options: PipelineOptions, pooling: str) -> None:
        """:param options: the pipeline options.
        :param pooling: ``"cls"``, ``"mean"`` or ``"lmk"`` (see :func:`lmk_rag.encoder.pooling.text_vector`).
        """
        super().__init__(options, pooling=pooling)
        self.pooling = pooling

    def _represent(self, states: list[ChunkStates]) -> np.ndarray:
        from lmk_rag.encoder.pooling import text_vector

        return np.stack([text_vector(state, self.pooling) for state in states])

    def _rank(self, queries: np.ndarray, k: int) -> list[Ranking]:
        return rank_single(queries, self._docs, k)


class BestChunkPipeline(_StatesPipeline):
    """One vector per landmark chunk; a document scores its best chunk (MaxSim summed over query chunks)."""

    def __init__(self, options: PipelineOptions, **overrides: Any) -> None:
        """:param options: the pipeline options.
        :param overrides: encoder settings this pipeline fixes (``chunk_vector``, ``context``).
        """
        super().__init__(options, **overrides)

    def _represent(self, states: list[ChunkStates]) -> list[np.ndarray]:
        from lmk_rag.encoder.pooling import chunk_means

        assert self._encoder is not None
        if self._encoder.chunk_vector == "landmark":
            return [l2_normalize(state.landmark_states) for state in states]
        return [l2_normalize(chunk_means(state)) for state in states]

    def _rank(self, queries: list[np.ndarray], k: int) -> list[Ranking]:
        return rank_best_chunk(queries, self._docs, k)


for _pooling in ("cls", "mean", "lmk"):
    register_pipeline(_pooling)(lambda options, pooling=_pooling: SingleVectorPipeline(options, pooling))
register_pipeline("maxsim-landmark")(lambda options: BestChunkPipeline(options, chunk_vector="landmark"))
register_pipeline("maxsim-chunkmean")(lambda options: BestChunkPipeline(options, chunk_vector="mean"))
register_pipeline("maxsim-chunk")(lambda options: BestChunkPipeline(options, context="chunk"))
