"""The writer of a store (documents and nodes in, documents and nodes out) and the write, repair and delete protocol
its changes go through, as functions over a backend.

Every document has one *marker* point holding its current ``version`` (see :mod:`lmk_rag.store.records`). A write
puts the new nodes beside the old ones (in the other id slot) with ``live`` false, so no search sees them; flips the
marker in one point write (``pending`` on it says the commit is not finished) and makes it durable; sets ``live`` on
the new nodes; deletes the old ones; and clears ``pending``. Searches filter on ``live`` inside their one query
(:func:`~lmk_rag.store.records.shown_filter`); between the last two engine writes both versions are live, and a
reader keeps each document's highest version (:func:`~lmk_rag.store.records.latest`). :func:`repair` finishes a
commit a crash interrupted and drops the nodes of writes that never committed.

Engine calls of one write batch that fits one upsert batch (64 points): one look-up (markers and node owners), the
upsert of the nodes and the commit markers (one call where :attr:`~lmk_rag.store.base.Backend.ordered_upserts`,
else two), a flush (no call on a server), a set-payload, a delete and the upsert of the finished markers: 6 on Qdrant
Edge and on a server. A delete is one delete of the nodes and the marker together.

Every change is recorded in the store's :class:`CommittedCounts`; a store opened ``read_only`` refuses them all. A
batch reads its documents' markers once (:func:`~lmk_rag.store.records.markers`) and hashes each document once.

After every acknowledged write or delete the settings record holds ``committed``: the number of documents and of
nodes the store holds. Before a change it also records what the change will leave (``next``; ``"unknown"`` when
that cannot be known in advance), so a crash in between leaves counts equal to one of the two. Opening compares
the engine's counts with the record (:meth:`CommittedCounts.verify`, after :func:`repair`): anything else means points
were lost or added behind the store's back (a truncated or deleted segment, a damaged id tracker), and raises
:class:`~lmk_rag.errors.CorruptStoreError`. Only for stores with a single writer (a folder: Qdrant Edge or
qdrant-client local mode); a server collection may have several writers, so its counts are not recorded.
"""

from __future__ import annotations

import dataclasses
import functools
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

from lmk_rag.errors import CorruptStoreError, InvalidInputError, StoreReadOnlyError
from lmk_rag.store import records as rec
from lmk_rag.store.base import Backend
from lmk_rag.store.documents import (
    Document,
    DocumentWrite,
    check_doc_id,
    check_documents,
    check_records,
    check_sources,
    clean_metadata,
    content_hash,
    cut_documents,
    fill_chunk_vectors,
)
from lmk_rag.store.filters import FieldCondition, Filter, FilterLike
from lmk_rag.store.read_write_lock import ReadWriteLock
from lmk_rag.store.records import every, pending_filter, scroll
from lmk_rag.store.store_encoder import StoreEncoder
from lmk_rag.store.types import NodeRecord, PointData
from lmk_rag.store.vectors import NodeVectors

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


