"""Which backend a store opens, with the folder checks and the single-writer lock that come with it.

Exactly one of ``path`` (a Qdrant Edge folder; the default ``./lmk_store``), ``url`` (a Qdrant server),
``client`` (an existing ``QdrantClient``), ``location`` (qdrant-client local mode: ``":memory:"`` or a folder) or an
``aclient`` alone (an ``AsyncQdrantClient`` in local mode) picks the backend. A folder is held by one process at a
time (its lock file): the one that writes, or the first reader until a writer asks for it. On Edge, a reader in
another process reads its own copy of the folder (:mod:`~lmk_rag.store.folder_copy`), taken at a committed state
under the folder's commit lock (:mod:`~lmk_rag.store.folder_locks`); a reader holding the folder hands it over to a
writer that asks (:class:`Handover`): readers never keep a writer out.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from filelock import FileLock

from lmk_rag.errors import (
    CorruptStoreError,
    InvalidInputError,
    StoreClosedError,
    StoreLockedError,
    StoreNotFoundError,
    needs_extra,
)
from lmk_rag.store.base import Backend
from lmk_rag.store.folder_locks import (
    AVAILABLE,
    CONCURRENCY_DOCS,
    HANDOVER_POLL,
    LOCK_FILE,
    CommitLock,
    await_handover,
    clear_holder,
    folder_lock,
    handover_requested,
    locked_open,
    write_holder,
)
from lmk_rag.store.read_write_lock import ReadWriteLock
from lmk_rag.store.types import DEFAULT_COLLECTION, ServerOptions

if TYPE_CHECKING:  # pragma: no cover
    from lmk_rag.store.copy_backend import CopyBackend
    from lmk_rag.store.writes import CommittedCounts

DEFAULT_PATH = "./lmk_store"
logger = logging.getLogger(__name__)


@dataclass
class SharedBackend:
    """An open backend and what every handle of it in this process shares.

    :param backend: the backend.
    :param where: the store's location, for messages (a folder or ``collection 'name'``).
    :param lock: the folder's write lock (None for servers and in-memory local mode).
    :param key: the folder in :data:`_SHARED` (None: a backend of one handle only).
    :param commits: the folder's commit lock, which this process holds the folder with (None: no folder, a folder
        nobody can write, or this process reads a copy).
    """

    backend: Backend
    where: str
    lock: FileLock | None
    key: Path | None = None
    commits: CommitLock | None = None
    handles: int = 1
    #: the settings record every handle's store reads and its committed counts rewrite (set by the first handle's open).
    settings: dict[str, Any] | None = None
    #: the committed counts of the store (set with :attr:`settings`).
    committed_counts: CommittedCounts | None = None
    #: serialises the writes of every handle (and thread) of this backend, encoding included.
    write_lock: threading.RLock = field(default_factory=threading.RLock)
    #: keeps a reader's engine calls apart from a writer's (see :class:`ReadWriteLock`).
    access: ReadWriteLock = field(init=False)
    #: the handles of this process that may write (a reader holding the folder hands it over only while none is).
    writers: int = 0
    #: the watch for a writer's request, while this process holds the folder to read it (see :class:`Handover`).
    handover: Handover | None = None

    def __post_init__(self) -> None:
        self.access = ReadWriteLock(None if self.commits is None else self.commits.exclusive)

    def changing(self) -> contextlib.AbstractContextManager[None]:
        """The commit lock held alone (nothing without one): opening a store to write, which may repair it."""
        return contextlib.nullcontext() if self.commits is None else self.commits.exclusive()


#: The Edge folders open in this process, by resolved path: a second open shares the shard (Qdrant Edge cannot
#: load one shard twice).
_SHARED: dict[Path, SharedBackend] = {}
_SHARED_LOCK = threading.Lock()


class OpenedBackend:
    """One handle's view of a shared backend.

    :param shared: the backend and what the handles share.
    """

    def __init__(self, shared: SharedBackend, writes: bool = False) -> None:
        self.shared = shared
        self.where = shared.where
        self.writes = writes
        #: whether the backend is a reader's copy, which :meth:`refresh` takes again (fixed when it is opened).
        self.copied = shared.backend.copied
        self._closed = False

    @property
    def backend(self) -> Backend:
        """The backend, or after :meth:`release` a :class:`ClosedBackend`."""
        return ClosedBackend(self.where) if self._closed else self.shared.backend  # type: ignore[return-value]

    def release(self) -> None:
        """Let go of the backend (idempotent); the last handle closes it and releases the lock. The store's later
        calls raise :class:`StoreClosedError`."""
        if self._closed:
            return
        self._closed = True
        shared = self.shared
        with _SHARED_LOCK:
            shared.handles -= 1
            shared.writers -= self.writes
            if shared.handles > 0:
                if self.writes and not shared.writers and shared.lock is not None and shared.handover is not None:
                    write_holder(shared.key, writes=False)  # type: ignore[arg-type]  # a reader again: it hands over
                return
            if shared.key is not None:
                _SHARED.pop(shared.key, None)
        if shared.handover is not None:
            shared.handover.stop()  # after a handover in flight ends
        try:
            shared.backend.close()
        finally:
            if shared.commits is not None:
                shared.commits.close()
            if shared.lock is not None:
                if shared.key is not None:
                    clear_holder(shared.key)
                shared.lock.release()
                shared.lock = None

    def refresh(self) -> bool:
        """On a reader's copy (:class:`~lmk_rag.store.copy_backend.CopyBackend`): take a new copy when the folder's
        holder committed since, and swap it in between this process's searches, with its settings record.

        :return: True when a new copy is read from now on (False: the store was current, or is not a copy).
        """
        from lmk_rag.store.copy_backend import CopyBackend
        from lmk_rag.store.settings import validate_settings

        backend = self.shared.backend
        if self._closed or not isinstance(backend, CopyBackend) or not backend.moved():
            return False
        with backend.refreshing:
            if not backend.moved():  # another thread took it meanwhile
                return False
            fresh = backend.take()
            with self.shared.access.writing():
                backend.swap(fresh)
                if self.shared.settings is not None:
                    settings = validate_settings(backend.read_settings() or {}, self.where)
                    self.shared.settings.clear()
                    self.shared.settings.update(settings)
        return True


class ClosedBackend:
    """What a closed store's backend becomes: any use raises :class:`StoreClosedError`.

    :param where: the store, for the message.
    """

    def __init__(self, where: str) -> None:
        self.where = where

    @property
    def name(self) -> str:
        """The backend's name in ``repr``."""
        return "closed"

    def __getattr__(self, attribute: str) -> Any:
        raise StoreClosedError(f"{self.where}: this store is closed; open it again (LandmarkStore(...)) to use it")


