"""Rank documents by dot products, with numpy: one vector per document, or best chunk per document."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from lmk_rag.vector_math import maxsim_scores, pack_rows

#: Queries scored per matrix product (bounds the (queries, chunks) score matrix in memory).
QUERY_BATCH = 64


def top_k(scores: np.ndarray, k: int) -> list[list[tuple[int, float]]]:
    """The ``k`` best columns of each row, best first (ties: lower index first).

    :param scores: shape (n_queries, n_docs).
    :param k: how many to keep.
    :return: one list of ``(doc_index, score)`` per row.
    """
    k = min(k, scores.shape[1])
    rankings = []
    for row in scores:
        best = np.argpartition(-row, k - 1)[:k] if k < len(row) else np.arange(len(row))
        best = best[np.lexsort((best, -row[best]))]
        rankings.append([(int(i), float(row[i])) for i in best])
    return rankings


def rank_single(queries: np.ndarray, docs: np.ndarray, k: int) -> list[list[tuple[int, float]]]:
    """Rank documents by the dot product of single vectors.

    :param queries: shape (n_queries, dim).
    :param docs: shape (n_docs, dim).
    :param k: results per query.
    :return: one ranking per query.
    """
    rankings = []
    for start in range(0, len(queries), QUERY_BATCH):
        rankings.extend(top_k(queries[start : start + QUERY_BATCH] @ docs.T, k))
    return rankings


def rank_best_chunk(queries: Sequence[np.ndarray], doc_chunks: Sequence[np.ndarray], k: int
                    ) -> list[list[tuple[int, float]]]:
    """Rank documents by MaxSim (:func:`~lmk_rag.vector_math.maxsim_scores`): for each query chunk, the best dot product
    over a document's chunks, summed.

    A one-chunk query (the usual case) thus scores a document by its best chunk.

    :param queries: one (n_query_chunks, dim) array per query.
    :param doc_chunks: one (n_chunks, dim) array per document (at least one chunk each).
    :param k: results per query.
    :return: one ranking per query.
    """
    matrix, starts = pack_rows(doc_chunks)
    rankings = []
    for start in range(0, len(queries), QUERY_BATCH):
        rankings.extend(top_k(maxsim_scores(queries[start : start + QUERY_BATCH], matrix, starts), k))
    return rankings