@dataclasses.dataclass(eq=False)
class Writer:
    """Writes and deletes of one store: :class:`~lmk_rag.store.LandmarkStore`'s methods, on the arguments the store
    has checked and resolved (its public methods document them).

    :param backend: the store's backend.
    :param where: the store, for messages.
    :param settings: the store's settings record.
    :param vectors: builds node points with every vector the store holds.
    :param committed_counts: records what each change commits.
    :param encoder: the store's encoder (built on first use).
    :param read_only: refuse every change.
    :param lock: serialises the writes of every thread and handle of the store.
    :param access: keeps a write's engine calls apart from every search's, between threads.
    """

    backend: Backend
    where: str
    settings: dict[str, Any]
    vectors: NodeVectors
    committed_counts: CommittedCounts
    encoder: StoreEncoder
    read_only: bool
    lock: threading.RLock
    access: ReadWriteLock

    @serialised
    def upsert_documents(self, documents: Iterable[Document], batch_size: int, show_progress_bar: bool | None,
                         on_ack: Callable[[list[str]], None] | None, skip_unchanged: bool,
                         sources: Mapping[str, str] | None) -> int:
        """Encode, cut and write documents, each replacing its stored version, ``batch_size`` a batch, each durable
        before the next; the number of nodes written."""
        from tqdm.auto import tqdm

        docs = check_documents(documents)
        sources = check_sources(sources, docs)
        hashes, found, changes = self._plan(docs)
        if skip_unchanged:
            unchanged = {doc_id for doc_id, change in changes.items() if change == "unchanged"}
            if unchanged & set(sources):  # a marker's source only: no count changes, nothing to record
                self._check_writable()
                with self.access.writing():
                    record_sources(self.backend, found, {d: sources[d] for d in unchanged if d in sources})
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
        found = rec.markers(self.backend, list(hashes))
        stored = rec.stored_hashes(found)
        changes = {doc_id: "new" if doc_id not in stored else "unchanged" if stored[doc_id] == digest else "changed"
                   for doc_id, digest in hashes.items()}
        return hashes, found, changes

    @serialised
    def upsert_encoded_document(self, doc_id: str, records: Sequence[NodeRecord],
                                metadata: dict[str, Any] | None) -> int:
        """Write pre-encoded nodes as the new version of a document, replacing its stored nodes."""
        records = check_records(doc_id, list(records))
        kept = dict(records[0].metadata) if metadata is None else clean_metadata(metadata, f"document {doc_id!r}")
        return self._write([DocumentWrite(doc_id, records, kept)])

    @serialised
    def upsert_nodes(self, records: Sequence[NodeRecord]) -> int:
        """Write pre-encoded nodes into their documents, each replacing the stored node of its id and keeping the
        documents' other nodes; the number of nodes written, kept nodes included."""
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
            (points,) = rec.latest([list(rec.scroll(
                self.backend, rec.shown_filter(self.backend, either), with_vectors=True))])
        kept: dict[str, dict[str, NodeRecord]] = {doc_id: {} for doc_id in incoming}
        moved = []
        for stored in sorted((rec.record_from_point(point) for point in points), key=lambda record: record.span):
            if owners.get(stored.node_id, stored.doc_id) != stored.doc_id:
                moved.append(stored.node_id)  # arriving under another document: out of its own first
            elif stored.doc_id in incoming:
                kept[stored.doc_id][stored.node_id] = stored
        if moved:
            self.delete_nodes(moved, None)
        writes = []
        for doc_id, arriving in incoming.items():
            merged = check_records(doc_id, list({**kept[doc_id], **arriving}.values()))
            writes.append(DocumentWrite(doc_id, merged, dict(merged[0].metadata)))
        return self._write(writes)

    @serialised
    def upsert_encoded_documents(self, documents: Iterable[tuple[str, Sequence[NodeRecord]]], batch_size: int,
                                 on_ack: Callable[[list[str]], None] | None) -> int:
        """Write many pre-encoded documents, each replacing its stored version, ``batch_size`` per write; the number
        of nodes written.

        :raises InvalidInputError: for bad records, or a doc id given twice.
        """
        total, batch, seen = 0, [], set()
        for doc_id, records in documents:
            records = check_records(doc_id, list(records))
            if doc_id in seen:
                raise InvalidInputError(f"doc_id {doc_id!r} is given twice in one call; give each document once")
            seen.add(doc_id)
            batch.append(DocumentWrite(doc_id, records, dict(records[0].metadata)))
            if len(batch) == batch_size:
                total, batch = total + self._write(batch, on_ack=on_ack), []
        return total + (self._write(batch, on_ack=on_ack) if batch else 0)

    def _write(self, writes: list[DocumentWrite], markers: Markers | None = None,
               on_ack: Callable[[list[str]], None] | None = None) -> int:
        """Write the documents as new versions (every record checked first), then acknowledge them.

        :param markers: the documents' markers, when the caller has read them (else read here, with the node owners).
        """
        self._check_writable()
        writes = self._with_chunk_vectors(writes)
        for write in writes:
            for record in write.records:
                self.vectors.check(record)
        markers = check_node_owners(self.backend, writes, markers)
        upcoming = self.committed_counts.after(write_delta(markers, writes)) if self.committed_counts.enabled else None
        with self.access.writing(), self.committed_counts.change(upcoming):
            written = write_documents(self.backend, writes, markers, self.vectors.points)
        if on_ack is not None:
            on_ack([write.doc_id for write in writes])
        return written

    def _with_chunk_vectors(self, writes: list[DocumentWrite]) -> list[DocumentWrite]:
        """The writes, their records without chunk vectors encoded by the store's encoder in one call
        (:func:`~lmk_rag.store.documents.fill_chunk_vectors`); a static store holds no chunk vectors."""
        records = [record for write in writes for record in write.records]
        if not self.vectors.spec.chunks or all(record.chunk_vectors is not None for record in records):
            return writes
        with self.encoder.lock:
            filled = iter(fill_chunk_vectors(self.encoder.get(), records))
        return [dataclasses.replace(write, records=[next(filled) for _ in write.records]) for write in writes]

    @serialised
    def delete_document(self, doc_id: str) -> bool:
        """Delete a document and its nodes; whether it existed."""
        check_doc_id(doc_id)
        self._check_writable()
        marker = rec.markers(self.backend, [doc_id]).get(doc_id)
        if marker is None:
            return False
        upcoming = self.committed_counts.after(delete_delta(marker))
        with self.access.writing(), self.committed_counts.change(upcoming):
            delete_document(self.backend, doc_id)
        return True

    @serialised
    def delete_nodes(self, node_ids: Sequence[str] | None, filter: FilterLike) -> int:
        """Delete nodes by id and/or metadata filter; the number deleted."""
        if node_ids is None and filter is None:
            deleted = self.backend.count(rec.nodes_filter(self.backend, None))
            self.clear()
            return deleted
        wanted = rec.shown_filter(self.backend, filter, node_ids)
        self._check_writable()
        with self.access.writing(), self.committed_counts.change(None):
            return delete_nodes(self.backend, wanted)

    @serialised
    def clear(self) -> None:
        """Delete every document (the settings stay)."""
        self._check_writable()
        with self.access.writing(), self.committed_counts.change((0, 0)):
            clear(self.backend)

    @serialised
    def optimize(self) -> None:
        """Build indexes now (Qdrant Edge optimizes only when asked; servers do it on their own)."""
        self._check_writable()
        self.backend.optimize()

    def _check_writable(self) -> None:
        """Refuse writes to a store opened ``read_only``."""
        if self.read_only:
            raise StoreReadOnlyError(f"{self.where} was opened read_only; open it without read_only=True to write")


