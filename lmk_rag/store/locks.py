"""The locks of a store folder: the lock file of the process holding it, the commit lock and counter other
processes copy it under, and the read-write lock that keeps a search's engine calls apart from a write's between
the threads of one process.

A folder is held by one process at a time (``lmk_rag.lock``, :func:`acquire_lock`): the one that writes, or the
first reader. The process holding it takes ``.lmk_rag.commit`` exclusively (an OS lock, ``flock``,
:class:`CommitLock`) around every change of the folder's files: loading the shard, each whole write or delete with
its settings record, optimizing, closing. A reader in another process takes it shared while it copies the files
(:mod:`~lmk_rag.store.copied`), so the copy is of one committed state, never of a change half applied. When a
change ends the holder adds one to the counter in the file; a reader whose copy is older sees the counter move.
Between threads, :class:`ReadWriteLock` lets many searches or one write run engine calls; a writer's also holds the
commit lock.

POSIX only (``fcntl``); elsewhere :data:`AVAILABLE` is False and other processes cannot read a held folder.
"""

from __future__ import annotations

import contextlib
import errno
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from filelock import FileLock, Timeout

from lmk_rag.errors import CorruptStoreError, InvalidInputError, StoreLockedError, StoreReadOnlyError
from lmk_rag.store.base import Backend

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]



LOCK_FILE = "lmk_rag.lock"
#: Where a StoreLockedError sends the user.
CONCURRENCY_DOCS = "see the Concurrency section of docs/store.md"


def locked_open(folder: Path | None, read_only: bool, open_: Callable[[], Backend]) -> tuple[Backend, FileLock | None]:
    """Take a folder's lock (none without a folder), then open the backend; the lock is released if that fails."""
    lock = folder_lock(folder, read_only) if folder is not None else None
    try:
        return open_(), lock
    except BaseException:
        if lock is not None:
            lock.release()
        raise


def folder_lock(folder: Path, read_only: bool) -> FileLock | None:
    """The folder's lock; a reader of a folder nobody can write goes without."""
    try:
        return acquire_lock(folder)
    except StoreReadOnlyError:
        if read_only:
            return None
        raise


def acquire_lock(folder: Path) -> FileLock:
    """Take a folder's write lock without waiting (creating the folder).

    :raises StoreLockedError: when another process holds it.
    """
    if (folder / LOCK_FILE).is_dir():
        raise CorruptStoreError(f"{folder / LOCK_FILE} is a folder, not the store's lock file; remove it")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        lock = FileLock(str(folder / LOCK_FILE), timeout=0)
        lock.acquire()
    except Timeout as error:
        raise StoreLockedError(
            f"{folder} is open in another process (lock {folder / LOCK_FILE}); close it first ({CONCURRENCY_DOCS})"
        ) from error
    except PermissionError as error:
        raise StoreReadOnlyError(
            f"{folder} is not writable ({error.strerror}); open it with read_only=True (lmk-rag query and info do) "
            "to read, or copy it somewhere writable"
        ) from error
    except OSError as error:
        if error.errno == errno.EROFS:
            raise StoreReadOnlyError(
                f"{folder} is on a read-only file system; Qdrant Edge needs to write to open a store: copy it to "
                "writable storage, or serve it from a Qdrant server"
            ) from error
        raise InvalidInputError(
            f"cannot create or open the store folder {folder} ({error.strerror or error}); give a folder you can "
            "write, not one under a file or in a system folder"
        ) from error
    return lock


COMMIT_FILE = ".lmk_rag.commit"
#: Whether this platform has the OS locks readers in other processes need.
AVAILABLE = fcntl is not None
_COUNTER_BYTES = 8


class CommitLock:
    """``<folder>/.lmk_rag.commit``: the folder's commit lock and counter (created when missing).

    :param folder: the store folder.
    :raises OSError: when the file cannot be created or opened.
    """

    def __init__(self, folder: Path) -> None:
        self.path = folder / COMMIT_FILE
        self._fd = self._open()
        self._guard = threading.RLock()
        self._depth = 0
        self._changed = False

    def _open(self) -> int:
        """Open the lock file (read and write, so the holder can count)."""
        return os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)

    @contextlib.contextmanager
    def exclusive(self, changes: bool = False) -> Iterator[None]:
        """Hold the lock alone, waiting for readers copying to finish. Sections nest (in one thread, or waiting for
        another thread's): the outermost takes and releases the OS lock, and counts one commit if any section said
        it changed the store.

        :param changes: this section changes what the store holds (a reader's copy taken before is then old).
        """
        with self._guard:
            if self._depth == 0:
                self._lock(fcntl.LOCK_EX)
            self._depth += 1
            try:
                yield
            finally:
                self._changed = self._changed or changes  # a change that failed half way changed files too
                self._depth -= 1
                if self._depth == 0:
                    try:
                        if self._changed:
                            self._count()
                    finally:
                        self._changed = False
                        fcntl.flock(self._fd, fcntl.LOCK_UN)

    @contextlib.contextmanager
    def shared(self) -> Iterator[int]:
        """Hold the lock shared (beside other readers, never beside a change) and yield the counter."""
        self._lock(fcntl.LOCK_SH)
        try:
            yield self.generation()
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def _lock(self, kind: int) -> None:
        """Take the OS lock on the file the path names now (reopening it if it was replaced meanwhile)."""
        while True:
            fcntl.flock(self._fd, kind)
            try:
                if os.stat(self.path).st_ino == os.fstat(self._fd).st_ino:
                    return
            except FileNotFoundError:
                pass
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = self._open()

    def generation(self) -> int:
        """How many changes the store's holders have committed (0 for a store that counted none)."""
        return int.from_bytes(os.pread(self._fd, _COUNTER_BYTES, 0).ljust(_COUNTER_BYTES, b"\0"), "little")

    def _count(self) -> None:
        """Add one to the counter (under the exclusive lock; readers read it without waiting)."""
        os.pwrite(self._fd, (self.generation() + 1).to_bytes(_COUNTER_BYTES, "little"), 0)

    def close(self) -> None:
        """Close the file (idempotent)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class ReadWriteLock:
    """Many readers or one writer at a time (a writer waiting goes before new readers), between the threads of
    one process: a reader's engine calls (query, visibility, payloads) see one state of the store, never a write
    half applied.

    :param commits: the folder's commit lock, also held alone while writing (None: none, or this process reads a
        copy), so that a reader in another process never copies a write half applied.
    """

    def __init__(self, commits: CommitLock | None = None) -> None:
        self.commits = commits
        self._condition = threading.Condition()
        self._readers = 0
        self._writing = False
        self._waiting = 0

    @contextlib.contextmanager
    def reading(self) -> Iterator[None]:
        """Hold the lock shared."""
        with self._condition:
            self._condition.wait_for(lambda: not self._writing and not self._waiting)
            self._readers += 1
        try:
            yield
        finally:
            with self._condition:
                self._readers -= 1
                self._condition.notify_all()

    @contextlib.contextmanager
    def writing(self) -> Iterator[None]:
        """Hold the lock alone."""
        with self._condition:
            self._waiting += 1
            self._condition.wait_for(lambda: not self._writing and not self._readers)
            self._waiting -= 1
            self._writing = True
        try:
            with contextlib.nullcontext() if self.commits is None else self.commits.exclusive():
                yield
        finally:
            with self._condition:
                self._writing = False
                self._condition.notify_all()
