"""What a store has committed, recorded with its settings, so that opening it can tell a damaged store.

After every acknowledged write or delete the settings record holds ``committed``: the number of documents and of
nodes the store holds. Before a change it also records what the change will leave (``next``; ``"unknown"`` when
that cannot be known in advance), so a crash in between leaves counts equal to one of the two. Opening compares
the engine's counts with the record: anything else means points were lost or added behind the store's back (a
truncated or deleted segment, a damaged id tracker), and raises :class:`CorruptStoreError`.

Only for stores with a single writer (a folder: Qdrant Edge or qdrant-client local mode); a server collection may
have several writers, so its counts are not recorded.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from lmk_rag.errors import CorruptStoreError
from lmk_rag.store import records as rec
from lmk_rag.store.base import Backend

Counts = tuple[int, int]
"""``(documents, nodes)``."""


class Ledger:
    """The ``committed`` entry of a store's settings record.

    :param backend: the store's backend (its settings record is rewritten on each change).
    :param settings: the store's settings record (updated in place).
    :param where: the store, for messages.
    """

    def __init__(self, backend: Backend, settings: dict[str, Any], where: str) -> None:
        self.backend = backend
        self.settings = settings
        self.where = where
        self.enabled = backend.single_writer

    def verify(self, fix: bool) -> None:
        """Compare the engine's counts with the record (after the store's repair of interrupted writes).

        :param fix: record the counts an interrupted change left (a writer opening the store).
        :raises CorruptStoreError: naming what the record says and what the engine holds.
        """
        record = self.settings.get("committed")
        if not self.enabled or record is None:
            return
        actual = rec.counts(self.backend)
        expected = (record["documents"], record["nodes"])
        upcoming = record.get("next")
        if actual == expected and upcoming is None:
            return
        if upcoming is None or (upcoming != "unknown" and actual not in (expected, tuple(upcoming))):
            raise CorruptStoreError(
                f"{self.where}: the store committed {expected[0]} documents and {expected[1]} nodes but holds "
                f"{actual[0]} and {actual[1]}: its data files were damaged or changed behind its back. "
                f"Run lmk-rag check --store {self.where} for details; rebuild by re-ingesting into a new store"
            )
        if fix:
            self._record(actual, None)

    @contextmanager
    def change(self, upcoming: Counts | None) -> Iterator[None]:
        """Record a change: what it will leave (None: unknown) before; after, that (a write knows it: no engine call),
        else the engine's counts. A write that left other counts is caught by the next open's :meth:`verify`."""
        if not self.enabled:
            yield
            return
        self._record(self.counts(), upcoming or "unknown")
        yield
        self._record(upcoming or rec.counts(self.backend), None)

    def counts(self) -> Counts:
        """The committed counts, else (none recorded yet) the engine's."""
        return self.current() or rec.counts(self.backend)

    def after(self, delta: Counts) -> Counts | None:
        """What a change of ``delta`` documents and nodes will leave (None when the ledger is off)."""
        if not self.enabled:
            return None
        now = self.counts()
        return now[0] + delta[0], now[1] + delta[1]

    def current(self) -> Counts | None:
        """The committed counts, or None when they are not recorded."""
        record = self.settings.get("committed")
        return None if record is None else (record["documents"], record["nodes"])

    def _record(self, counts: Counts, upcoming: Counts | str | None) -> None:
        """Rewrite the settings record with these counts (and what the change under way will leave)."""
        entry: dict[str, Any] = {"documents": counts[0], "nodes": counts[1]}
        if upcoming is not None:
            entry["next"] = list(upcoming) if isinstance(upcoming, tuple) else upcoming
        self.settings["committed"] = entry
        self.backend.write_settings(self.settings)
