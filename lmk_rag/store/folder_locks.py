"""The locks of a store folder between processes: the lock file of the process holding it, the holder's record and
the handover of the folder from a reader to a writer, and the commit lock and counter other processes copy it under.

A folder is held by one process at a time (``lmk_rag.lock``, :func:`acquire_lock`): the one that writes, or the
first reader until a writer asks for it. The holder records its pid and whether it writes in ``.lmk_rag.holder``
(:func:`write_holder`). A writer finding the folder held by a reader writes its pid into ``.lmk_rag.handover`` and
waits for the lock (:func:`await_handover`, at most :data:`HANDOVER_TIMEOUT` seconds); the reader, which watches for
that file, copies the folder, reads its copy from then on and releases the lock
(:class:`~lmk_rag.store.backends.Handover`). The process holding it takes ``.lmk_rag.commit`` exclusively (an OS
lock, ``flock``, :class:`CommitLock`) around every change of the folder's files: loading the shard, each whole write
or delete with its settings record, optimizing, closing. A reader in another process takes it shared while it copies
the files (:mod:`~lmk_rag.store.folder_copy`), so the copy is of one committed state, never of a change half applied.
When a change ends the holder adds one to the counter in the file; a reader whose copy is older sees the counter
move. A writer's :class:`~lmk_rag.store.read_write_lock.ReadWriteLock` also holds the commit lock.

POSIX only (``fcntl``); elsewhere :data:`AVAILABLE` is False and other processes cannot read a held folder.
"""

from __future__ import annotations

import contextlib
import errno
import os
import threading
import time
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


HOLDER_FILE = ".lmk_rag.holder"
HANDOVER_FILE = ".lmk_rag.handover"
#: Seconds a writer waits for a reader holding the folder to hand it over (the reader first waits for its calls in
#: flight, then copies the folder) before it raises :class:`StoreLockedError` naming the reader's pid.
HANDOVER_TIMEOUT = 30.0
#: Seconds between two looks, a writer's at the lock and a holding reader's at the handover request.
HANDOVER_POLL = 0.05


def write_holder(folder: Path, writes: bool) -> None:
    """Record this process as the folder's holder (call with the lock held): its pid, and whether it writes."""
    temporary = folder / f"{HOLDER_FILE}.{os.getpid()}"
    with contextlib.suppress(OSError):  # a record is advice: a writer without it waits for the lock, then says so
        temporary.write_text(f"{os.getpid()} {'write' if writes else 'read'}\n")
        os.replace(temporary, folder / HOLDER_FILE)


def clear_holder(folder: Path) -> None:
    """Remove this process's holder record (before the lock is released)."""
    record = read_holder(folder, alive=False)
    if record is not None and record[0] == os.getpid():
        with contextlib.suppress(OSError):
            os.unlink(folder / HOLDER_FILE)


def read_holder(folder: Path, alive: bool = True) -> tuple[int, bool] | None:
    """The holder's ``(pid, writes)`` as recorded (None: no record, a damaged one, or with ``alive`` a process gone:
    a holder killed with -9 leaves its record behind, and the OS released its lock)."""
    try:
        pid_text, mode = (folder / HOLDER_FILE).read_text().split()
        pid = int(pid_text)
    except (OSError, ValueError):
        return None
    if alive and not pid_alive(pid):
        return None
    return pid, mode == "write"


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid runs (on this machine)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def handover_requested(folder: Path) -> bool:
    """Whether a live writer (not this process) waits for the folder; a dead writer's request is removed."""
    try:
        pid = int((folder / HANDOVER_FILE).read_text().strip() or 0)
    except FileNotFoundError:
        return False
    except (OSError, ValueError):  # damaged: a writer rewrites its request while it waits
        return False
    if pid == os.getpid():
        return False
    if not pid_alive(pid):
        with contextlib.suppress(OSError):
            os.unlink(folder / HANDOVER_FILE)
        return False
    return True


def _request(folder: Path) -> None:
    """Ask the folder's reader to hand it over (this process's pid in the request file)."""
    temporary = folder / f"{HANDOVER_FILE}.{os.getpid()}"
    temporary.write_text(f"{os.getpid()}\n")
    os.replace(temporary, folder / HANDOVER_FILE)


def _withdraw(folder: Path) -> None:
    """Remove this process's request (another writer's stays)."""
    path = folder / HANDOVER_FILE
    with contextlib.suppress(OSError, ValueError):
        if int(path.read_text().strip()) == os.getpid():
            os.unlink(path)


def await_handover(folder: Path, timeout: float | None = None) -> FileLock:
    """A writer's wait for a folder another process holds: at once refused when a writer holds it, else the reader
    holding it is asked to hand it over (:data:`HANDOVER_FILE`) and the lock taken when it does.

    :param timeout: seconds to wait (None: :data:`HANDOVER_TIMEOUT`).
    :raises StoreLockedError: when a writer holds the folder, or its reader did not hand it over in time (busy in
        a call that long, stopped, or a lmk-rag without handovers); the error's ``pid`` is the holder's.
    """
    deadline = time.monotonic() + (HANDOVER_TIMEOUT if timeout is None else timeout)
    try:
        while True:
            holder = read_holder(folder)
            if holder is not None and holder[1]:
                raise StoreLockedError(
                    f"{folder} is being written by another process (pid {holder[0]}, lock {folder / LOCK_FILE}): one "
                    "process at a time writes a store folder. Wait for it to finish, or close it "
                    f"({CONCURRENCY_DOCS})", pid=holder[0])
            if not (folder / HANDOVER_FILE).exists():
                _request(folder)
            try:
                return acquire_lock(folder)
            except StoreLockedError:
                pass
            if time.monotonic() >= deadline:
                pid = None if holder is None else holder[0]
                who = "another process (no holder record: a lmk-rag without handovers)" if pid is None else \
                    f"the reader with pid {pid}"
                raise StoreLockedError(
                    f"{folder} is held by {who} (lock {folder / LOCK_FILE}), which did not hand it over to this "
                    f"writer within {HANDOVER_TIMEOUT if timeout is None else timeout:g} s: it is busy in a call that "
                    "long, stopped, or runs a lmk-rag without handovers. Retry when its call ends, or stop it "
                    f"({CONCURRENCY_DOCS})", pid=pid)
            time.sleep(HANDOVER_POLL)
    finally:
        _withdraw(folder)


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