class Handover:
    """While this process holds a folder to read it, a daemon thread that looks for a writer's request
    (:data:`~lmk_rag.store.folder_locks.HANDOVER_FILE`) every
    :data:`~lmk_rag.store.folder_locks.HANDOVER_POLL` seconds and hands the folder over: it copies the folder as any
    reader does, waits for this process's calls in flight and swaps the copy in, closes the folder's shard and releases
    its lock. The handles read the copy from then on and follow the writer's commits. No handover while a handle of
    this process may write.

    :param shared: the backend, a :class:`~lmk_rag.store.copy_backend.CopyBackend` reading the held shard.
    """

    def __init__(self, shared: SharedBackend) -> None:
        self.shared = shared
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name=f"lmk-rag handover {shared.where}", daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        folder = self.shared.key
        assert folder is not None
        while not self._stop.wait(HANDOVER_POLL):
            if not handover_requested(folder):
                continue
            try:
                if self.hand_over():
                    return
            except Exception as error:  # the writer waits, then says the reader did not hand over
                logger.warning("%s: cannot hand the store over to the writer asking for it: %s", self.shared.where,
                               error)
                return

    def hand_over(self) -> bool:
        """Hand the folder over now (see the class). The copy is taken holding no lock of this process, so its other
        handles open, close and search meanwhile; only the swap waits for the calls in flight.

        :return: False when it cannot be handed over (a handle of this process may write; the store is closing).
        """
        shared = self.shared
        with _SHARED_LOCK:
            if not self._may():
                return False
            backend: CopyBackend = shared.backend  # type: ignore[assignment]
        fresh = backend.take()  # as any reader: under the commit lock, shared
        with shared.access.writing(), _SHARED_LOCK:  # after this process's calls in flight
            held = backend.leave(fresh) if self._may() else None
            if held is not None:
                commits, shared.commits, shared.access.exclusive = shared.commits, None, None
        if held is None:  # a writer's handle opened here meanwhile, or the store is closing
            fresh.edge.close()
            if fresh.copy is not None:
                fresh.copy.remove()
            return False
        try:
            held.close()  # under the folder's commit lock, which this process still holds the folder with
        finally:
            if commits is not None:
                commits.close()
            with _SHARED_LOCK:
                if shared.lock is not None:
                    clear_holder(shared.key)  # type: ignore[arg-type]
                    shared.lock.release()
                    shared.lock = None
        logger.info("%s: handed over to a writer; reading a copy from now on", shared.where)
        return True

    def _may(self) -> bool:
        """Whether the folder may be handed over now (with :data:`_SHARED_LOCK` held)."""
        from lmk_rag.store.copy_backend import CopyBackend

        shared, backend = self.shared, self.shared.backend
        return (not self._stop.is_set() and shared.writers == 0 and shared.key is not None
                and _SHARED.get(shared.key) is shared and isinstance(backend, CopyBackend) and backend.holding)

    def stop(self) -> None:
        """Stop watching (waiting for a handover in flight)."""
        self._stop.set()
        if threading.current_thread() is not self._thread:
            self._thread.join()


