"""The query side of a store's named vectors: the rerank's scoring query (chunk, static token or node vectors) and
the BM25 query, each checked against what the store holds. The write side: :mod:`lmk_rag.store.points`."""

from __future__ import annotations

from typing import Any

import numpy as np

from lmk_rag.errors import InvalidInputError, SettingsMismatchError, VectorSizeError
from lmk_rag.store.points import NodeVectors, check_directions
from lmk_rag.store.types import Branch, Rerank, SparseVector


class QueryVectors:
    """A query's vectors for a store's rerank and BM25.

    :param vectors: the store's vector settings (the same object its writes use).
    """

    def __init__(self, vectors: NodeVectors) -> None:
        """Keep the store's vector settings."""
        self.vectors = vectors

    def static_query(self, text: str) -> np.ndarray:
        """The query's static token vectors.

        :raises SettingsMismatchError: when the store was opened without a static encoder.
        """
        if self.vectors.static_encoder is None:
            raise SettingsMismatchError("rerank='static' needs the store opened with static_encoder=...")
        return self.vectors.static_encoder.encode_query_tokens(text)

    def sparse_query(self, text: str | None) -> SparseVector | None:
        """The query's BM25 vector (None without BM25 or without text)."""
        return self.vectors.bm25.embed_query(text) if self.vectors.bm25 is not None and text else None

    def scorer(self, rerank: Rerank, query: Any, static_query: np.ndarray | None) -> Branch:
        """The rerank's scoring query: the query's chunk vectors, its static token vectors or its vector.

        :param query: the encoded query (``.vector`` (dim,), ``.chunk_vectors`` (q, dim)).
        :raises VectorSizeError: for vectors of the wrong shape.
        :raises SettingsMismatchError: for ``"static"`` on a store without static vectors.
        """
        vector = np.asarray(query.vector, dtype=np.float32)
        if vector.shape != (self.vectors.dim,):
            raise VectorSizeError(f"query vector of shape {vector.shape}, store expects ({self.vectors.dim},)")
        check_directions(vector, "query vector")
        if rerank == Rerank.CHUNKS:
            if not self.vectors.chunks:
                raise SettingsMismatchError(
                    f"{self.vectors.where} is a static store: it has no chunk vectors; use rerank='static' or 'none'"
                )
            chunks = np.asarray(query.chunk_vectors, dtype=np.float32).reshape(-1, self.vectors.dim)
            check_directions(chunks, "query chunk_vectors")
            return Branch("chunks", chunks.tolist())
        if rerank == Rerank.NONE:
            return Branch("node", vector.tolist())
        if self.vectors.static_dim is None:
            raise SettingsMismatchError(
                f"{self.vectors.where} has no static token vectors; rerank='static' is unavailable"
            )
        if static_query is None:
            raise InvalidInputError("rerank='static' needs static_query (the query's static token vectors)")
        tokens = np.asarray(static_query, dtype=np.float32)
        if tokens.ndim != 2 or tokens.shape[1] != self.vectors.static_dim or len(tokens) == 0:
            raise VectorSizeError(
                f"static query of shape {tokens.shape}, store expects (q>=1, {self.vectors.static_dim})"
            )
        check_directions(tokens, "static query")
        return Branch("static", tokens.tolist())
