"""Vector helpers shared by the encoder, the static encoder, the store, the eval harness and the trainers (numpy
only), MaxSim among them: ``maxsim(Q, D) = sum_i max_j <Q_i, D_j>``, every query vector takes its best-matching
document vector. Training's torch twin is :func:`lmk_rag.train.losses.maxsim_scores`."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from lmk_rag.errors import VectorSizeError


def l2_normalize(vectors: np.ndarray) -> np.ndarray:
    """L2-normalise along the last axis (zero vectors stay zero); returns float32."""
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    return (vectors / np.maximum(norms, 1e-12)).astype(np.float32, copy=False)


def pack_rows(arrays: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Stack arrays of rows into one matrix, for :func:`maxsim_scores`.

    :param arrays: one (n_i, dim) array per item.
    :return: ``(matrix, starts)``: the rows one item after another, shape (sum n_i, dim), and the first row of each
        item, shape (len(arrays),).
    """
    return np.concatenate(arrays), np.cumsum([0] + [len(rows) for rows in arrays[:-1]])


def check_token_dims(query_tokens: np.ndarray, doc_tokens: np.ndarray) -> None:
    """Refuse MaxSim operands that are not two (n, dim) matrices of one dim.

    :raises VectorSizeError: naming both shapes.
    """
    if query_tokens.ndim != 2 or doc_tokens.ndim != 2 or query_tokens.shape[1] != doc_tokens.shape[1]:
        raise VectorSizeError(
            f"MaxSim needs (q, dim) and (m, dim) arrays of one dim; got {query_tokens.shape} and {doc_tokens.shape}"
        )


def maxsim_scores(queries: Sequence[np.ndarray], doc_tokens: np.ndarray, doc_starts: np.ndarray | Sequence[int],
                  mean: bool = False) -> np.ndarray:
    """MaxSim of every query against every document, the documents' vectors packed in one matrix
    (:func:`pack_rows`): one matrix product for all of them.

    :param queries: one (q_i, dim) array per query, at least one query (a query without vectors scores 0.0).
    :param doc_tokens: the documents' vectors one document after another, shape (sum m_j, dim).
    :param doc_starts: the first row of each document in ``doc_tokens``, increasing: every document has a row.
    :param mean: divide each query's score by its number of vectors (a mean of best cosines, in [-1, 1] for unit
        vectors) instead of keeping the sum.
    :return: float32 scores, shape (len(queries), len(doc_starts)).
    :raises VectorSizeError: if the query and document dimensions differ.
    """
    query_matrix = np.concatenate(queries)
    check_token_dims(query_matrix, doc_tokens)
    lengths = np.array([len(query) for query in queries], dtype=np.int64)
    best = np.maximum.reduceat(query_matrix @ doc_tokens.T, doc_starts, axis=1)  # (query vectors, docs)
    scores = np.zeros((len(queries), len(doc_starts)), np.float32)
    np.add.at(scores, np.repeat(np.arange(len(queries)), lengths), best)
    if mean:
        scores /= np.maximum(lengths, 1)[:, None]
    return scores
