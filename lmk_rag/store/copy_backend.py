"""The backend of a reader in another process than the folder's holder (:class:`CopyBackend`): a Qdrant Edge shard
on a private copy of the folder (:mod:`~lmk_rag.store.folder_copy`), taken again when the holder commits
(:meth:`~lmk_rag.store.backends.OpenedBackend.refresh`).

Qdrant Edge cannot load a shard another process has open (it locks the WAL), nor read one beside its writer. A
reader in another process instead opens its copy of the folder as a shard of its own, removed when it is closed.

Every engine call runs on one copy: a refresh takes and opens the new copy first (:meth:`CopyBackend.take`), then
swaps it in between engine calls (:meth:`CopyBackend.swap`, waiting for those in flight), then closes and
removes the old one. It never writes: the store is open read-only.

The first reader of a folder no process holds holds it itself: its backend starts on the folder's own shard
(``held``, no copy) and hands the folder over when a writer asks (:meth:`CopyBackend.leave`, called by
:class:`~lmk_rag.store.backends.Handover`): it takes a copy as any reader does, reads it from then on, and closes
the folder's shard so that its lock can be released. While it holds the folder, a writer's handle in the same
process writes through it to the folder's shard.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from lmk_rag.errors import StoreReadOnlyError
from lmk_rag.store.base import Backend, IndexKind
from lmk_rag.store.edge import SETTINGS_FILE, SHARD_DIR, EdgeBackend, require_space, shard_bytes
from lmk_rag.store.filters import ConditionBuilder
from lmk_rag.store.folder_copy import Copy, take_copy
from lmk_rag.store.folder_locks import CommitLock
from lmk_rag.store.read_write_lock import ReadWriteLock
from lmk_rag.store.types import CollectionSpec, PointData, QueryPlan, ScoredPointData

T = TypeVar("T")


@dataclass(frozen=True)
class Refresh:
    """What a copy cost.

    :param generation: the store's commit counter the copy holds.
    :param bytes: bytes of data copied.
    :param seconds: wall time to copy and open it.
    """

    generation: int
    bytes: int
    seconds: float


@dataclass
class Opened:
    """A copy, its shard and what it cost (from :meth:`CopyBackend.take`); no copy: the folder's own shard, held."""

    copy: Copy | None
    edge: EdgeBackend
    cost: Refresh


