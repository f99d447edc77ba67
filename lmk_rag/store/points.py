"""A store's named vectors on both sides: node points with every vector the store holds (shapes checked, static
and BM25 vectors added; a static store holds no chunk vectors), and the query's vectors for the rerank and BM25."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from lmk_rag.errors import InvalidInputError, SettingsMismatchError, VectorSizeError
from lmk_rag.store import records as rec
from lmk_rag.store.bm25 import BM25_LANGUAGE, Bm25Encoder
from lmk_rag.store.layout import recorded_vectors
from lmk_rag.store.types import Branch, NodeRecord, PointData, Rerank, SparseVector

if TYPE_CHECKING:  # pragma: no cover
    from lmk_rag.encoder.protocols import TokenEncoder


class StoreVectors:
    """Turns a store's :class:`NodeRecord` s into points carrying every vector its settings name, and a query
    into the rerank's and BM25's query vectors.

    :param dim: size of the node and chunk vectors.
    :param static_dim: size of the static token vectors, or None when the store holds none.
    :param static_encoder: encodes a node's static token vectors when a record carries none (or None).
    :param bm25: the store's BM25 model, or None when the store holds no BM25 vectors.
    :param where: the store, for messages.
    :param chunks: whether the store holds chunk vectors (False for a static store).
    """

    def __init__(
        self, dim: int, static_dim: int | None, static_encoder: TokenEncoder | None, bm25: Bm25Encoder | None,
        where: str, chunks: bool = True,
    ) -> None:
        """Keep the store's vector settings."""
        self.dim = dim
        self.chunks = chunks
        self.static_dim = static_dim
        self.static_encoder = static_encoder
        self.bm25 = bm25
        self.where = where

    @classmethod
    def from_settings(cls, meta: dict[str, Any], static_encoder: TokenEncoder | None, where: str) -> StoreVectors:
        """The vectors a store's settings record names (stores from before the tokenizer was recorded: word
        tokens)."""
        bm25 = None
        if meta.get("bm25"):
            bm25 = Bm25Encoder(meta.get("bm25_tokenizer") or "word", meta.get("bm25_language") or BM25_LANGUAGE)
        static_dim = None if meta.get("static") is None else int(meta["static"]["dim"])
        chunks = "chunks" in recorded_vectors(meta)
        return cls(int(meta["encoder"]["dim"]), static_dim, static_encoder, bm25, where, chunks)

    def check(self, record: NodeRecord) -> None:
        """Refuse a node's vectors of the wrong shape, or with values no search can use, naming the node.

        :raises VectorSizeError: for a wrong shape.
        :raises InvalidInputError: for a vector (or chunk vector) that is not finite or is all zeros.
        """
        vector = np.asarray(record.vector)
        chunks = np.asarray(record.chunk_vectors)
        if vector.shape != (self.dim,):
            raise VectorSizeError(
                f"node {record.node_id!r}: vector of shape {vector.shape}, store expects ({self.dim},)"
            )
        if self.chunks and (chunks.ndim != 2 or chunks.shape[1] != self.dim or len(chunks) == 0):
            raise VectorSizeError(
                f"node {record.node_id!r}: chunk_vectors of shape {chunks.shape}, store expects (n>=1, {self.dim})"
            )
        check_directions(vector, f"node {record.node_id!r}: vector")
        if self.chunks:
            check_directions(chunks, f"node {record.node_id!r}: chunk_vectors")

    def points(self, records: list[NodeRecord], version: int, slot: int) -> list[PointData]:
        """The node points of one document's records at a version and id slot."""
        return [rec.node_point(record, version, slot, self._vectors(record)) for record in records]

    def _vectors(self, record: NodeRecord) -> dict[str, Any]:
        """Every named vector of a node the store's settings name (static and BM25 vectors made when needed)."""
        vectors: dict[str, Any] = {"node": np.ascontiguousarray(record.vector, dtype=np.float32)}
        if self.chunks:
            vectors["chunks"] = np.ascontiguousarray(record.chunk_vectors, dtype=np.float32)
        if self.static_dim is not None:
            static = record.static_vectors
            if static is None:
                if self.static_encoder is None:
                    raise SettingsMismatchError(
                        f"{self.where} holds static token vectors: open it with static_encoder=... to write"
                    )
                static = self.static_encoder.encode_document_tokens(record.text)
            static = np.asarray(static, dtype=np.float32)
            if static.ndim != 2 or static.shape[1] != self.static_dim or len(static) == 0:
                raise VectorSizeError(
                    f"node {record.node_id!r}: static vectors of shape {static.shape}, "
                    f"store expects (m>=1, {self.static_dim})"
                )
            check_directions(static, f"node {record.node_id!r}: static vectors")
            vectors["static"] = np.ascontiguousarray(static)
        if self.bm25 is not None:
            vectors["bm25"] = self.bm25.embed_document(record.text)
        return vectors

    def static_query(self, text: str) -> np.ndarray:
        """The query's static token vectors.

        :raises SettingsMismatchError: when the store was opened without a static encoder.
        """
        if self.static_encoder is None:
            raise SettingsMismatchError("rerank='static' needs the store opened with static_encoder=...")
        return self.static_encoder.encode_query_tokens(text)

    def sparse_query(self, text: str | None) -> SparseVector | None:
        """The query's BM25 vector (None without BM25 or without text)."""
        return self.bm25.embed_query(text) if self.bm25 is not None and text else None

    def scorer(self, rerank: Rerank, query: Any, static_query: np.ndarray | None) -> Branch:
        """The rerank's scoring query: the query's chunk vectors, its static token vectors or its vector.

        :param query: the encoded query (``.vector`` (dim,), ``.chunk_vectors`` (q, dim)).
        :raises VectorSizeError: for vectors of the wrong shape.
        :raises SettingsMismatchError: for ``"static"`` on a store without static vectors.
        """
        vector = np.asarray(query.vector, dtype=np.float32)
        if vector.shape != (self.dim,):
            raise VectorSizeError(f"query vector of shape {vector.shape}, store expects ({self.dim},)")
        check_directions(vector, "query vector")
        if rerank == Rerank.CHUNKS:
            if not self.chunks:
                raise SettingsMismatchError(
                    f"{self.where} is a static store: it has no chunk vectors; use rerank='static' or 'none'"
                )
            chunks = np.asarray(query.chunk_vectors, dtype=np.float32).reshape(-1, self.dim)
            check_directions(chunks, "query chunk_vectors")
            return Branch("chunks", chunks.tolist())
        if rerank == Rerank.NONE:
            return Branch("node", vector.tolist())
        if self.static_dim is None:
            raise SettingsMismatchError(f"{self.where} has no static token vectors; rerank='static' is unavailable")
        if static_query is None:
            raise InvalidInputError("rerank='static' needs static_query (the query's static token vectors)")
        tokens = np.asarray(static_query, dtype=np.float32)
        if tokens.ndim != 2 or tokens.shape[1] != self.static_dim or len(tokens) == 0:
            raise VectorSizeError(f"static query of shape {tokens.shape}, store expects (q>=1, {self.static_dim})")
        check_directions(tokens, "static query")
        return Branch("static", tokens.tolist())


def check_directions(vectors: np.ndarray, what: str) -> None:
    """Refuse vectors a cosine cannot use: any value not finite, or a vector of zeros (it has no direction).

    :param vectors: one vector (dim,) or rows (n, dim).
    :param what: the vectors, for the message.
    :raises InvalidInputError: naming ``what`` and the problem.
    """
    rows = np.asarray(vectors, dtype=np.float64).reshape(-1, np.shape(vectors)[-1])
    if not np.all(np.isfinite(rows)):
        raise InvalidInputError(f"{what} holds NaN or infinite values; encode the text again")
    if np.any(~rows.any(axis=1)):
        raise InvalidInputError(f"{what} holds a vector of zeros, which has no direction to compare by cosine")
