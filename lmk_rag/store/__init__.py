"""Landmark nodes in Qdrant (Edge in-process, or qdrant-client local/server) with two-stage search."""

from lmk_rag.store.filters import FieldCondition, Filter
from lmk_rag.store.store import LandmarkStore
from lmk_rag.store.types import Hit, NodeRecord, Rerank, StoreMode

__all__ = ["FieldCondition", "Filter", "Hit", "LandmarkStore", "NodeRecord", "Rerank", "StoreMode"]