Counts = tuple[int, int]
"""``(documents, nodes)``."""


class CommittedCounts:
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
        """What a change of ``delta`` documents and nodes will leave (None when counts are not recorded)."""
        if not self.enabled:
            return None
        now = self.counts()
        return now[0] + delta[0], now[1] + delta[1]

    def current(self) -> Counts | None:
        """The committed counts, or None when they are not recorded (or this store records none)."""
        record = self.settings.get("committed") if self.enabled else None
        return None if record is None else (record["documents"], record["nodes"])

    def _record(self, counts: Counts, upcoming: Counts | str | None) -> None:
        """Rewrite the settings record with these counts (and what the change under way will leave)."""
        entry: dict[str, Any] = {"documents": counts[0], "nodes": counts[1]}
        if upcoming is not None:
            entry["next"] = list(upcoming) if isinstance(upcoming, tuple) else upcoming
        self.settings["committed"] = entry
        self.backend.write_settings(self.settings)


#: Makes the node points of one document's records at a version and id slot.
NodePoints = Callable[[list[NodeRecord], int, int], list[PointData]]


def write_documents(
    backend: Backend, writes: Sequence[DocumentWrite], markers: dict[str, dict[str, Any]], node_points: NodePoints
) -> int:
    """Write documents as new versions: add hidden nodes, flip the markers, flush, show the new nodes, drop the old.

    :param backend: the backend.
    :param writes: the documents (each doc id once), their records checked.
    :param markers: the documents' markers as they are now (:func:`check_node_owners`).
    :param node_points: builds a document's node points (all vectors the store holds).
    :return: the number of nodes written.
    """
    unique = {write.doc_id: write for write in writes}
    version = max([time.time_ns(), *[markers[d]["version"] + 1 for d in unique if d in markers]])
    nodes, committed, done = [], [], []
    for doc_id, write in unique.items():
        before = markers.get(doc_id)
        slot = 0 if before is None else 1 - int(before["slot"])
        nodes.extend(node_points(write.records, version, slot))
        n_nodes, content_hash, source = len(write.records), write.content_hash, write.source
        committed.append(rec.marker_payload(doc_id, version, slot, n_nodes, write.metadata, version, content_hash,
                                            source))
        done.append(rec.marker_payload(doc_id, version, slot, n_nodes, write.metadata, None, content_hash, source))
    committed_points, done_points = [rec.marker_point(p) for p in committed], [rec.marker_point(p) for p in done]
    backend.reserve(nodes + committed_points + done_points, f"write {len(unique)} document(s) of {len(nodes)} nodes")
    if backend.ordered_upserts:  # the markers after every node in one call: a crash keeps the nodes before them
        backend.upsert(nodes + committed_points)
    else:  # a server applies one request's points in no set order: the markers wait for every node
        backend.upsert(nodes)
        backend.upsert(committed_points)
    backend.flush()  # acknowledged: the new versions are durable (a reopen shows them)
    _show(backend, list(unique), version)
    _drop_other_versions(backend, list(unique), version)
    backend.upsert(done_points)
    return len(nodes)


