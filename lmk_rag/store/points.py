"""The write side of a store's named vectors: node points with every vector the store holds (shapes checked, static
and BM25 vectors added; a static store holds no chunk vectors). The query side: :mod:`lmk_rag.store.query_vectors`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from lmk_rag.errors import InvalidInputError, SettingsMismatchError, VectorSizeError
from lmk_rag.store import records as rec
from lmk_rag.store.bm25 import Bm25Encoder
from lmk_rag.store.records import recorded_vectors
from lmk_rag.store.types import NodeRecord, PointData

if TYPE_CHECKING:  # pragma: no cover
    from lmk_rag.encoder.protocols import TokenEncoder


class NodeVectors:
    """Turns a store's :class:`NodeRecord` s into points carrying every vector its settings name.

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
    def from_settings(cls, settings: dict[str, Any], static_encoder: TokenEncoder | None, where: str) -> NodeVectors:
        """The vectors a store's settings record names (checked by ``settings.validate_settings``)."""
        bm25 = Bm25Encoder(settings["bm25_language"]) if settings["bm25"] else None
        static_dim = None if settings["static"] is None else int(settings["static"]["dim"])
        chunks = "chunks" in recorded_vectors(settings)
        return cls(int(settings["encoder"]["dim"]), static_dim, static_encoder, bm25, where, chunks)

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