def open_backend(
    path: str | os.PathLike[str] | None,
    url: str | None,
    api_key: str | None,
    client: Any,
    aclient: Any,
    location: str | None,
    collection_name: str | None,
    create: bool,
    options: ServerOptions,
    batch_size: int,
    read_only: bool = False,
) -> OpenedBackend:
    """Open the backend the arguments name (see the module docstring). A folder (``path``, a ``location`` on disk) is
    made absolute and resolved first: the store records it so, and reopens the same folder from any directory.

    :param aclient: a ``qdrant_client.AsyncQdrantClient`` for the async methods, or None.
    :param collection_name: the collection on a qdrant-client backend (None: :data:`DEFAULT_COLLECTION`).
    :param options: the qdrant-client backend's options (see :class:`ServerOptions`).
    :param batch_size: points per upsert request.
    :param read_only: never create the store. A folder is still held while open (Qdrant Edge cannot share a shard
        between processes, and a second process loading it can damage the first one's files), unless the folder
        cannot be written at all (then no writer can be there either); an Edge folder another process holds is
        read from a copy of this process's own.
    :raises InvalidInputError: for several locations, a collection name or server options given to an Edge store, a
        bad collection name, a URL or location qdrant-client cannot use, or a folder path that is a file.
    :raises StoreLockedError: when another process holds the folder (to write, or a reader's copy cannot be made).
    :raises CorruptStoreError: for a folder that is not a lmk-rag store.
    :raises StoreNotFoundError: when ``create`` is False and there is no store folder.
    :raises MissingExtraError: when the backend's Qdrant package is not installed.
    """
    given = (("path", path), ("url", url), ("client", client), ("location", location))
    chosen = [name for name, value in given if value is not None]
    check_locations(path, url, api_key, location)
    if isinstance(collection_name, os.PathLike):
        raise InvalidInputError(f"collection_name is a collection's name, got the path {os.fspath(collection_name)!r}; "
                                "give a store folder as path=")
    if len(chosen) > 1:
        raise InvalidInputError(f"give only one of path, url, client, location; got {', '.join(chosen)}")
    if path is not None or not (chosen or aclient is not None):
        server_only = (["collection_name"] if collection_name is not None else []) + list(options.given())
        if server_only:
            raise InvalidInputError(
                f"{', '.join(server_only)}: only for qdrant-client backends (url=, client=, aclient= or location=); "
                "an Edge store is one folder in this process, named by path="
            )
        return _open_edge(Path(path if path is not None else DEFAULT_PATH).resolve(), create and not read_only,
                          read_only, batch_size)
    with needs_extra("a qdrant-client store (url=, client=, aclient= or location=)"):
        from lmk_rag.store.server import ServerBackend, check_collection

    collection_name = DEFAULT_COLLECTION if collection_name is None else collection_name
    check_collection(collection_name)
    folder = None if location in (None, ":memory:") else Path(location).resolve()  # on disk: a locked folder
    if folder is not None:
        location = str(folder)  # what the store's client and to_dict() record: the same folder from any directory
        check_not_file(folder)
        if not create and not folder.is_dir():
            raise StoreNotFoundError(f"no lmk-rag store at {folder}")  # checked before the lock: nothing is written
    key = folder
    with _SHARED_LOCK:
        if key in _SHARED:
            raise StoreLockedError(f"{location} is already open in this process: close the other handle first "
                                   "(qdrant-client local mode cannot share a folder between clients)")
        backend, lock = locked_open(folder, read_only, lambda: ServerBackend(url, api_key, client, aclient, location,
                                                                        collection_name, options, batch_size))
        shared = SharedBackend(backend, f"collection {collection_name!r}", lock, key)
        if key is not None:
            _SHARED[key] = shared
    return OpenedBackend(shared)


def check_locations(path: Any, url: Any, api_key: Any, location: Any) -> None:
    """Refuse locations of the wrong type before anything is opened.

    :raises InvalidInputError: for a ``path`` that is not a str or path (bytes included) or holds a NUL byte, or a
        ``url``, ``api_key`` or ``location`` that is not a str.
    """
    if path is not None:
        if not isinstance(path, (str, os.PathLike)) or not isinstance(os.fspath(path), str):
            raise InvalidInputError(f"path must be a folder path (str or pathlib.Path), got {path!r}")
        if "\0" in os.fspath(path):
            raise InvalidInputError(f"path {os.fspath(path)!r} holds a NUL byte, which no file system accepts")
    for name, value in (("url", url), ("api_key", api_key), ("location", location)):
        if value is not None and not isinstance(value, str):
            raise InvalidInputError(f"{name} must be a string, got {value!r}")


