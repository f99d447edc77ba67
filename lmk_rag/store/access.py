"""Who may run engine calls when, between the threads of one process (:class:`ReadWriteLock`); a writer's lock
also holds the folder's commit lock (:mod:`~lmk_rag.store.commits`), which keeps readers in other processes out."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from lmk_rag.store.commits import CommitLock


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
