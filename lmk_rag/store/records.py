"""The points of a store in Qdrant: their ids and payloads, the named-vector layout every backend builds its
collection from, and which points a reader sees.

Every document has one *marker* point (no vectors) holding its current ``version``. A node is written with
``live`` false, so no search sees it; a write puts the new nodes beside the old ones (in the other id *slot*), flips
the marker in one point write, sets ``live`` on the new nodes, then deletes the old ones (see
:mod:`lmk_rag.store.writes`). ``pending`` on a marker says a committed write was not finished; opening the store
repairs those documents and drops nodes never committed, so a crash leaves the old version or the new one.

A node is shown when its ``live`` flag is not false (:func:`shown_filter`): every search states visibility inside
its one query. Committing sets ``live`` on the new version before the old one is deleted, so for a moment both may
be live: :func:`latest` keeps, per document, the highest version among what a search got.

The named vectors (:func:`vector_layout`):

====================  ===========  =========================================================  ==================
name                  kind         what                                                       index
====================  ===========  =========================================================  ==================
``node``              dense        the node vector (normalised mean of its chunk vectors;     HNSW, cosine
                                   pooled static vectors in a static store)
``chunks``            multivector  the node's chunk vectors (one per landmark chunk;         none: rerank only
                                   transformer stores only)
``static``            multivector  static token vectors (static stores, and transformer       none: rerank only
                                   stores made with a static encoder)
``bm25``              sparse       the node's BM25 term weights (stores with BM25)            IDF modifier
====================  ===========  =========================================================  ==================

Multivectors compare by MaxSim over cosines and may be quantized; HNSW is built for the node vector only.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from lmk_rag.errors import CorruptStoreError, InvalidInputError
from lmk_rag.store.base import Backend
from lmk_rag.store.filters import LOWER_KEY, ConditionBuilder, FilterLike, translate
from lmk_rag.store.types import ChunkScore, CollectionSpec, Evidence, Hit, NodeRecord, PointData, StoreMode

NAMESPACE = uuid.UUID("6f1d3c52-7f4e-4a55-9a38-5b1f0c2d9e10")
SETTINGS_POINT_ID = str(uuid.uuid5(NAMESPACE, "lmk-rag-store-settings"))
NODE, DOC, STORE = "node", "doc", "store"
#: The payload key of a node's chunk spans: each chunk vector's char span ``[start, end]`` in the document, in the
#: order of the ``chunks`` multivector (absent where they are unknown); a hit's evidence reads them.
CHUNK_SPANS = "chunk_spans"
#: The payload keys a search asks for with its scored points on a server: what a :class:`Hit` and the choice of one
#: version per document (:func:`latest`) read; the vectors stay in the engine. Where the
#: process is the store's only writer, a search reads the payloads of its hits alone, after ranking
#: (:class:`~lmk_rag.store.reads.Reader`).
HIT_KEYS = ["doc_id", "node_id", "version", "text", "span", "meta", CHUNK_SPANS]
#: The payload key of a node that says whether its version was committed: false when written, true once its
#: document's marker points at its version.
LIVE = "live"
#: The payload key of a node's document statistics: ``{"chunks": n, "coherence": c}``, the number of chunk vectors
#: of its document and the length of their mean (1 when they all point one way; the ``document`` vector is that mean
#: made unit). Read by :meth:`~lmk_rag.store.reads.Reader.document_weight`.
DOCUMENT_KEY = "document"
#: The payload path of a node's document chunk count, which a chunk search's length penalty reads in the engine.
DOCUMENT_CHUNKS = f"{DOCUMENT_KEY}.chunks"
#: The payload indexes of every store: what the write protocol and searches filter on, and the chunk count the
#: length penalty reads (from the index, not each candidate's payload).
PAYLOAD_INDEXES = (("kind", "keyword"), ("doc_id", "keyword"), ("node_id", "keyword"), ("version", "integer"),
                   (LIVE, "bool"), (DOCUMENT_CHUNKS, "integer"))


def node_id_for(doc_id: str, index: int) -> str:
    """The id of the ``index``-th node the store cuts from a document: ``"<doc_id>#<index>"``."""
    return f"{doc_id}#{index}"


def node_point_id(node_id: str, slot: int) -> str:
    """The stable point id of a node in id slot 0 or 1 (uuid5 of the node id and slot)."""
    return str(uuid.uuid5(NAMESPACE, f"node\x00{node_id}\x00{slot}"))


def marker_point_id(doc_id: str) -> str:
    """The point id of a document's marker (uuid5 of the doc id)."""
    return str(uuid.uuid5(NAMESPACE, f"doc\x00{doc_id}"))


