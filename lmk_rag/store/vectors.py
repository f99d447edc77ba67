"""The vectors of a store's points and queries, made and checked against one :class:`VectorSpec` (what the store's
settings record names): a node point's named vectors (:class:`NodeVectors`: shapes checked, static and BM25 vectors
added; a static store holds no chunk vectors) and a query's vectors for the rerank and BM25 (:class:`QueryVectors`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from lmk_rag.encoder.protocols import TokenEncoder
from lmk_rag.errors import InvalidInputError, SettingsMismatchError, VectorSizeError
from lmk_rag.store import records as rec
from lmk_rag.store.bm25 import Bm25Encoder
from lmk_rag.store.records import recorded_vectors
from lmk_rag.store.types import Branch, EncodedQuery, NodeRecord, PointData, Rerank, SparseVector


@dataclass(frozen=True)
class VectorSpec:
    """The vectors a store holds, as its settings record names them: what a node point's vectors
    (:class:`NodeVectors`) and a query's (:class:`QueryVectors`) are each made and checked against.

    :param dim: size of the node and chunk vectors.
    :param static_dim: size of the static token vectors, or None when the store holds none.
    :param chunks: whether the store holds chunk vectors (False for a static store).
    :param bm25: the store's BM25 model, or None when the store holds no BM25 vectors.
    :param where: the store, for messages.
    """

    dim: int
    static_dim: int | None
    chunks: bool
    bm25: Bm25Encoder | None
    where: str

    @classmethod
    def from_settings(cls, settings: dict[str, Any], where: str) -> VectorSpec:
        """The vectors a store's settings record names (checked by ``settings.validate_settings``)."""
        bm25 = Bm25Encoder(settings["bm25_language"]) if settings["bm25"] else None
        static_dim = None if settings["static"] is None else int(settings["static"]["dim"])
        chunks = "chunks" in recorded_vectors(settings)
        return cls(int(settings["encoder"]["dim"]), static_dim, chunks, bm25, where)


class NodeVectors:
    """Turns a store's :class:`NodeRecord` s into points carrying every vector its settings name.

    :param spec: the vectors the store holds.
    :param static_encoder: encodes a node's static token vectors when a record carries none (or None).
    """

    def __init__(self, spec: VectorSpec, static_encoder: TokenEncoder | None) -> None:
        """Keep the store's vectors and its static encoder."""
        self.spec = spec
        self.static_encoder = static_encoder

    def check(self, record: NodeRecord) -> None:
        """Refuse a node's vectors of the wrong shape, or with values no search can use, naming the node.

        :raises VectorSizeError: for a wrong shape.
        :raises InvalidInputError: for a vector (or chunk vector) that is not finite or is all zeros.
        """
        vector = np.asarray(record.vector)
        chunks = np.asarray(record.chunk_vectors)
        if vector.shape != (self.spec.dim,):
            raise VectorSizeError(
                f"node {record.node_id!r}: vector of shape {vector.shape}, store expects ({self.spec.dim},)"
            )
        if self.spec.chunks and (chunks.ndim != 2 or chunks.shape[1] != self.spec.dim or len(chunks) == 0):
            raise VectorSizeError(
                f"node {record.node_id!r}: chunk_vectors of shape {chunks.shape}, store expects (n>=1, {self.spec.dim})"
            )
        check_directions(vector, f"node {record.node_id!r}: vector")
        if self.spec.chunks:
            check_directions(chunks, f"node {record.node_id!r}: chunk_vectors")

    def points(self, records: list[NodeRecord], version: int, slot: int) -> list[PointData]:
        """The node points of one document's records at a version and id slot; in a store with chunk vectors each
        carries its document's vector (the mean of all the document's chunk vectors, made unit) and what it was made
        from (:data:`~lmk_rag.store.records.DOCUMENT_KEY`)."""
        if not self.spec.chunks:
            return [rec.node_point(record, version, slot, self._vectors(record)) for record in records]
        chunks = np.concatenate([np.asarray(record.chunk_vectors, dtype=np.float64) for record in records])
        mean = chunks.mean(axis=0)
        coherence = float(np.linalg.norm(mean))
        document = (mean / coherence if coherence > 0 else chunks[0]).astype(np.float32)
        stats = {"chunks": len(chunks), "coherence": round(coherence, 6)}
        return [rec.node_point(record, version, slot, {**self._vectors(record), "document": document}, stats)
                for record in records]

    def _vectors(self, record: NodeRecord) -> dict[str, Any]:
        """Every named vector of a node the store's settings name (static and BM25 vectors made when needed)."""
        vectors: dict[str, Any] = {"node": np.ascontiguousarray(record.vector, dtype=np.float32)}
        if self.spec.chunks:
            vectors["chunks"] = np.ascontiguousarray(record.chunk_vectors, dtype=np.float32)
        if self.spec.static_dim is not None:
            static = record.static_vectors
            if static is None:
                if self.static_encoder is None:
                    raise SettingsMismatchError(
                        f"{self.spec.where} holds static token vectors: open it with static_encoder=... to write"
                    )
                static = self.static_encoder.encode_document_tokens(record.text)
            static = np.asarray(static, dtype=np.float32)
            if static.ndim != 2 or static.shape[1] != self.spec.static_dim or len(static) == 0:
                raise VectorSizeError(
                    f"node {record.node_id!r}: static vectors of shape {static.shape}, "
                    f"store expects (m>=1, {self.spec.static_dim})"
                )
            check_directions(static, f"node {record.node_id!r}: static vectors")
            vectors["static"] = np.ascontiguousarray(static)
        if self.spec.bm25 is not None:
            vectors["bm25"] = self.spec.bm25.embed_document(record.text)
        return vectors


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


