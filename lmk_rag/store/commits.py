"""The commit lock of a store folder: who may change its files, and a counter of the changes.

The process holding a folder (:mod:`~lmk_rag.store.backends`) takes ``.lmk_rag.commit`` exclusively (an OS lock,
``flock``) around every change of the folder's files: loading the shard, each whole write or delete with its
settings record, optimizing, closing. A reader in another process takes it shared while it copies the files
(:mod:`~lmk_rag.store.copies`), so the copy is of one committed state, never of a change half applied. When a change
ends the holder adds one to the counter in the file; a reader whose copy is older sees the counter move.

POSIX only (``fcntl``); elsewhere :data:`AVAILABLE` is False and other processes cannot read a held folder.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

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
