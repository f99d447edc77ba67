"""The write, repair and visibility protocol of documents, as functions over a backend.

Every document has one *marker* point holding its current ``version`` (see :mod:`lmk_rag.store.records`). A
write puts the new nodes beside the old ones (in the other id slot), flips the marker in one point write, makes
it durable, then deletes the old nodes; ``pending`` on a marker says a write or delete was under way, and
:func:`repair` finishes or undoes it. A node is visible only when its version equals its marker's, so a reader
never sees two versions of a document, nor half of one.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from lmk_rag.errors import InvalidInputError
from lmk_rag.store import records as rec
from lmk_rag.store.base import Backend
from lmk_rag.store.filters import FilterLike, translate
from lmk_rag.store.types import NodeRecord, PointData


@dataclass(frozen=True)
class DocumentWrite:
    """One document to write.

    :param doc_id: the document.
    :param records: its nodes.
    :param metadata: its metadata.
    :param content_hash: the hash of its text and metadata, recorded on its marker (None for pre-encoded nodes).
    :param source: the file it was read from, recorded on its marker
        (see :func:`~lmk_rag.store.records.marker_payload`).
    """

    doc_id: str
    records: list[NodeRecord]
    metadata: dict[str, Any] = field(default_factory=dict)
    content_hash: str | None = None
    source: str | None = None


#: Makes the node points of one document's records at a version and id slot.
NodePoints = Callable[[list[NodeRecord], int, int], list[PointData]]


def write_documents(
    backend: Backend, writes: Sequence[DocumentWrite], node_points: NodePoints, check: Callable[[NodeRecord], None]
) -> int:
    """Write documents as new versions: mark pending, add nodes, flip markers, flush, drop the old nodes.

    :param backend: the backend.
    :param writes: the documents (each doc id once).
    :param node_points: builds a document's node points (all vectors the store holds).
    :param check: raises for a record the store cannot hold; every record is checked before anything is written.
    :return: the number of nodes written.
    """
    for write in writes:
        for record in write.records:
            check(record)
    check_node_owners(backend, writes)
    unique = {write.doc_id: write for write in writes}
    markers = backend.retrieve([rec.marker_point_id(d) for d in unique], False)
    old = {p.payload["doc_id"]: p.payload for p in markers}
    version = max([time.time_ns(), *[(m.get("version") or 0) + 1 for m in old.values()]])
    pending, nodes, committed, done = [], [], [], []
    for doc_id, write in unique.items():
        before = old.get(doc_id)
        slot = 0 if before is None or before.get("slot") is None else 1 - int(before["slot"])
        if before is None:
            pending.append(rec.marker_payload(doc_id, None, None, 0, write.metadata, pending=version))
        else:
            pending.append({**before, "pending": version})
        nodes.extend(node_points(write.records, version, slot))
        n_nodes, content_hash, source = len(write.records), write.content_hash, write.source
        committed.append(rec.marker_payload(doc_id, version, slot, n_nodes, write.metadata, version, content_hash,
                                            source))
        done.append(rec.marker_payload(doc_id, version, slot, n_nodes, write.metadata, None, content_hash, source))
    pending_points, committed_points, done_points = ([rec.marker_point(p) for p in payloads]
                                                     for payloads in (pending, committed, done))
    backend.reserve(nodes + pending_points + committed_points + done_points,
                    f"write {len(unique)} document(s) of {len(nodes)} nodes")
    backend.upsert(pending_points)
    backend.upsert(nodes)
    backend.upsert(committed_points)
    backend.flush()  # acknowledged: the new versions are durable and visible
    _drop_other_versions(backend, list(unique), version)
    backend.upsert(done_points)
    return len(nodes)


def check_node_owners(backend: Backend, writes: Sequence[DocumentWrite]) -> None:
    """Refuse node ids that another document holds (in the store or in the same write): a node's point id
    depends on its node id only, so writing it would replace the other document's node.

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
    for point in backend.retrieve(ids, False) if ids else []:
        holder, node_id = point.payload.get("doc_id"), point.payload.get("node_id")
        if node_id in owners and holder != owners[node_id]:
            raise InvalidInputError(
                f"node id {node_id!r} belongs to document {holder!r}, not {owners[node_id]!r}: node ids are unique "
                f"across the store; give the nodes of {owners[node_id]!r} other ids"
            )