class QueryVectors:
    """A query's vectors for a store's rerank and BM25.

    :param spec: the vectors the store holds.
    :param static_encoder: encodes a query's static token vectors (or None).
    """

    def __init__(self, spec: VectorSpec, static_encoder: TokenEncoder | None) -> None:
        """Keep the store's vectors and its static encoder."""
        self.spec = spec
        self.static_encoder = static_encoder

    def static_query(self, text: str) -> np.ndarray:
        """The query's static token vectors.

        :raises SettingsMismatchError: when the store was opened without a static encoder.
        """
        if self.static_encoder is None:
            raise SettingsMismatchError("rerank='static' needs the store opened with static_encoder=...")
        return self.static_encoder.encode_query_tokens(text)

    def sparse_query(self, text: str | None) -> SparseVector | None:
        """The query's BM25 vector (None without BM25 or without text)."""
        return self.spec.bm25.embed_query(text) if self.spec.bm25 is not None and text else None

    def scorer(self, rerank: Rerank, query: EncodedQuery) -> Branch:
        """The rerank's scoring query: the query's chunk vectors, its static token vectors or its vector.

        :param query: the encoded query (``.vector`` (dim,), ``.chunk_vectors`` (q, dim), ``.static_vectors``).
        :raises VectorSizeError: for vectors of the wrong shape.
        :raises SettingsMismatchError: for ``"static"`` on a store without static vectors.
        """
        vector = np.asarray(query.vector, dtype=np.float32)
        if vector.shape != (self.spec.dim,):
            raise VectorSizeError(f"query vector of shape {vector.shape}, store expects ({self.spec.dim},)")
        check_directions(vector, "query vector")
        if rerank == Rerank.CHUNKS:
            if not self.spec.chunks:
                raise SettingsMismatchError(
                    f"{self.spec.where} is a static store: it has no chunk vectors; use rerank='static' or 'node'"
                )
            chunks = np.asarray(query.chunk_vectors, dtype=np.float32).reshape(-1, self.spec.dim)
            check_directions(chunks, "query chunk_vectors")
            return Branch("chunks", chunks.tolist())
        if rerank == Rerank.NODE:
            return Branch("node", vector.tolist())
        if self.spec.static_dim is None:
            raise SettingsMismatchError(
                f"{self.spec.where} has no static token vectors; rerank='static' is unavailable"
            )
        if query.static_vectors is None:
            raise InvalidInputError("rerank='static' needs the query's static token vectors: "
                                    "EncodedQuery(..., static_vectors=static_encoder.encode_query_tokens(text))")
        tokens = np.asarray(query.static_vectors, dtype=np.float32)
        if tokens.ndim != 2 or tokens.shape[1] != self.spec.static_dim or len(tokens) == 0:
            raise VectorSizeError(
                f"static query of shape {tokens.shape}, store expects (q>=1, {self.spec.static_dim})"
            )
        check_directions(tokens, "static query")
        return Branch("static", tokens.tolist())
