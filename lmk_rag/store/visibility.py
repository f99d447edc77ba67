"""What a reader sees: the filters of visible nodes and documents, the documents' markers, paging, and the check that
keeps a half-written or replaced version out of every answer (see :mod:`lmk_rag.store.versions`)."""

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
    """The content hash each stored (visible) document's marker records (None when written without one)."""
    return {doc_id: marker.get("hash") for doc_id, marker in found.items() if marker.get("version") is not None}


def visible(backend: Backend, points: Sequence[Any]) -> list[Any]:
    """The points whose version is their document's current one (one look-up of the markers).

    :param points: node points with ``doc_id`` and ``version`` in their payload.
    """
    doc_ids = sorted({p.payload["doc_id"] for p in points})
    found = markers(backend, doc_ids, page=max(1, len(doc_ids)))  # one look-up
    current = {doc_id: marker.get("version") for doc_id, marker in found.items()}
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


def documents_filter(backend: Backend) -> Any:
    """The native filter of the markers of stored (visible) documents."""
    b = backend.builder
    return every(b, b.match("kind", rec.DOC), but_not=[b.is_empty("version")])


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
