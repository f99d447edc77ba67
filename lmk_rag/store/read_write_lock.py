"""Many readers or one writer between the threads of one process (:class:`ReadWriteLock`): a search's engine calls
see one state of the store, never a write half applied."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any


class ReadWriteLock:
    """Many readers or one writer at a time (a writer waiting goes before new readers), between the threads of
    one process: a reader's engine calls (query, visibility, payloads) see one state of the store, never a write
    half applied.

    :param exclusive: takes the folder's commit lock alone
        (:meth:`~lmk_rag.store.folder_locks.CommitLock.exclusive`), held while writing so that a reader in another
        process never copies a write half applied (None: no folder, or this process reads a copy).
    """

    def __init__(self, exclusive: Callable[[], contextlib.AbstractContextManager[Any]] | None = None) -> None:
        self.exclusive = exclusive
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
            with contextlib.nullcontext() if self.exclusive is None else self.exclusive():
                yield
        finally:
            with self._condition:
                self._writing = False
                self._condition.notify_all()
