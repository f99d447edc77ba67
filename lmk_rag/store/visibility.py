"""What a reader sees: the filters of committed nodes and stored documents, the documents' markers, paging, and the
choice of one version per document (see :mod:`lmk_rag.store.versions`).

A node is shown when its ``live`` flag is not false (:func:`shown_filter`): a write's nodes stay hidden until the
write commits, so every search states visibility inside its one query. Committing sets ``live`` on the new
version before the old one is deleted, so for a moment both may be live: :func:`latest` keeps, per document, the
highest version among what a search got.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from lmk_rag.errors import InvalidInputError
from lmk_rag.store import records as rec
from lmk_rag.store.base import Backend
from lmk_rag.store.filters import FilterLike, every, translate
from lmk_rag.store.types import PointData

#: Markers read per engine call.
MARKER_PAGE = 256


def markers(backend: Backend, doc_ids: Sequence[str], page: int = MARKER_PAGE) -> dict[str, dict[str, Any]]:
    """The marker payloads of these documents (written or being written), by doc id; others are left out.

    :param page: markers read per engine call.
    """
    found: dict[str, dict[str, Any]] = {}
    for start in range(0, len(doc_ids), page):
        ids = [rec.marker_point_id(doc_id) for doc_id in doc_ids[start : start + page]]
        found.update((m.payload["doc_id"], m.payload) for m in backend.retrieve(ids, False))
    return found


def stored_hashes(found: dict[str, dict[str, Any]]) -> dict[str, str | None]:
    """The content hash each stored document's marker records (None when written without one)."""
    return {doc_id: marker.get("hash") for doc_id, marker in found.items()}


def latest(results: Sequence[Sequence[Any]]) -> list[list[Any]]:
    """Lists of node points, each less the points of a version its document has a higher one of among all the lists
    (a version a commit is replacing), in their order.

    :param results: lists of node points with ``doc_id`` and ``version`` in their payload (a search's scored lists).
    """
    newest: dict[str, int] = {}
    for point in (point for points in results for point in points):
        doc_id, version = point.payload["doc_id"], point.payload.get("version") or 0
        newest[doc_id] = max(version, newest.get(doc_id, version))
    return [[p for p in points if (p.payload.get("version") or 0) == newest[p.payload["doc_id"]]]
            for points in results]


def nodes_filter(backend: Backend, filter: FilterLike, node_ids: Sequence[str] | None = None) -> Any:
    """The native filter of the nodes (of every version, committed or not) matching a caller's filter (and, when
    given, some node ids).

    :raises InvalidInputError: for ``node_ids`` that are not a list of str (a str alone would match nothing, a
        number would not iterate).
    """
    return _nodes(backend, filter, node_ids, ())


def shown_filter(backend: Backend, filter: FilterLike, node_ids: Sequence[str] | None = None) -> Any:
    """:func:`nodes_filter` less the nodes of versions not committed (``live`` false): what a reader may see."""
    return _nodes(backend, filter, node_ids, (backend.builder.match(rec.LIVE, False),))


def searched_filter(backend: Backend, filter: FilterLike) -> Any:
    """:func:`shown_filter` for a search by vector (dense, multivector or sparse): without its ``kind`` condition,
    which only the markers fail, and a marker has no vectors, so no search scores one. The keyword condition cost
    2.3 ms of a fused search's rerank call at a million nodes (docs/decisions.md, "store: a search reads the
    payloads of its hits alone, and filters on ``live`` alone")."""
    return translate(filter, backend.builder, (), (backend.builder.match(rec.LIVE, False),))


def _nodes(backend: Backend, filter: FilterLike, node_ids: Sequence[str] | None, but_not: Sequence[Any]) -> Any:
    """The native filter of nodes matching a caller's filter, some node ids (when given) and none of ``but_not``."""
    b = backend.builder
    extra = [b.match("kind", rec.NODE)]
    if node_ids is not None:
        if isinstance(node_ids, (str, bytes)) or not isinstance(node_ids, Sequence) or not all(
                isinstance(node_id, str) for node_id in node_ids):
            raise InvalidInputError(f"node_ids must be a list of str, got {node_ids!r:.80}")
        extra.append(b.match_any("node_id", list(node_ids)))
    return translate(filter, b, extra, but_not)


def hidden_filter(backend: Backend) -> Any:
    """The nodes of versions not committed yet (``live`` false): a write under way, or one a crash interrupted."""
    b = backend.builder
    return every(b, b.match("kind", rec.NODE), b.match(rec.LIVE, False))


def documents_filter(backend: Backend) -> Any:
    """The native filter of the markers of stored documents."""
    b = backend.builder
    return every(b, b.match("kind", rec.DOC))


def pending_filter(backend: Backend) -> Any:
    """The markers of documents whose write or delete was interrupted."""
    b = backend.builder
    return every(b, b.match("kind", rec.DOC), but_not=[b.is_empty("pending")])


def counts(backend: Backend) -> tuple[int, int]:
    """The engine's ``(documents, nodes)``: stored documents and the nodes of every version."""
    return backend.count(documents_filter(backend)), backend.count(nodes_filter(backend, None))


def scroll(backend: Backend, native_filter: Any, with_vectors: bool, page: int = 256) -> Iterator[PointData]:
    """Every point matching a native filter, page by page."""
    offset: str | None = None
    while True:
        points, offset = backend.scroll(native_filter, with_vectors, page, offset)
        yield from points
        if offset is None:
            return