def check_node_owners(backend: Backend, writes: Sequence[DocumentWrite],
                      markers: dict[str, dict[str, Any]] | None = None) -> dict[str, dict[str, Any]]:
    """Refuse node ids that another document holds (in the store or in the same write): a node's point id
    depends on its node id only, so writing it would replace the other document's node. The documents' markers come
    from the same look-up.

    :param markers: the documents' markers when the caller has read them (else read here).
    :return: the documents' markers (:func:`~lmk_rag.store.records.markers`).
    :raises InvalidInputError: naming the node id and the document that holds it.
    """
    owners: dict[str, str] = {}
    for write in writes:
        for record in write.records:
            other = owners.setdefault(record.node_id, write.doc_id)
            if other != write.doc_id:
                raise InvalidInputError(
                    f"node id {record.node_id!r} is given for documents {other!r} and {write.doc_id!r}: node ids are "
                    "unique across the store"
                )
    ids = [rec.node_point_id(node_id, slot) for node_id in owners for slot in (0, 1)]
    if markers is None:
        ids += [rec.marker_point_id(write.doc_id) for write in writes]
    found: dict[str, dict[str, Any]] = {}
    for point in backend.retrieve(ids, False) if ids else []:
        holder, node_id = point.payload.get("doc_id"), point.payload.get("node_id")
        if point.payload.get("kind") == rec.DOC:
            found[holder] = point.payload
        elif node_id in owners and holder != owners[node_id]:
            raise InvalidInputError(
                f"node id {node_id!r} belongs to document {holder!r}, not {owners[node_id]!r}: node ids are unique "
                f"across the store; give the nodes of {owners[node_id]!r} other ids"
            )
    return found if markers is None else markers


def record_sources(backend: Backend, markers: dict[str, dict[str, Any]], sources: dict[str, str]) -> int:
    """Record the source file of stored documents whose marker says another (or none), leaving their nodes as
    they are; documents not stored are skipped.

    :param markers: the documents' markers (:func:`~lmk_rag.store.records.markers`).
    :param sources: ``{doc_id: source}``.
    :return: the number of markers rewritten.
    """
    changed = [{**markers[doc_id], "source": source} for doc_id, source in sources.items()
               if doc_id in markers and markers[doc_id].get("source") != source]
    if changed:
        backend.upsert([rec.marker_point(payload) for payload in changed])
        backend.flush()
    return len(changed)


def write_delta(markers: dict[str, dict[str, Any]], writes: Sequence[DocumentWrite]) -> tuple[int, int]:
    """How many documents and nodes writing these documents adds (negative: removes) to the store.

    :param markers: the documents' markers as they are now.
    """
    visible_before = {doc_id: int(marker["n_nodes"]) for doc_id, marker in markers.items()}
    documents = sum(1 for write in writes if write.doc_id not in visible_before)
    nodes = sum(len(write.records) for write in writes) - sum(visible_before.get(w.doc_id, 0) for w in writes)
    return documents, nodes


