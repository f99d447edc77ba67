"""The write, repair and delete protocol of documents, as functions over a backend.

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
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from lmk_rag.errors import InvalidInputError
from lmk_rag.store import records as rec
from lmk_rag.store.base import Backend
from lmk_rag.store.documents import DocumentWrite
from lmk_rag.store.filters import every
from lmk_rag.store.records import pending_filter, scroll
from lmk_rag.store.types import NodeRecord, PointData

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