def record_sources(backend: Backend, sources: dict[str, str]) -> int:
    """Record the source file of stored documents whose marker says another (or none), leaving their nodes as
    they are; documents not stored are skipped.

    :param sources: ``{doc_id: source}``.
    :return: the number of markers rewritten.
    """
    markers = backend.retrieve([rec.marker_point_id(doc_id) for doc_id in sources], False) if sources else []
    changed = [{**m.payload, "source": sources[m.payload["doc_id"]]} for m in markers
               if m.payload.get("version") is not None and m.payload.get("source") != sources[m.payload["doc_id"]]]
    if changed:
        backend.upsert([rec.marker_point(payload) for payload in changed])
        backend.flush()
    return len(changed)


def write_delta(backend: Backend, writes: Sequence[DocumentWrite]) -> tuple[int, int]:
    """How many documents and nodes writing these documents adds (negative: removes) to the store."""
    markers = backend.retrieve([rec.marker_point_id(write.doc_id) for write in writes], False)
    visible_before = {m.payload["doc_id"]: int(m.payload.get("n_nodes") or 0) for m in markers
                      if m.payload.get("version") is not None}
    documents = sum(1 for write in writes if write.doc_id not in visible_before)
    nodes = sum(len(write.records) for write in writes) - sum(visible_before.values())
    return documents, nodes


def delete_document(backend: Backend, doc_id: str) -> bool:
    """Delete a document and its nodes (the marker says "deleting" first, so a crash is repaired).

    :return: True if the document existed.
    """
    found = backend.retrieve([rec.marker_point_id(doc_id)], False)
    if not found:
        return False
    backend.reserve([], f"delete document {doc_id!r}")
    backend.upsert([rec.marker_point({**found[0].payload, "version": None, "pending": 0})])
    _delete_points(backend, doc_id)
    backend.flush()
    return True


def delete_nodes(backend: Backend, native_filter: Any) -> int:
    """Delete the visible nodes a native filter matches, document by document: a document losing every node is
    deleted as :func:`delete_document` does; from any other, the nodes go in one delete and its marker's node count
    follows.

    :return: the number of nodes deleted.
    """
    matched = visible(backend, list(scroll(backend, native_filter, False)))
    by_doc: dict[str, list[str]] = {}
    for point in matched:
        by_doc.setdefault(point.payload["doc_id"], []).append(point.payload["node_id"])
    b = backend.builder
    found = backend.retrieve([rec.marker_point_id(doc_id) for doc_id in by_doc], False)
    markers = {marker.payload["doc_id"]: marker.payload for marker in found}
    if by_doc:
        backend.reserve([], f"delete {len(matched)} nodes")
    for doc_id, node_ids in by_doc.items():
        marker = markers[doc_id]
        current = [b.match("kind", rec.NODE), b.match("doc_id", doc_id), b.match("version", marker["version"])]
        left = backend.count(b.combine(current, [], [])) - len(node_ids)
        if left <= 0:
            delete_document(backend, doc_id)
            continue
        backend.delete(b.combine([*current[:2], b.match_any("node_id", node_ids)], [], []))
        backend.upsert([rec.marker_point({**marker, "n_nodes": left})])
    if by_doc:
        backend.flush()
    return len(matched)


def clear(backend: Backend) -> None:
    """Delete every document (the settings stay)."""
    b = backend.builder
    backend.reserve([], "delete every document")
    backend.delete(b.combine([b.match_any("kind", [rec.NODE, rec.DOC])], [], []))
    backend.flush()


