"""A hit's evidence: the passage of its node that carried its score (:class:`~lmk_rag.store.types.Evidence`). Pure.

A chunk rerank scores a node by MaxSim: each query vector's best cosine over the node's chunk vectors, summed, over
the number of query vectors. The chunk each query vector found best is the passage that gave that part of the score;
the node's chunk spans (its payload's ``chunk_spans``) say where it lies in the document. A search computes this for
its returned hits alone, from the vectors it reads with their payloads
(:meth:`~lmk_rag.store.reads.Reader.search_encoded`). A static rerank does the same over the node's distinct static
token vectors, whose spans its token encoder gives (:meth:`~lmk_rag.encoder.protocols.TokenEncoder.document_token_spans`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from lmk_rag.store.types import Evidence, EvidenceKind


def matched_evidence(queries: np.ndarray, vectors: np.ndarray, spans: Sequence[tuple[int, int]] | None,
                     node_span: tuple[int, int], kind: EvidenceKind) -> tuple[Evidence, ...]:
    """The pieces of a node that carried its MaxSim, best first (ties: document order).

    :param queries: the query vectors, (q, dim).
    :param vectors: the node's chunk (or static token) vectors, (n, dim).
    :param spans: each vector's char span in the document, (n,), or None where unknown.
    :param node_span: the node's span in the document.
    :param kind: what one vector is (``"chunk"`` or ``"token"``).
    :return: one :class:`Evidence` per vector that is some query vector's best, its score the share of the MaxSim it
        carried (the scores add up to the MaxSim over ``q``); where ``spans`` is None or does not match ``vectors``
        (n spans), one ``"node"`` evidence spanning the node with the whole MaxSim.
    """
    queries, vectors = _unit(queries), _unit(vectors)
    if len(queries) == 0 or len(vectors) == 0:
        return (Evidence(node_span[0], node_span[1], None, "node"),)
    cosines = queries @ vectors.T
    best = cosines.argmax(axis=1)
    shares = np.zeros(len(vectors), dtype=np.float64)
    np.add.at(shares, best, cosines[np.arange(len(queries)), best])
    shares /= len(queries)
    if spans is None or len(spans) != len(vectors):
        return (Evidence(node_span[0], node_span[1], round(float(shares.sum()), 6), "node"),)
    order = sorted(set(best.tolist()), key=lambda row: (-shares[row], spans[row][0]))
    return tuple(Evidence(int(spans[row][0]), int(spans[row][1]), round(float(shares[row]), 6), kind)
                 for row in order)


def keyword_evidence(node_span: tuple[int, int]) -> tuple[Evidence, ...]:
    """The evidence of a hit of a BM25-only search: the whole node, no rerank score."""
    return (Evidence(node_span[0], node_span[1], None, "bm25"),)


def _unit(rows: np.ndarray) -> np.ndarray:
    """Rows made unit length (a zero row stays zero), as float32 (n, dim)."""
    rows = np.asarray(rows, dtype=np.float32)
    rows = rows.reshape(len(rows), -1) if rows.size else rows.reshape(0, 0)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return rows / np.where(norms > 0, norms, 1.0)