def marker_payload(
    doc_id: str,
    version: int,
    slot: int,
    n_nodes: int,
    metadata: dict[str, Any],
    pending: int | None = None,
    content_hash: str | None = None,
    source: str | None = None,
) -> dict[str, Any]:
    """A document marker's payload: its visible ``version``, held in id ``slot``, of ``n_nodes`` nodes.

    :param content_hash: the hash of what the visible version was made from (see
        :func:`lmk_rag.store.documents.content_hash`); None for nodes written pre-encoded.
    :param source: the file the document was read from, when its writer said so (kept apart from the metadata,
        which users fill as they like: ``lmk-rag ingest --sync`` deletes only documents with a source).
    """
    payload: dict[str, Any] = {
        "kind": DOC,
        "doc_id": doc_id,
        "version": version,
        "slot": slot,
        "n_nodes": n_nodes,
        "meta": metadata,
    }
    if pending is not None:
        payload["pending"] = pending
    if content_hash is not None:
        payload["hash"] = content_hash
    if source is not None:
        payload["source"] = source
    return payload


def marker_point(payload: dict[str, Any]) -> PointData:
    """A marker point (no vectors) from its payload."""
    return PointData(marker_point_id(payload["doc_id"]), {}, payload)


def node_point(record: NodeRecord, version: int, slot: int, vectors: dict[str, Any],
               document: dict[str, Any] | None = None) -> PointData:
    """A node point: its named vectors (built by :class:`~lmk_rag.store.vectors.NodeVectors`) and payload (not
    ``live`` yet: committing its version sets it).

    :param document: what the node's document vector was made from (:data:`DOCUMENT_KEY`), when it has one.
    """
    payload: dict[str, Any] = {
        "kind": NODE,
        "doc_id": record.doc_id,
        "node_id": record.node_id,
        "version": version,
        LIVE: False,
        "text": record.text,
        "span": [int(record.span[0]), int(record.span[1])],
        "meta": record.metadata,
    }
    if record.chunk_spans is not None:
        payload[CHUNK_SPANS] = [[int(start), int(end)] for start, end in record.chunk_spans]
    lower = lowered(record.metadata)
    if lower:
        payload[LOWER_KEY] = lower
    if document is not None:
        payload[DOCUMENT_KEY] = document
    return PointData(node_point_id(record.node_id, slot), vectors, payload)


