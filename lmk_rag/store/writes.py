"""The writer of a store: documents and nodes in, documents and nodes out.

Every change goes through the crash-safe protocol of :mod:`~lmk_rag.store.versions` and is recorded in the store's
:mod:`~lmk_rag.store.ledger`; a store opened ``read_only`` refuses them all. A batch reads its documents' markers
once (:func:`~lmk_rag.store.visibility.markers`) and hashes each document once.
"""

from __future__ import annotations

import dataclasses
import functools
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from lmk_rag.checks import check_count
from lmk_rag.errors import InvalidInputError, StoreReadOnlyError
from lmk_rag.store import records as rec
from lmk_rag.store import versions, visibility
from lmk_rag.store.access import ReadWriteLock
from lmk_rag.store.base import Backend
from lmk_rag.store.cutting import cut_documents, fill_chunk_vectors
from lmk_rag.store.documents import (
    Document,
    check_doc_id,
    check_documents,
    check_on_ack,
    check_records,
    check_sources,
    clean_metadata,
    content_hash,
)
from lmk_rag.store.filters import FieldCondition, Filter, FilterLike
from lmk_rag.store.ledger import Ledger
from lmk_rag.store.points import NodeVectors
from lmk_rag.store.settings import StoreEncoder
from lmk_rag.store.types import NodeRecord

Markers = dict[str, dict[str, Any]]
T = TypeVar("T")


def serialised(method: Callable[..., T]) -> Callable[..., T]:
    """Run a write method under the writer's lock: writes from threads (and handles) of one store never
    interleave."""

    @functools.wraps(method)
    def locked(self: Writer, *args: Any, **kwargs: Any) -> T:
        with self.lock:
            return method(self, *args, **kwargs)

    return locked


