"""Which backend a store opens, with the folder checks and the single-writer lock that come with it.

Exactly one of ``path`` (a Qdrant Edge folder; the default ``./lmk_store``), ``url`` (a Qdrant server),
``client`` (an existing ``QdrantClient``) or ``location`` (qdrant-client local mode: ``":memory:"`` or a folder)
picks the backend. Folders are locked for one writing process at a time.
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from lmk_rag.errors import (
    CorruptStoreError,
    InvalidInputError,
    StoreClosedError,
    StoreLockedError,
    StoreNotFoundError,
    StoreReadOnlyError,
)
from lmk_rag.store.base import Backend

DEFAULT_PATH = "./lmk_store"
LOCK_FILE = "lmk_rag.lock"


@dataclass
class OpenedBackend:
    """A backend and what the store keeps with it.

    :param backend: the backend.
    :param where: the store's location, for messages (a folder or ``collection 'name'``).
    :param lock: the folder's write lock (None for servers and in-memory local mode).
    """

    backend: Backend
    where: str
    lock: FileLock | None

    def release(self) -> None:
        """Close the backend, then release the lock (idempotent); the store's later calls raise
        :class:`StoreClosedError`."""
        if isinstance(self.backend, ClosedBackend):
            return
        backend, self.backend = self.backend, ClosedBackend(self.where)  # type: ignore[assignment]
        try:
            backend.close()
        finally:
            if self.lock is not None:
                self.lock.release()
                self.lock = None


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


def open_backend(
    path: str | os.PathLike[str] | None,
    url: str | None,
    api_key: str | None,
    client: Any,
    location: str | None,
    collection: str,
    create: bool,
    server_options: dict[str, Any],
    read_only: bool = False,
) -> OpenedBackend:
    """Open the backend the arguments name (see the module docstring).

    :param server_options: pass-through options of qdrant-client backends (see :mod:`lmk_rag.store.server`).
    :param read_only: never create the store; a folder is still locked while open (Qdrant Edge cannot share a shard
        between processes, and a second process loading it can damage the first one's files), unless the folder
        cannot be written at all (then no writer can be there either).
    :raises InvalidInputError: for several locations, server options given to an Edge store, a bad collection name,
        or a URL or location qdrant-client cannot use.
    :raises StoreLockedError: when another process holds the folder.
    :raises CorruptStoreError: for a folder that is not a lmk-rag store.
    :raises StoreNotFoundError: when ``create`` is False and there is no store folder.
    """
    given = (("path", path), ("url", url), ("client", client), ("location", location))
    chosen = [name for name, value in given if value is not None]
    check_locations(path, url, api_key, location)
    check_server_options(server_options)
    if len(chosen) > 1:
        raise InvalidInputError(f"give only one of path, url, client, location; got {', '.join(chosen)}")
    if server_options and (path is not None or not chosen):
        raise InvalidInputError(f"options {sorted(server_options)} only apply to qdrant-client backends")
    if path is not None or not chosen:
        return _open_edge(Path(path if path is not None else DEFAULT_PATH), create and not read_only, read_only)
    from lmk_rag.store.server import ServerBackend, check_collection

    check_collection(collection)
    folder = None if location in (None, ":memory:") else Path(location)  # local mode on disk: a locked folder
    if folder is not None and not create and not folder.is_dir():
        raise StoreNotFoundError(f"no lmk-rag store at {location}")  # checked before the lock: nothing is written
    lock = _lock(folder, read_only) if folder is not None else None
    try:
        backend = ServerBackend(
            url=url, api_key=api_key, client=client, location=location, collection=collection, **server_options
        )
    except BaseException:
        if lock is not None:
            lock.release()
        raise
    return OpenedBackend(backend, f"collection {collection!r}", lock)


def check_server_options(options: dict[str, Any]) -> None:
    """Refuse keyword arguments that are no qdrant-client backend option (a typo such as ``aplha=``).

    :raises TypeError: naming the unknown arguments and the options there are, as Python does for a bad keyword.
    """
    if not options:  # nothing to check: no qdrant-client import for an Edge store (0.6 s of every cold start)
        return
    import inspect

    from lmk_rag.store.server import ServerBackend

    known = set(inspect.signature(ServerBackend).parameters) - {"url", "api_key", "client", "location", "collection"}
    unknown = sorted(set(options) - known)
    if unknown:
        raise TypeError(
            f"LandmarkStore() got unexpected keyword argument(s) {unknown}; besides its own arguments (see "
            f"help(LandmarkStore)) it takes the qdrant-client backend options {sorted(known)}"
        )


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


def _open_edge(folder: Path, create: bool, read_only: bool) -> OpenedBackend:
    """Check the folder, take its lock and open the Edge shard."""
    from lmk_rag.store.edge import META_FILE, SHARD_DIR, EdgeBackend

    if folder.exists() and not folder.is_dir():
        raise CorruptStoreError(f"{folder}: is a file, not a lmk-rag store folder")
    if folder.is_dir():
        foreign = sorted(p.name for p in folder.iterdir() if p.name not in (META_FILE, SHARD_DIR, LOCK_FILE))
        foreign = [name for name in foreign if not name.startswith(".lmk_rag.")]
        if foreign:
            raise CorruptStoreError(f"{folder}: not a lmk-rag store (holds {', '.join(foreign[:5])})")
    if not create and not any((folder / name).exists() for name in (META_FILE, SHARD_DIR)):
        raise StoreNotFoundError(f"no lmk-rag store at {folder}")  # checked before the lock: nothing is written
    lock = _lock(folder, read_only)
    try:
        return OpenedBackend(EdgeBackend(folder), str(folder), lock)
    except BaseException:
        if lock is not None:
            lock.release()
        raise


def _lock(folder: Path, read_only: bool) -> FileLock | None:
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
            f"{folder} is open in another process (lock {folder / LOCK_FILE}); close it first"
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