def lowered(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """The lower-cased copy of a metadata dict's strings that ``substring_any_case`` searches (stored on every node
    as ``meta_lower``): strings lower-cased, dicts and lists kept for the strings they hold (lists keep their
    positions, None elsewhere), everything else left out.

    :param metadata: a node's metadata.
    :return: the copy (empty when the metadata holds no string).
    """

    def lower(value: Any) -> Any:
        if isinstance(value, str):
            return value.lower()
        if isinstance(value, Mapping):
            kept = {key: lower(item) for key, item in value.items()}
            return {key: item for key, item in kept.items() if item is not None} or None
        if isinstance(value, (list, tuple)):  # positions kept (None elsewhere): an index in a key names the same item
            items = [lower(item) for item in value]
            return items if any(item is not None for item in items) else None
        return None

    return lower(metadata) or {}


def record_from_point(point: PointData) -> NodeRecord:
    """A stored node point back as a :class:`NodeRecord` (vectors as float32 arrays; a static store's nodes have no
    chunk vectors: shape (0, dim))."""
    payload, vectors = point.payload, point.vectors
    if vectors.get("node") is None:
        raise CorruptStoreError(
            f"node {payload.get('node_id')!r} has no node vector: the store's vector files are damaged; run "
            "lmk-rag check for the list of damaged nodes, then re-ingest their documents"
        )
    static = vectors.get("static")
    dim = len(vectors["node"])
    return NodeRecord(
        node_id=payload["node_id"],
        doc_id=payload["doc_id"],
        text=payload.get("text", ""),
        span=(int(payload["span"][0]), int(payload["span"][1])),
        vector=np.asarray(vectors["node"], dtype=np.float32),
        chunk_vectors=np.asarray(vectors.get("chunks", []), dtype=np.float32).reshape(-1, dim),
        metadata=payload.get("meta") or {},
        static_vectors=None if static is None else np.asarray(static, dtype=np.float32),
        chunk_spans=chunk_spans(payload),
    )


def chunk_spans(payload: Mapping[str, Any]) -> tuple[tuple[int, int], ...] | None:
    """A node payload's chunk spans (:data:`CHUNK_SPANS`), or None where it has none."""
    spans = payload.get(CHUNK_SPANS)
    return None if spans is None else tuple((int(start), int(end)) for start, end in spans)


def hit_from_point(point: PointData, score: float, evidence: tuple[Evidence, ...] = (),
                   chunk_scores: tuple[ChunkScore, ...] = ()) -> Hit:
    """A :class:`Hit` from a node point's payload, its score, its evidence and its chunks' scores."""
    payload = point.payload
    return Hit(
        doc_id=payload["doc_id"],
        node_id=payload["node_id"],
        score=score,
        text=payload.get("text", ""),
        span=(int(payload["span"][0]), int(payload["span"][1])),
        metadata=payload.get("meta") or {},
        evidence=evidence,
        chunk_scores=chunk_scores,
    )


VectorKind = Literal["dense", "scored", "multivector", "sparse"]


@dataclass(frozen=True)
class VectorSlot:
    """One named vector of a collection.

    :param name: the vector's name in Qdrant.
    :param kind: ``"dense"`` (HNSW), ``"scored"`` (a dense vector only scored on candidates: no HNSW),
        ``"multivector"`` (MaxSim, no HNSW) or ``"sparse"`` (IDF modifier).
    :param size: the dimension (None for sparse vectors).
    """

    name: str
    kind: VectorKind
    size: int | None = None


def vector_layout(spec: CollectionSpec) -> list[VectorSlot]:
    """The named vectors a collection spec asks for, in a fixed order.

    :param spec: what the store holds.
    :return: ``node``, then ``chunks`` and ``document``, ``static`` and ``bm25`` when the spec has them.
    """
    slots = [VectorSlot("node", "dense", spec.dim)]
    if spec.chunks:
        slots.append(VectorSlot("chunks", "multivector", spec.dim))
        slots.append(VectorSlot("document", "scored", spec.dim))
    if spec.static_dim is not None:
        slots.append(VectorSlot("static", "multivector", spec.static_dim))
    if spec.bm25:
        slots.append(VectorSlot("bm25", "sparse"))
    return slots


def store_mode(settings: dict[str, Any]) -> StoreMode:
    """The mode a store's settings record.

    :raises CorruptStoreError: for a mode this version does not know.
    """
    try:
        return StoreMode(settings["mode"])
    except ValueError:
        raise CorruptStoreError(f"unknown store mode {settings['mode']!r} in the settings record") from None


def recorded_vectors(settings: dict[str, Any]) -> set[str]:
    """The names of the vectors a store's settings record says its collection holds."""
    names = {"node"} if store_mode(settings) == StoreMode.STATIC else {"node", "chunks", "document"}
    names |= {"static"} if settings["static"] else set()
    names |= {"bm25"} if settings["bm25"] else set()
    return names


#: Markers read per engine call.
MARKER_PAGE = 256


def markers(backend: Backend, doc_ids: Sequence[str], page: int = MARKER_PAGE) -> dict[str, dict[str, Any]]:
    """The marker payloads of these documents (written or being written), by doc id; others are left out.

    :param page: markers read per engine call.
    """
    found: dict[str, dict[str, Any]] = {}
    for start in range(0, len(doc_ids), page):
        ids = [marker_point_id(doc_id) for doc_id in doc_ids[start : start + page]]
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


def every(builder: ConditionBuilder, *conditions: Any, but_not: Sequence[Any] = ()) -> Any:
    """The native filter of the points matching every one of ``conditions`` and none of ``but_not``: the store's
    own conditions on its payload (``kind``, ``live``, ``version``, ...)."""
    return builder.combine(list(conditions), [], list(but_not))


def _matching(backend: Backend, filter: FilterLike, must: Sequence[Any], but_not: Sequence[Any]) -> Any:
    """The store's own conditions and, when there is one, a caller's filter translated
    (:func:`~lmk_rag.store.filters.translate`): the native filter of the points matching all of them."""
    if filter is None:
        return every(backend.builder, *must, but_not=but_not)
    return translate(filter, backend.builder, must, but_not)


def nodes_filter(backend: Backend, filter: FilterLike, node_ids: Sequence[str] | None = None) -> Any:
    """The native filter of the nodes (of every version, committed or not) matching a caller's filter (and, when
    given, some node ids).

    :raises InvalidInputError: for ``node_ids`` that are not a list of str (a str alone would match nothing, a
        number would not iterate).
    """
    return _nodes(backend, filter, node_ids, ())


def shown_filter(backend: Backend, filter: FilterLike, node_ids: Sequence[str] | None = None) -> Any:
    """:func:`nodes_filter` less the nodes of versions not committed (``live`` false): what a reader may see."""
    return _nodes(backend, filter, node_ids, (backend.builder.match(LIVE, False),))


def searched_filter(backend: Backend, filter: FilterLike) -> Any:
    """:func:`shown_filter` for a search by vector (dense, multivector or sparse): without its ``kind`` condition,
    which only the markers fail, and a marker has no vectors, so no search scores one. The keyword condition cost
    2.3 ms of a fused search's rerank call at a million nodes (docs/decisions.md, "store: a search reads the
    payloads of its hits alone, and filters on ``live`` alone")."""
    return _matching(backend, filter, (), (backend.builder.match(LIVE, False),))


def _nodes(backend: Backend, filter: FilterLike, node_ids: Sequence[str] | None, but_not: Sequence[Any]) -> Any:
    """The native filter of nodes matching a caller's filter, some node ids (when given) and none of ``but_not``."""
    b = backend.builder
    extra = [b.match("kind", NODE)]
    if node_ids is not None:
        if isinstance(node_ids, (str, bytes)) or not isinstance(node_ids, Sequence) or not all(
                isinstance(node_id, str) for node_id in node_ids):
            raise InvalidInputError(f"node_ids must be a list of str, got {node_ids!r:.80}")
        extra.append(b.match_any("node_id", list(node_ids)))
    return _matching(backend, filter, extra, but_not)


def hidden_filter(backend: Backend) -> Any:
    """The nodes of versions not committed yet (``live`` false): a write under way, or one a crash interrupted."""
    b = backend.builder
    return every(b, b.match("kind", NODE), b.match(LIVE, False))


def documents_filter(backend: Backend) -> Any:
    """The native filter of the markers of stored documents."""
    b = backend.builder
    return every(b, b.match("kind", DOC))


def pending_filter(backend: Backend) -> Any:
    """The markers of documents whose write or delete was interrupted."""
    b = backend.builder
    return every(b, b.match("kind", DOC), but_not=[b.is_empty("pending")])


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