class Writer:
    """Writes and deletes of one store (see :class:`~lmk_rag.store.LandmarkStore`, whose methods these are).

    :param backend: the store's backend.
    :param where: the store, for messages.
    :param settings: the store's settings record.
    :param vectors: builds node points with every vector the store holds.
    :param ledger: records what each change commits.
    :param encoder: the store's encoder (built on first use).
    :param read_only: refuse every change.
    :param document_batch_size: documents encoded and written per batch by :meth:`add_documents`.
    :param lock: serialises the writes of every thread and handle of the store.
    :param access: keeps a write's engine calls apart from every search's, between threads.
    """

    def __init__(self, backend: Backend, where: str, settings: dict[str, Any], vectors: NodeVectors, ledger: Ledger,
                 encoder: StoreEncoder, read_only: bool, document_batch_size: int, lock: threading.RLock,
                 access: ReadWriteLock) -> None:
        """Keep the store's collaborators."""
        self.backend = backend
        self.where = where
        self.settings = settings
        self.vectors = vectors
        self.ledger = ledger
        self.encoder = encoder
        self.read_only = read_only
        self.document_batch_size = document_batch_size
        self.lock = lock
        self.access = access

    @serialised
    def add_documents(
        self,
        documents: Iterable[Document],
        document_batch_size: int | None = None,
        show_progress_bar: bool | None = None,
        on_ack: Callable[[list[str]], None] | None = None,
        skip_unchanged: bool = True,
        sources: Mapping[str, str] | None = None,
    ) -> int:
        """Encode, cut and write documents in batches, each durable before the next (see
        :meth:`LandmarkStore.add_documents`).

        :return: the number of nodes written.
        """
        from tqdm.auto import tqdm

        batch_size = (self.document_batch_size if document_batch_size is None
                      else check_count("document_batch_size", document_batch_size))
        check_on_ack(on_ack)
        docs = check_documents(documents)
        sources = check_sources(sources, docs)
        hashes, found, changes = self._plan(docs)
        if skip_unchanged:
            unchanged = {doc_id for doc_id, change in changes.items() if change == "unchanged"}
            if unchanged & set(sources):  # a marker's source only: no count changes, nothing for the ledger
                self._check_writable()
                with self.access.writing():
                    versions.record_sources(self.backend, found, {d: sources[d] for d in unchanged if d in sources})
            docs = [doc for doc in docs if doc[0] not in unchanged]
        if not docs:  # nothing to encode: the model is not even loaded
            return 0
        encoder = self.encoder.get()
        node_tokens = int(self.settings["node_tokens"])
        total = tokens = 0
        disable = not show_progress_bar if show_progress_bar is not None else None
        with tqdm(total=len(docs), desc="ingest", unit="doc", disable=disable) as bar:
            # Under the bar in documents, the encoder's bar in tokens for each batch, so a long document moves too.
            encoder_bar = True if not bar.disable else show_progress_bar
            for start in range(0, len(docs), batch_size):
                batch = docs[start : start + batch_size]
                with self.encoder.lock:
                    writes, encoded = cut_documents(encoder, batch, node_tokens, hashes, encoder_bar)
                writes = [dataclasses.replace(write, source=sources.get(write.doc_id)) for write in writes]
                total += self._write(writes, found, on_ack)
                tokens += encoded
                bar.update(len(batch))
                bar.set_postfix_str(f"{tokens / max(bar.format_dict['elapsed'], 1e-9):,.0f} tokens/s")
        return total

    def changes(self, documents: Iterable[Document]) -> dict[str, str]:
        """What writing these documents would do to each: ``"new"``, ``"changed"`` or ``"unchanged"``."""
        return self._plan(check_documents(documents))[2]

    def _plan(self, docs: list[Document]) -> tuple[dict[str, str], Markers, dict[str, str]]:
        """For checked documents (in their order): each one's content hash, the markers of those stored (one read),
        and what writing it would do (``"new"``, ``"changed"``, ``"unchanged"``: same hash as the stored version)."""
        fingerprint = self.settings["encoder"]["fingerprint"]
        hashes = {doc_id: content_hash(text, metadata, fingerprint) for doc_id, text, metadata in docs}
        found = visibility.markers(self.backend, list(hashes))
        stored = visibility.stored_hashes(found)
        changes = {doc_id: "new" if doc_id not in stored else "unchanged" if stored[doc_id] == digest else "changed"
                   for doc_id, digest in hashes.items()}
        return hashes, found, changes

    @serialised
    def upsert_nodes(self, doc_id: str, records: Sequence[NodeRecord], metadata: dict[str, Any] | None = None) -> int:
        """Write pre-encoded nodes as the new version of a document (see :meth:`LandmarkStore.upsert_nodes`)."""
        records = check_records(doc_id, list(records))
        kept = dict(records[0].metadata) if metadata is None else clean_metadata(metadata, f"document {doc_id!r}")
        return self._write([versions.DocumentWrite(doc_id, records, kept)])

    @serialised
    def add_nodes(self, records: Sequence[NodeRecord]) -> int:
        """Write pre-encoded nodes into their documents, keeping the documents' other nodes (see
        :meth:`LandmarkStore.add_nodes`).

        :return: the number of nodes written, kept nodes included.
        """
        if isinstance(records, (str, bytes)) or not isinstance(records, Sequence) or not all(
                isinstance(record, NodeRecord) for record in records):
            raise InvalidInputError(f"records must be a list of NodeRecord, got {records!r:.80}")
        owners = {record.node_id: record.doc_id for record in records}
        if len(owners) != len(records):
            raise InvalidInputError("records: a node id is given twice; give each node once")
        self._check_writable()
        incoming: dict[str, dict[str, NodeRecord]] = {}
        for record in records:
            check_doc_id(record.doc_id)
            incoming.setdefault(record.doc_id, {})[record.node_id] = record
        either = Filter(should=(FieldCondition("doc_id", "in", list(incoming)),
                                FieldCondition("node_id", "in", list(owners))))
        with self.access.reading():
            (points,) = visibility.latest([list(visibility.scroll(
                self.backend, visibility.shown_filter(self.backend, either), with_vectors=True))])
        kept: dict[str, dict[str, NodeRecord]] = {doc_id: {} for doc_id in incoming}
        moved = []
        for stored in sorted((rec.record_from_point(point) for point in points), key=lambda record: record.span):
            if owners.get(stored.node_id, stored.doc_id) != stored.doc_id:
                moved.append(stored.node_id)  # arriving under another document: out of its own first
            elif stored.doc_id in incoming:
                kept[stored.doc_id][stored.node_id] = stored
        if moved:
            self.delete_nodes(node_ids=moved)
        writes = []
        for doc_id, arriving in incoming.items():
            merged = check_records(doc_id, list({**kept[doc_id], **arriving}.values()))
            writes.append(versions.DocumentWrite(doc_id, merged, dict(merged[0].metadata)))
        return self._write(writes)

    @serialised
    def upsert_documents(
        self,
        documents: Iterable[tuple[str, Sequence[NodeRecord]]],
        document_batch_size: int = 64,
        on_ack: Callable[[list[str]], None] | None = None,
    ) -> int:
        """Write many pre-encoded documents, ``document_batch_size`` per write (see
        :meth:`LandmarkStore.upsert_documents`).

        :return: the number of nodes written.
        :raises InvalidInputError: for bad records, or a doc id given twice.
        """
        check_count("document_batch_size", document_batch_size)
        check_on_ack(on_ack)
        total, batch, seen = 0, [], set()
        for doc_id, records in documents:
            records = check_records(doc_id, list(records))
            if doc_id in seen:
                raise InvalidInputError(f"doc_id {doc_id!r} is given twice in one call; give each document once")
            seen.add(doc_id)
            batch.append(versions.DocumentWrite(doc_id, records, dict(records[0].metadata)))
            if len(batch) == document_batch_size:
                total, batch = total + self._write(batch, on_ack=on_ack), []
        return total + (self._write(batch, on_ack=on_ack) if batch else 0)

    def _write(self, writes: list[versions.DocumentWrite], markers: Markers | None = None,
               on_ack: Callable[[list[str]], None] | None = None) -> int:
        """Write the documents as new versions (every record checked first), then acknowledge them.

        :param markers: the documents' markers, when the caller has read them (else read here, with the node owners).
        """
        self._check_writable()
        writes = self._with_chunk_vectors(writes)
        for write in writes:
            for record in write.records:
                self.vectors.check(record)
        markers = versions.check_node_owners(self.backend, writes, markers)
        upcoming = self.ledger.after(versions.write_delta(markers, writes)) if self.ledger.enabled else None
        with self.access.writing(), self.ledger.change(upcoming):
            written = versions.write_documents(self.backend, writes, markers, self.vectors.points)
        if on_ack is not None:
            on_ack([write.doc_id for write in writes])
        return written

    def _with_chunk_vectors(self, writes: list[versions.DocumentWrite]) -> list[versions.DocumentWrite]:
        """The writes, their records without chunk vectors encoded by the store's encoder in one call
        (:func:`~lmk_rag.store.cutting.fill_chunk_vectors`); a static store holds no chunk vectors."""
        records = [record for write in writes for record in write.records]
        if not self.vectors.chunks or all(record.chunk_vectors is not None for record in records):
            return writes
        with self.encoder.lock:
            filled = iter(fill_chunk_vectors(self.encoder.get(), records))
        return [dataclasses.replace(write, records=[next(filled) for _ in write.records]) for write in writes]

    @serialised
    def delete_document(self, doc_id: str) -> bool:
        """Delete a document and its nodes (see :meth:`LandmarkStore.delete_document`)."""
        check_doc_id(doc_id)
        self._check_writable()
        marker = visibility.markers(self.backend, [doc_id]).get(doc_id)
        if marker is None:
            return False
        upcoming = self.ledger.after(versions.delete_delta(marker))
        with self.access.writing(), self.ledger.change(upcoming):
            versions.delete_document(self.backend, doc_id)
        return True

    @serialised
    def delete_nodes(self, node_ids: Sequence[str] | None = None, filter: FilterLike = None) -> int:
        """Delete nodes by id and/or metadata filter (see :meth:`LandmarkStore.delete_nodes`)."""
        if node_ids is None and filter is None:
            deleted = self.backend.count(visibility.nodes_filter(self.backend, None))
            self.clear()
            return deleted
        wanted = visibility.shown_filter(self.backend, filter, node_ids)
        self._check_writable()
        with self.access.writing(), self.ledger.change(None):
            return versions.delete_nodes(self.backend, wanted)

    @serialised
    def clear(self) -> None:
        """Delete every document (the settings stay)."""
        self._check_writable()
        with self.access.writing(), self.ledger.change((0, 0)):
            versions.clear(self.backend)

    @serialised
    def optimize(self) -> None:
        """Build indexes now (Qdrant Edge optimizes only when asked; servers do it on their own)."""
        self._check_writable()
        self.backend.optimize()

    def _check_writable(self) -> None:
        """Refuse writes to a store opened ``read_only``."""
        if self.read_only:
            raise StoreReadOnlyError(f"{self.where} was opened read_only; open it without read_only=True to write")