def delete_delta(marker: dict[str, Any]) -> tuple[int, int]:
    """What deleting the document of this marker adds to the store: one document and its nodes fewer."""
    return -1, -int(marker["n_nodes"])


def delete_document(backend: Backend, doc_id: str) -> None:
    """Delete a stored document: its nodes and its marker in one delete (one update of the engine's write-ahead log,
    so a crash leaves all of it or none)."""
    backend.reserve([], f"delete document {doc_id!r}")
    _delete_points(backend, doc_id)
    backend.flush()


def delete_nodes(backend: Backend, native_filter: Any) -> int:
    """Delete the shown nodes of current versions a native filter matches, document by document: a document losing
    every node is deleted as :func:`delete_document` does; from any other, the nodes go in one delete and its
    marker's node count follows.

    :return: the number of nodes deleted.
    """
    candidates = list(scroll(backend, native_filter, False))
    found = rec.markers(backend, sorted({point.payload["doc_id"] for point in candidates}))
    by_doc: dict[str, list[str]] = {}
    for point in candidates:
        doc_id = point.payload["doc_id"]
        if doc_id in found and found[doc_id].get("version") == point.payload.get("version"):
            by_doc.setdefault(doc_id, []).append(point.payload["node_id"])
    b = backend.builder
    deleted = sum(len(node_ids) for node_ids in by_doc.values())
    if by_doc:
        backend.reserve([], f"delete {deleted} nodes")
    for doc_id, node_ids in by_doc.items():
        marker = found[doc_id]
        current = [b.match("kind", rec.NODE), b.match("doc_id", doc_id), b.match("version", marker["version"])]
        left = backend.count(every(b, *current)) - len(node_ids)
        if left <= 0:
            delete_document(backend, doc_id)
            continue
        backend.delete(every(b, *current[:2], b.match_any("node_id", node_ids)))
        backend.upsert([rec.marker_point({**marker, "n_nodes": left})])
    if by_doc:
        backend.flush()
    return deleted


def clear(backend: Backend) -> None:
    """Delete every document (the settings stay)."""
    b = backend.builder
    backend.reserve([], "delete every document")
    backend.delete(every(b, b.match_any("kind", [rec.NODE, rec.DOC])))
    backend.flush()


def repair(backend: Backend) -> int:
    """Finish the commits a crash interrupted (markers with ``pending``: show the marker's version, drop the
    others), then drop the nodes of writes that never committed (``live`` false).

    :return: the number of documents repaired.
    """
    found = list(scroll(backend, pending_filter(backend), False))
    for marker in found:
        payload = marker.payload
        doc_id = payload["doc_id"]
        _show(backend, [doc_id], int(payload["version"]))
        _drop_other_versions(backend, [doc_id], int(payload["version"]))
        backend.upsert([rec.marker_point({k: v for k, v in payload.items() if k != "pending"})])
    uncommitted = {point.payload["doc_id"] for point in scroll(backend, rec.hidden_filter(backend), False)}
    if uncommitted:
        backend.delete(rec.hidden_filter(backend))
    if found or uncommitted:
        backend.flush()
    return len({marker.payload["doc_id"] for marker in found} | uncommitted)


def _show(backend: Backend, doc_ids: list[str], version: int) -> None:
    """Set ``live`` on the nodes of these documents at ``version``, in one update (their commit is durable)."""
    b = backend.builder
    backend.set_payload(every(b, b.match("kind", rec.NODE), b.match_any("doc_id", doc_ids),
                              b.match("version", version)), {rec.LIVE: True})


def _drop_other_versions(backend: Backend, doc_ids: list[str], version: int) -> None:
    """Delete nodes of these documents whose version is not ``version``."""
    b = backend.builder
    backend.delete(every(b, b.match("kind", rec.NODE), b.match_any("doc_id", doc_ids),
                         but_not=[b.match("version", version)]))


def _delete_points(backend: Backend, doc_id: str) -> None:
    """Delete a document's nodes and its marker, in one delete."""
    b = backend.builder
    backend.delete(every(b, b.match_any("kind", [rec.NODE, rec.DOC]), b.match("doc_id", doc_id)))
