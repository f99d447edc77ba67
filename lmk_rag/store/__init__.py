"""Landmark nodes in Qdrant (Edge in-process, or qdrant-client local/server) with two-stage search."""

from lmk_rag.store.filters import Condition, FieldCondition, Filter
from lmk_rag.store.store import LandmarkStore
from lmk_rag.store.types import (
    DEFAULT_BATCH_SIZE,
    ChunkScore,
    EncodedQuery,
    Evidence,
    Hit,
    NodeRecord,
    Rerank,
    SearchOptions,
    ServerOptions,
    StorageOptions,
    StoreMode,
)

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "ChunkScore",
    "Condition",
    "EncodedQuery",
    "Evidence",
    "FieldCondition",
    "Filter",
    "Hit",
    "LandmarkStore",
    "NodeRecord",
    "Rerank",
    "SearchOptions",
    "ServerOptions",
    "StorageOptions",
    "StoreMode",
]
