"""The interface every store backend implements (Qdrant Edge in-process, qdrant-client local or server).

The :class:`~lmk_rag.store.store.LandmarkStore` facade owns the data layout, versions and search
logic; a backend only moves backend-neutral points and plans in and out of one Qdrant flavour. What stands around
its calls: their failures as typed errors (:mod:`~lmk_rag.store.engine_errors`), threads kept apart
(:mod:`~lmk_rag.store.read_write_lock`) and processes (:mod:`~lmk_rag.store.folder_locks`).
"""

from __future__ import annotations

import asyncio
import contextlib
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, Literal

from lmk_rag.store.filters import ConditionBuilder
from lmk_rag.store.types import CollectionSpec, PointData, QueryPlan, ScoredPointData

IndexKind = Literal["keyword", "integer", "float", "text", "bool", "datetime", "uuid"]


class Backend(ABC):
    """One Qdrant flavour. Filters passed in are native (built with :attr:`builder`)."""

    #: a short name for messages and ``info``.
    name: str = "backend"
    #: whether one process at most writes (a locked folder): then the store records what it committed.
    single_writer: bool = False
    #: whether the points of one :meth:`upsert` are applied in their order, a crash keeping a prefix of its batches
    #: (one process's write-ahead log, one record per batch): the write protocol then sends a commit in the same
    #: call as what it commits (see :func:`~lmk_rag.store.writes.write_documents`).
    ordered_upserts: bool = False
    #: the cluster settings given for a new collection (``shard_number``, ``replication_factor``,
    #: ``write_consistency_factor``; only those given): recorded with the store's settings, checked on reopen.
    cluster: Mapping[str, int] = MappingProxyType({})
    #: whether this backend reads a copy of a folder another process holds, taken again when that process commits
    #: (:meth:`~lmk_rag.store.backends.OpenedBackend.refresh`).
    copied: bool = False

    @property
    @abstractmethod
    def builder(self) -> ConditionBuilder:
        """Constructors of this backend's native filter objects."""

    @abstractmethod
    def exists(self) -> bool:
        """Whether the collection (or shard) exists."""

    @abstractmethod
    def create(self, spec: CollectionSpec) -> None:
        """Create the collection with the named vectors of ``spec``."""

    @abstractmethod
    def vector_names(self) -> set[str]:
        """The names of the dense and sparse vectors the existing collection holds."""

    @abstractmethod
    def vector_sizes(self) -> dict[str, int]:
        """The size of each dense vector the existing collection holds, by name (what the settings record's
        dimensions must match)."""

    @abstractmethod
    def read_settings(self) -> dict[str, Any] | None:
        """The store's recorded settings, or None when none were recorded."""

    @abstractmethod
    def write_settings(self, settings: dict[str, Any]) -> None:
        """Record the store's settings durably."""

    @abstractmethod
    def create_payload_index(self, key: str, kind: IndexKind) -> None:
        """Index a payload path for fast filtering; ``"text"`` is a full-text index of lowercased words and their
        prefixes (a ``text`` filter then matches word prefixes in any case)."""

    def reserve(self, points: Sequence[PointData], what: str) -> None:
        """Make sure the backend has room for a change that writes ``points`` (none for a delete) before any of it is
        written; a server manages its own disks, so by default nothing is checked.

        :param what: the change, for the message.
        :raises StoreFullError: when the room is not there.
        """
        return None

    @abstractmethod
    def upsert(self, points: list[PointData]) -> None:
        """Insert or replace points (one request where the backend allows)."""

    @abstractmethod
    def delete(self, native_filter: Any) -> None:
        """Delete every point matching a native filter."""

    @abstractmethod
    def set_payload(self, native_filter: Any, payload: dict[str, Any]) -> None:
        """Set these payload keys (the others stay) on every point matching a native filter, in one update."""

    @abstractmethod
    def query(self, plan: QueryPlan) -> list[list[ScoredPointData]]:
        """Run a plan: one scored list per scorer of the plan, then the plan's plain search's, best first. One Query
        API call; a backend whose process is the only writer may take two (see :class:`QueryPlan`)."""

    @abstractmethod
    def retrieve(self, ids: list[str], with_vectors: bool | list[str]) -> list[PointData]:
        """Points by id (missing ids are skipped), with their full payload and their vectors: all of them (True),
        none (False) or those named."""

    @abstractmethod
    def scroll(
        self, native_filter: Any, with_vectors: bool, limit: int, offset: str | None
    ) -> tuple[list[PointData], str | None]:
        """One page of points matching a filter, and the offset of the next page (None at the end)."""

    @abstractmethod
    def count(self, native_filter: Any) -> int:
        """The exact number of points matching a filter."""

    @abstractmethod
    def optimize(self) -> bool:
        """Build indexes now where the backend only does so when asked; True if anything changed."""

    @abstractmethod
    def flush(self) -> None:
        """Make every write so far durable."""

    @abstractmethod
    def close(self) -> None:
        """Flush and release the backend's files or connections."""

    def async_transport(self, loop: asyncio.AbstractEventLoop) -> contextlib.AbstractContextManager[None]:
        """A context in which this thread's engine calls go to an async client on ``loop``, where the backend has
        one (qdrant-client's ``AsyncQdrantClient``); elsewhere the same calls, unchanged."""
        return contextlib.nullcontext()
