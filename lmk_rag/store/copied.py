"""The backend of a reader in another process than the folder's holder: a Qdrant Edge shard on a private copy of
the folder, taken again when the holder commits (:meth:`~lmk_rag.store.backends.OpenedBackend.refresh`).

Qdrant Edge cannot load a shard another process has open (it locks the WAL), nor read one beside its writer. A
reader in another process instead copies the folder's files into ``<folder>/.lmk_rag.readers/<id>/`` while it holds
the folder's commit lock shared (:class:`~lmk_rag.store.guards.CommitLock`): the holder changes no file then, so the
copy is one committed state, whole (:func:`take_copy`). The copy is opened as a shard of its own and removed when it
is closed; the copies of readers that died are removed by the next reader.

Files are cloned where the file system can (``FICLONE``: btrfs, XFS; the cost is then the metadata), else copied
without their holes (the engine's files are mostly preallocated, sparse pages). No file is hard-linked: the engine
rewrites its files in place (flags, trackers, pages, the WAL), and loading a copy replays its WAL into it.

Every engine call runs on one copy: a refresh takes and opens the new copy first (:meth:`CopiedBackend.take`), then
swaps it in between engine calls (:meth:`CopiedBackend.swap`, waiting for those in flight), then closes and
removes the old one. It never writes: the store is open read-only.

The first reader of a folder no process holds holds it itself: its backend starts on the folder's own shard
(``held``, no copy) and hands the folder over when a writer asks (:meth:`CopiedBackend.leave`, called by
:class:`~lmk_rag.store.backends.Handover`): it takes a copy as any reader does, reads it from then on, and closes
the folder's shard so that its lock can be released. While it holds the folder, a writer's handle in the same
process writes through it to the folder's shard.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from lmk_rag.errors import StoreReadOnlyError
from lmk_rag.store.base import Backend, IndexKind
from lmk_rag.store.edge import SETTINGS_FILE, SHARD_DIR, EdgeBackend, require_space, shard_bytes
from lmk_rag.store.filters import ConditionBuilder
from lmk_rag.store.guards import CommitLock, ReadWriteLock, fcntl
from lmk_rag.store.types import CollectionSpec, PointData, QueryPlan, ScoredPointData

READERS_DIR = ".lmk_rag.readers"
_OWNER = ".lmk_rag.owner"  # a name a store folder may hold, so a copy opens as a store of its own
_FICLONE = 0x40049409  # linux/fs.h: _IOW(0x94, 9, int)
_CHUNK = 64 * 2**20


@dataclass
class Copy:
    """One copy of a store folder.

    :param folder: the copy (a store folder of its own: ``lmk_rag.json`` and ``shard``).
    :param generation: the store's commit counter when it was taken.
    :param bytes: bytes of data copied (holes left out).
    :param owner: the open file whose lock says a live reader owns the copy.
    """

    folder: Path
    generation: int
    bytes: int
    owner: int

    def remove(self) -> None:
        """Remove the copy (idempotent)."""
        shutil.rmtree(self.folder, ignore_errors=True)
        if self.owner >= 0:
            os.close(self.owner)
            self.owner = -1


def take_copy(folder: Path, commits: CommitLock, names: tuple[str, ...]) -> Copy:
    """Copy ``names`` (files and folders) of a store folder at one committed state, first removing the copies of
    readers that are gone.

    :param folder: the store folder.
    :param commits: its commit lock, held shared while the files are copied.
    :param names: what to copy, relative to the folder.
    :return: the copy, owned by this process until :meth:`Copy.remove`.
    :raises OSError: when the copy cannot be made (no room, no permission).
    """
    readers = folder / READERS_DIR
    readers.mkdir(exist_ok=True)
    remove_abandoned(readers)
    target = readers / uuid.uuid4().hex
    target.mkdir()
    copy = Copy(target, 0, 0, _own(target))
    try:
        with commits.shared() as generation:
            copy.generation = generation
            for name in names:
                source = folder / name
                if source.is_dir():
                    copy.bytes += _copy_tree(source, target / name)
                elif source.exists():
                    copy.bytes += _copy_file(source, target / name)
    except BaseException:
        copy.remove()
        raise
    return copy


def _own(target: Path) -> int:
    """Lock the copy's owner file for this process: locked under a temporary name, then renamed, so another reader
    never finds an owner file its live owner has not locked yet."""
    temporary = target / f"{_OWNER}.{os.getpid()}"
    fd = os.open(temporary, os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.replace(temporary, target / _OWNER)
    return fd


def remove_abandoned(readers: Path) -> None:
    """Remove the copies whose owner file no process holds locked (their reader died without closing)."""
    for entry in readers.iterdir():
        owner = entry / _OWNER
        try:
            fd = os.open(owner, os.O_RDONLY)
        except OSError:  # not a copy, or one being made (its owner file is renamed into place once locked)
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            continue  # a live reader's
        finally:
            os.close(fd)  # closing releases a lock just taken
        shutil.rmtree(entry, ignore_errors=True)


def _copy_tree(source: Path, target: Path) -> int:
    """Copy a folder's files (see :func:`_copy_file`); return the bytes copied."""
    copied = 0
    target.mkdir()
    for entry in sorted(source.iterdir()):
        if entry.is_dir():
            copied += _copy_tree(entry, target / entry.name)
        else:
            copied += _copy_file(entry, target / entry.name)
    return copied


def _copy_file(source: Path, target: Path) -> int:
    """Clone a file where the file system can, else copy its data extents and leave its holes; return the bytes
    of data copied (0 for a clone)."""
    with open(source, "rb") as src, open(target, "wb") as dst:
        with contextlib.suppress(OSError):
            fcntl.ioctl(dst.fileno(), _FICLONE, src.fileno())
            return 0
        size = os.fstat(src.fileno()).st_size
        os.ftruncate(dst.fileno(), size)
        copied = 0
        for start, end in _extents(src.fileno(), size):
            copied += _copy_range(src.fileno(), dst.fileno(), start, end)
        return copied


def _copy_range(src: int, dst: int, start: int, end: int) -> int:
    """Copy bytes ``[start, end)`` to the same offsets, in the kernel where it can; return the bytes copied."""
    offset = start
    while offset < end:
        count = min(_CHUNK, end - offset)
        try:
            done = os.copy_file_range(src, dst, count, offset, offset)
        except (AttributeError, OSError):  # not Linux, or across file systems it cannot
            data = os.pread(src, count, offset)
            done = os.pwrite(dst, data, offset) if data else 0
        if not done:
            break
        offset += done
    return offset - start


def _extents(fd: int, size: int) -> list[tuple[int, int]]:
    """The ``(start, end)`` byte ranges of a file that hold data (the whole file where holes cannot be found)."""
    if not hasattr(os, "SEEK_DATA"):
        return [(0, size)]
    extents, offset = [], 0
    while offset < size:
        try:
            start = os.lseek(fd, offset, os.SEEK_DATA)
        except OSError as error:
            if error.errno == errno.ENXIO:  # no data after offset
                break
            return [(0, size)]
        end = min(os.lseek(fd, start, os.SEEK_HOLE), size)
        extents.append((start, end))
        offset = end
    return extents


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
    """A copy, its shard and what it cost (from :meth:`CopiedBackend.take`); no copy: the folder's own shard, held."""

    copy: Copy | None
    edge: EdgeBackend
    cost: Refresh


class CopiedBackend(Backend):
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