def check_not_file(folder: Path) -> None:
    """Refuse a store path that is a file: the argument is wrong, the file is not a damaged store.

    :raises InvalidInputError: naming the file and the fix.
    """
    if folder.exists() and not folder.is_dir():
        raise InvalidInputError(f"{folder} is a file, not a store folder: give the folder of a lmk-rag store, or the "
                                "path of a new folder to create one there")


def _open_edge(folder: Path, create: bool, read_only: bool, batch_size: int) -> OpenedBackend:
    """Check the folder (absolute and resolved: what the store records as ``where``), take its lock and open the
    Edge shard; a reader finding it held opens a copy."""
    with needs_extra("a Qdrant Edge store (path=)"):
        from lmk_rag.store.copy_backend import CopyBackend
        from lmk_rag.store.edge import SETTINGS_FILE, SHARD_DIR, EdgeBackend

    check_not_file(folder)
    if folder.is_dir():
        foreign = sorted(p.name for p in folder.iterdir() if p.name not in (SETTINGS_FILE, SHARD_DIR, LOCK_FILE))
        foreign = [name for name in foreign if not name.startswith(".lmk_rag.")]
        if foreign:
            raise CorruptStoreError(f"{folder}: not a lmk-rag store (holds {', '.join(foreign[:5])})")
    if not create and not any((folder / name).exists() for name in (SETTINGS_FILE, SHARD_DIR)):
        raise StoreNotFoundError(f"no lmk-rag store at {folder}")  # checked before the lock: nothing is written
    key = folder.resolve()
    with _SHARED_LOCK:
        shared = _SHARED.get(key)
        if shared is not None:  # open in this process already: share its shard
            backend = shared.backend
            if isinstance(backend, CopyBackend) and not backend.holding and not read_only:
                raise StoreLockedError(
                    f"{folder} is held by another process, and this process reads a copy of it: write from the "
                    f"process that holds it, or close it and every handle here first ({CONCURRENCY_DOCS})"
                )
            if not isinstance(backend, (EdgeBackend, CopyBackend)):
                raise StoreLockedError(f"{folder} is already open in this process: close the other handle first")
            shared.handles += 1
            if not read_only:
                shared.writers += 1
                if shared.writers == 1 and shared.lock is not None:
                    write_holder(key, writes=True)  # a writer elsewhere is refused at once, not after a wait
            return OpenedBackend(shared, writes=not read_only)
        if read_only and AVAILABLE and handover_requested(folder):  # a writer is taking the folder: read a copy
            shared = _SHARED[key] = SharedBackend(_copied(folder, batch_size), str(folder), None, key)
            return OpenedBackend(shared)
        try:
            lock = folder_lock(folder, read_only)
        except StoreLockedError:
            if not read_only:
                if not AVAILABLE:
                    raise
                lock = await_handover(folder)  # a reader holding it hands it over; a writer refuses at once
            else:
                shared = _SHARED[key] = SharedBackend(_copied(folder, batch_size), str(folder), None, key)
                return OpenedBackend(shared)
        commits = edge = None
        try:
            if lock is not None:
                write_holder(key, writes=not read_only)  # before loading: a writer coming meanwhile reads who holds
            commits = CommitLock(folder) if lock is not None and AVAILABLE else None
            backend = edge = EdgeBackend(folder, batch_size, commits)
            if read_only and commits is not None:  # the first reader holds the folder until a writer asks for it
                backend = CopyBackend(folder, CommitLock(folder), batch_size, held=edge)
            shared = SharedBackend(backend, str(folder), lock, key, commits, writers=0 if read_only else 1)
        except BaseException:
            if edge is not None:
                edge.close()
            if commits is not None:
                commits.close()
            if lock is not None:
                clear_holder(key)
                lock.release()
            raise
        _SHARED[key] = shared
        if read_only and commits is not None:
            shared.handover = Handover(shared)
        return OpenedBackend(shared, writes=not read_only)


def _copied(folder: Path, batch_size: int) -> Backend:
    """A reader's copy of a folder another process holds.

    :raises StoreLockedError: when no copy can be made here (no shared file locks, or the folder refuses it).
    """
    from lmk_rag.store.copy_backend import CopyBackend

    advice = f"readers need a copy or a Qdrant server: {CONCURRENCY_DOCS}"
    if not AVAILABLE:
        raise StoreLockedError(f"{folder}: another process holds this store, and this platform has no shared file "
                               f"locks to copy it safely; {advice}")
    try:
        return CopyBackend(folder, CommitLock(folder), batch_size)
    except OSError as error:
        raise StoreLockedError(f"{folder}: another process holds this store, and this reader cannot copy it "
                               f"({error.strerror or error}); {advice}") from error
