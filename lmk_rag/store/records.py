"""The store's data layout: point ids and payloads of nodes and per-document markers (pure helpers).

Every document has one *marker* point (no vectors) holding its current ``version``. A node is written with
``live`` false, so no search sees it; a write puts the new nodes beside the old ones (in the other id *slot*), flips
the marker in one point write, sets ``live`` on the new nodes, then deletes the old ones (see
:mod:`lmk_rag.store.versions`). ``pending`` on a marker says a committed write was not finished; opening the store
repairs those documents and drops nodes never committed, so a crash leaves the old version or the new one.
"""

from __future__ import annotations

import uuid
from typing import Any

import numpy as np

from lmk_rag.errors import CorruptStoreError
from lmk_rag.store.filters import LOWER_KEY, lowered
from lmk_rag.store.types import Hit, NodeRecord, PointData

NAMESPACE = uuid.UUID("6f1d3c52-7f4e-4a55-9a38-5b1f0c2d9e10")
SETTINGS_POINT_ID = str(uuid.uuid5(NAMESPACE, "lmk-rag-store-settings"))
NODE, DOC, STORE = "node", "doc", "store"
#: The payload keys a search asks for with its scored points on a server: what a :class:`Hit` and the choice of one
#: version per document (:func:`~lmk_rag.store.visibility.latest`) read; the vectors stay in the engine. Where the
#: process is the store's only writer, a search reads the payloads of its hits alone, after ranking
#: (:class:`~lmk_rag.store.reads.Reader`).
HIT_KEYS = ["doc_id", "node_id", "version", "text", "span", "meta"]
#: The payload key of a node that says whether its version was committed: false when written, true once its
#: document's marker points at its version.
LIVE = "live"
#: The payload indexes of every store: what the write protocol and searches filter on.
PAYLOAD_INDEXES = (("kind", "keyword"), ("doc_id", "keyword"), ("node_id", "keyword"), ("version", "integer"),
                   (LIVE, "bool"))


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


def node_point(record: NodeRecord, version: int, slot: int, vectors: dict[str, Any]) -> PointData:
    """A node point: its named vectors (built by :class:`~lmk_rag.store.points.NodeVectors`) and payload (not
    ``live`` yet: committing its version sets it)."""
    payload = {
        "kind": NODE,
        "doc_id": record.doc_id,
        "node_id": record.node_id,
        "version": version,
        LIVE: False,
        "text": record.text,
        "span": [int(record.span[0]), int(record.span[1])],
        "meta": record.metadata,
    }
    lower = lowered(record.metadata)
    if lower:
        payload[LOWER_KEY] = lower
    return PointData(node_point_id(record.node_id, slot), vectors, payload)


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
    )


def hit_from_point(point: PointData, score: float) -> Hit:
    """A :class:`Hit` from a node point's payload and its score."""
    payload = point.payload
    return Hit(
        doc_id=payload["doc_id"],
        node_id=payload["node_id"],
        score=score,
        text=payload.get("text", ""),
        span=(int(payload["span"][0]), int(payload["span"][1])),
        metadata=payload.get("meta") or {},
    )