class CopyBackend(Backend):
    """Qdrant Edge on this process's copy of a store folder another process holds.

    :param folder: the store folder.
    :param commits: the folder's commit lock.
    :param batch_size: points per update operation (unused: a copy is never written).
    :param held: the folder's own shard, which this process holds (read from until :meth:`leave`; None: take a
        copy now).
    :raises StoreFullError: when the disk has no room for the copy.
    """

    single_writer = True
    ordered_upserts = True
    copied = True

    def __init__(self, folder: Path, commits: CommitLock, batch_size: int, held: EdgeBackend | None = None) -> None:
        """Take the first copy and open it (or read the held shard)."""
        self.folder = folder
        self.commits = commits
        self.batch_size = batch_size
        #: held by the one thread taking a new copy.
        self.refreshing = threading.Lock()
        self._swap = ReadWriteLock()
        self._current = self.take() if held is None else Opened(None, held, Refresh(commits.generation(), 0, 0.0))

    @property
    def name(self) -> str:  # type: ignore[override]
        """``qdrant-edge`` while the folder's own shard is read, ``qdrant-edge (reader copy)`` after."""
        return "qdrant-edge" if self.holding else "qdrant-edge (reader copy)"

    @property
    def holding(self) -> bool:
        """Whether this process reads the folder's own shard (it holds the folder), not a copy."""
        return self._current.copy is None

    @property
    def last(self) -> Refresh:
        """What the copy read now cost."""
        return self._current.cost

    @property
    def copy_folder(self) -> Path:
        """The folder of the copy read now (the store folder while it is held)."""
        return self.folder if self._current.copy is None else self._current.copy.folder

    @property
    def _edge(self) -> EdgeBackend:
        return self._current.edge

    def take(self) -> Opened:
        """Take a copy of the folder now and load its shard (read from it after :meth:`swap`).

        :raises StoreFullError: when the disk has no room for the copy.
        :raises OSError: when the copy cannot be made.
        """
        start = time.perf_counter()
        require_space(self.folder, "copy the store for a reader", shard_bytes(self.folder / SHARD_DIR)[1])
        copy = take_copy(self.folder, self.commits, (SETTINGS_FILE, SHARD_DIR))
        try:
            edge = EdgeBackend(copy.folder, self.batch_size)
        except BaseException:
            copy.remove()
            raise
        return Opened(copy, edge, Refresh(copy.generation, copy.bytes, time.perf_counter() - start))

    def moved(self) -> bool:
        """Whether the holder committed a change since the copy read now was taken (never while this process holds
        the folder: nobody else changes it)."""
        return self._current.copy is not None and self.commits.generation() != self._current.copy.generation

    def swap(self, fresh: Opened) -> None:
        """Read from a copy :meth:`take` made from now on (after the engine calls in flight), and remove the old."""
        with self._swap.writing():
            old, self._current = self._current, fresh
        try:
            old.edge.close()
        finally:
            if old.copy is not None:
                old.copy.remove()

    def leave(self, fresh: Opened) -> EdgeBackend:
        """Read from a copy :meth:`take` made from now on (after the engine calls in flight), and return the
        folder's own shard, held until now, for the caller to close before it releases the folder."""
        with self._swap.writing():
            old, self._current = self._current, fresh
        return old.edge

    def _read(self, call: Callable[[EdgeBackend], T]) -> T:
        """Run an engine call on the current copy."""
        with self._swap.reading():
            return call(self._edge)

    @property
    def builder(self) -> ConditionBuilder:
        """Edge filter constructors."""
        return self._edge.builder

    def exists(self) -> bool:
        """Whether the copy holds a shard."""
        return self._read(lambda edge: edge.exists())

    def vector_names(self) -> set[str]:
        """Names from the copy's shard config."""
        return self._read(lambda edge: edge.vector_names())

    def vector_sizes(self) -> dict[str, int]:
        """Dense vector sizes from the copy's shard config."""
        return self._read(lambda edge: edge.vector_sizes())

    def read_settings(self) -> dict[str, Any] | None:
        """The copy's settings record."""
        return self._read(lambda edge: edge.read_settings())

    def query(self, plan: QueryPlan) -> list[list[ScoredPointData]]:
        """The plan's Query API calls on the copy, all on the same copy (:meth:`EdgeBackend.query`)."""
        return self._read(lambda edge: edge.query(plan))

    def retrieve(self, ids: list[str], with_vectors: bool | list[str]) -> list[PointData]:
        """Points by id."""
        return self._read(lambda edge: edge.retrieve(ids, with_vectors))

    def scroll(self, native_filter: Any, with_vectors: bool, limit: int,
               offset: str | None) -> tuple[list[PointData], str | None]:
        """One page of points."""
        return self._read(lambda edge: edge.scroll(native_filter, with_vectors, limit, offset))

    def count(self, native_filter: Any) -> int:
        """Exact count."""
        return self._read(lambda edge: edge.count(native_filter))

    def _held(self) -> EdgeBackend:
        """The folder's own shard, for a write handle of this process while it holds the folder.

        :raises StoreReadOnlyError: on a copy.
        """
        if self._current.copy is not None:
            raise self._refuse()
        return self._current.edge

    def _refuse(self) -> StoreReadOnlyError:
        """The error of any write: a copy is for reading."""
        return StoreReadOnlyError(f"{self.folder}: this process reads a copy (another process holds the store); "
                                  "write from the process that holds it")

    def create(self, spec: CollectionSpec) -> None:
        """On the held shard; refused on a copy, which is never written."""
        self._held().create(spec)

    def write_settings(self, settings: dict[str, Any]) -> None:
        """On the held shard; refused on a copy, which is never written."""
        self._held().write_settings(settings)

    def create_payload_index(self, key: str, kind: IndexKind) -> None:
        """On the held shard; refused on a copy, which is never written."""
        self._held().create_payload_index(key, kind)

    def upsert(self, points: list[PointData]) -> None:
        """On the held shard; refused on a copy, which is never written."""
        self._held().upsert(points)

    def delete(self, native_filter: Any) -> None:
        """On the held shard; refused on a copy, which is never written."""
        self._held().delete(native_filter)

    def set_payload(self, native_filter: Any, payload: dict[str, Any]) -> None:
        """On the held shard; refused on a copy, which is never written."""
        self._held().set_payload(native_filter, payload)

    def reserve(self, points: Sequence[PointData], what: str) -> None:
        """On the held shard; refused on a copy, which is never written."""
        self._held().reserve(points, what)

    def optimize(self) -> bool:
        """On the held shard; refused on a copy, which is never written."""
        return self._held().optimize()

    def flush(self) -> None:
        """Flush the held shard; nothing to flush on a copy, which is never written."""
        if self._current.copy is None:
            self._current.edge.flush()

    def close(self) -> None:
        """Close the copy's shard and remove the copy (idempotent)."""
        with self._swap.writing():
            try:
                self._edge.close()
            finally:
                if self._current.copy is not None:
                    self._current.copy.remove()
                self.commits.close()
