"""The full verification of a store (``lmk-rag check``): what opening checks, and every point besides.

Opening a store compares its committed counts with the engine's (:mod:`lmk_rag.store.settings`); this reads every
point: markers against their nodes, nodes without a current marker, and every vector (finite, and unit length
where the store wrote unit vectors).
"""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

import numpy as np

from lmk_rag.store import records as rec
from lmk_rag.store.base import Backend
from lmk_rag.store.filters import every
from lmk_rag.store.records import scroll

#: How far a stored unit vector's norm may drift (float32 storage, cosine normalisation).
NORM_TOLERANCE = 1e-2
#: Problems listed per kind at most (the count is always given).
SHOWN = 5
#: Nodes an open reads from each of two places in the id order to look for damaged vectors.
SAMPLE = 32


def verify(backend: Backend, committed: tuple[int, int] | None) -> list[str]:
    """Every problem found in a store, one line each (empty: the store is sound).

    :param backend: the store's backend.
    :param committed: the ``(documents, nodes)`` the store recorded, or None when it records none.
    """
    b = backend.builder
    problems: list[str] = []
    markers = {m.payload["doc_id"]: m.payload for m in scroll(backend, every(b, b.match("kind", rec.DOC)), False)}
    current = {doc_id: payload.get("version") for doc_id, payload in markers.items()}
    pending = sorted(doc_id for doc_id, payload in markers.items() if payload.get("pending") is not None)
    _add(problems, "documents with an interrupted write (opening the store to write repairs them)", pending)
    nodes: Counter[str] = Counter()
    orphans, damaged = [], []
    for point in scroll(backend, every(b, b.match("kind", rec.NODE)), True):
        doc_id = point.payload.get("doc_id")
        if doc_id not in current or current[doc_id] != point.payload.get("version"):
            orphans.append(point.payload.get("node_id", point.id))
            continue
        nodes[doc_id] += 1
        problem = _vector_problem(point.vectors)
        if problem:
            damaged.append(f"{point.payload.get('node_id')} ({problem})")
    _add(problems, "nodes without a current document version", orphans)
    _add(problems, "nodes with damaged vectors", damaged)
    wrong = [f"{doc_id} (records {payload.get('n_nodes')}, holds {nodes[doc_id]})"
             for doc_id, payload in sorted(markers.items())
             if payload.get("version") is not None and payload.get("n_nodes") != nodes[doc_id]]
    _add(problems, "documents whose node count differs from their record", wrong)
    if committed is not None:
        held = (sum(1 for version in current.values() if version is not None), sum(nodes.values()))
        if held != committed:
            problems.append(f"the store committed {committed[0]} documents and {committed[1]} nodes, "
                            f"it holds {held[0]} and {held[1]}")
    return problems


def sample_problem(backend: Backend, size: int = SAMPLE) -> str | None:
    """The first damaged vector among a sample of stored nodes (``size`` from the start of the id order and
    ``size`` from a random id on), or None: the cheap check of an open, where :func:`verify` reads every point.

    :return: ``"<node id>: <problem>"``, or None when the sample is sound.
    """
    b = backend.builder
    nodes = every(b, b.match("kind", rec.NODE))
    for offset in (None, str(uuid.uuid4())):
        points, _ = backend.scroll(nodes, True, size, offset)
        for point in points:
            problem = _vector_problem(point.vectors)
            if problem:
                return f"{point.payload.get('node_id', point.id)}: {problem}"
    return None


def _vector_problem(vectors: dict[str, Any]) -> str | None:
    """What is wrong with a node's vectors, or None."""
    if vectors.get("node") is None:
        return "no node vector"
    dim = len(np.asarray(vectors["node"]))
    for name in ("node", "chunks"):
        if vectors.get(name) is None:
            continue
        array = np.asarray(vectors[name], dtype=np.float64).reshape(-1, dim)
        if not np.all(np.isfinite(array)):
            return f"{name}: not finite"
        norms = np.linalg.norm(array, axis=1)
        if np.any(np.abs(norms - 1.0) > NORM_TOLERANCE):
            return f"{name}: norm {norms[np.argmax(np.abs(norms - 1.0))]:.3g} where 1 was written"
    static = vectors.get("static")
    if static is not None and not np.all(np.isfinite(np.asarray(static, dtype=np.float64))):
        return "static: not finite"
    sparse = vectors.get("bm25")
    if sparse is not None and not all(np.isfinite(v) and v >= 0 for v in sparse.values):
        return "bm25: not finite or negative"
    return None


def _add(problems: list[str], what: str, items: list[str]) -> None:
    """One line for a kind of problem: how many, and the first few."""
    if items:
        shown = ", ".join(map(str, items[:SHOWN])) + (", ..." if len(items) > SHOWN else "")
        problems.append(f"{len(items)} {what}: {shown}")