def pending_filter(backend: Backend) -> Any:
    """The markers of documents whose write or delete was interrupted."""
    b = backend.builder
    return b.combine([b.match("kind", rec.DOC)], [], [b.is_empty("pending")])


def repair(backend: Backend) -> int:
    """Finish or undo the writes a crash interrupted (markers with ``pending``).

    :return: the number of documents repaired.
    """
    markers = list(scroll(backend, pending_filter(backend), False))
    for marker in markers:
        payload = marker.payload
        if payload.get("version") is None:
            _delete_points(backend, payload["doc_id"])
        else:
            _drop_other_versions(backend, [payload["doc_id"]], int(payload["version"]))
            backend.upsert([rec.marker_point({k: v for k, v in payload.items() if k != "pending"})])
    if markers:
        backend.flush()
    return len(markers)


def visible(backend: Backend, points: Sequence[Any]) -> list[Any]:
    """The points whose version is their document's current one (one look-up of the markers).

    :param points: node points with ``doc_id`` and ``version`` in their payload.
    """
    doc_ids = sorted({p.payload["doc_id"] for p in points})
    markers = backend.retrieve([rec.marker_point_id(d) for d in doc_ids], False)
    current = {m.payload["doc_id"]: m.payload.get("version") for m in markers}
    return [p for p in points if current.get(p.payload["doc_id"]) == p.payload.get("version")]


def nodes_filter(backend: Backend, filter: FilterLike, node_ids: Sequence[str] | None = None) -> Any:
    """The native filter of nodes matching a caller's filter (and, when given, some node ids).

    :raises InvalidInputError: for ``node_ids`` that are not a list of str (a str alone would match nothing, a
        number would not iterate).
    """
    b = backend.builder
    extra = [b.match("kind", rec.NODE)]
    if node_ids is not None:
        if isinstance(node_ids, (str, bytes)) or not isinstance(node_ids, Sequence) or not all(
                isinstance(node_id, str) for node_id in node_ids):
            raise InvalidInputError(f"node_ids must be a list of str, got {node_ids!r:.80}")
        extra.append(b.match_any("node_id", list(node_ids)))
    return translate(filter, b, extra)


def recorded_hashes(backend: Backend, doc_ids: Sequence[str]) -> dict[str, str | None]:
    """The content hash each stored document's marker records (None when written without one); documents not in
    the store are left out."""
    found: dict[str, str | None] = {}
    for start in range(0, len(doc_ids), 256):
        ids = [rec.marker_point_id(d) for d in doc_ids[start : start + 256]]
        for marker in backend.retrieve(ids, False):
            if marker.payload.get("version") is not None:
                found[marker.payload["doc_id"]] = marker.payload.get("hash")
    return found


def documents_filter(backend: Backend) -> Any:
    """The native filter of the markers of stored (visible) documents."""
    b = backend.builder
    return b.combine([b.match("kind", rec.DOC)], [], [b.is_empty("version")])


def scroll(backend: Backend, native_filter: Any, with_vectors: bool, page: int = 256) -> Iterator[PointData]:
    """Every point matching a native filter, page by page."""
    offset: str | None = None
    while True:
        points, offset = backend.scroll(native_filter, with_vectors, page, offset)
        yield from points
        if offset is None:
            return


def _drop_other_versions(backend: Backend, doc_ids: list[str], version: int) -> None:
    """Delete nodes of these documents whose version is not ``version``."""
    b = backend.builder
    backend.delete(
        b.combine([b.match("kind", rec.NODE), b.match_any("doc_id", doc_ids)], [], [b.match("version", version)])
    )


def _delete_points(backend: Backend, doc_id: str) -> None:
    """Delete a document's nodes, then its marker."""
    b = backend.builder
    backend.delete(b.combine([b.match("kind", rec.NODE), b.match("doc_id", doc_id)], [], []))
    backend.delete(b.combine([b.match("kind", rec.DOC), b.match("doc_id", doc_id)], [], []))
