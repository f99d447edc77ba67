"""MaxSim (late interaction) scoring as pure numpy functions.

``maxsim(Q, D) = sum_i max_j <Q_i, D_j>``: every query token takes its best-matching document token.
With L2-normalised rows this is a sum of cosines, at most ``len(Q)``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from lmk_rag.errors import VectorSizeError


def maxsim(query_tokens: np.ndarray, doc_tokens: np.ndarray) -> float:
    """Score one document against one query by MaxSim.

    :param query_tokens: query token vectors, shape (q, dim).
    :param doc_tokens: document token vectors, shape (m, dim).
    :return: the sum over query tokens of their best dot product with a document token; 0.0 if either is empty.
    :raises VectorSizeError: if the two dimensions differ.
    """
    _check_dims(query_tokens, doc_tokens)
    if len(query_tokens) == 0 or len(doc_tokens) == 0:
        return 0.0
    return float((query_tokens @ doc_tokens.T).max(axis=1).sum())


def maxsim_batch(query_tokens: np.ndarray, docs: Sequence[np.ndarray]) -> np.ndarray:
    """Score many documents against one query by MaxSim with a single matrix product.

    :param query_tokens: query token vectors, shape (q, dim).
    :param docs: one (m_i, dim) array per document (m_i may be 0).
    :return: scores, shape (len(docs),), float32; an empty document scores 0.0.
    :raises VectorSizeError: if a document's dimension differs from the query's.
    """
    scores = np.zeros(len(docs), dtype=np.float32)
    sizes = np.array([len(doc) for doc in docs], dtype=np.int64)
    filled = np.flatnonzero(sizes)
    if len(query_tokens) == 0 or len(filled) == 0:
        return scores
    stacked = np.concatenate([docs[i] for i in filled], axis=0)
    _check_dims(query_tokens, stacked)
    sims = query_tokens @ stacked.T  # (q, sum m_i)
    starts = np.concatenate([[0], np.cumsum(sizes[filled])[:-1]])
    best = np.maximum.reduceat(sims, starts, axis=1)  # (q, n_filled)
    scores[filled] = best.sum(axis=0)
    return scores


def _check_dims(query_tokens: np.ndarray, doc_tokens: np.ndarray) -> None:
    if query_tokens.ndim != 2 or doc_tokens.ndim != 2 or query_tokens.shape[1] != doc_tokens.shape[1]:
        raise VectorSizeError(
            f"MaxSim needs (q, dim) and (m, dim) arrays of one dim; got {query_tokens.shape} and {doc_tokens.shape}"
        )


def maxsim_matrix(queries: Sequence[np.ndarray], docs: Sequence[np.ndarray], token_block: int = 131072
                  ) -> np.ndarray:
    """MaxSim of every query against every document, in blocks of document tokens to bound memory.

    :param queries: one (q_i, dim) array per query.
    :param docs: one (m_j, dim) array per document (m_j may be 0: such a document scores 0.0).
    :param token_block: about how many document tokens one matrix product covers (whole documents per block).
    :return: scores, shape (len(queries), len(docs)), float32.
    """
    scores = np.zeros((len(queries), len(docs)), dtype=np.float32)
    sizes = np.array([len(doc) for doc in docs], dtype=np.int64)
    filled = np.flatnonzero(sizes)
    if len(filled) == 0 or len(queries) == 0:
        return scores
    lengths = np.array([len(q) for q in queries], dtype=np.int64)
    query_matrix = np.concatenate(queries, axis=0)
    _check_dims(query_matrix, docs[filled[0]])
    owners = np.repeat(np.arange(len(queries)), lengths)
    block: list[int] = []
    block_tokens = 0
    for position, doc_index in enumerate(filled):
        block.append(int(doc_index))
        block_tokens += int(sizes[doc_index])
        if block_tokens >= token_block or position == len(filled) - 1:
            stacked = np.concatenate([docs[i] for i in block], axis=0)
            starts = np.concatenate([[0], np.cumsum(sizes[block])[:-1]])
            best = np.maximum.reduceat(query_matrix @ stacked.T, starts, axis=1)  # (query tokens, docs in block)
            block_scores = np.zeros((len(queries), len(block)), dtype=np.float32)
            np.add.at(block_scores, owners, best)
            scores[:, block] = block_scores
            block, block_tokens = [], 0
    return scores
