"""MaxSim (late interaction) of static token vectors, on :func:`lmk_rag.vector_math.maxsim_scores`.

``maxsim(Q, D) = sum_i max_j <Q_i, D_j>``: every query token takes its best-matching document token.
With L2-normalised rows this is a sum of cosines, at most ``len(Q)``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from lmk_rag.vector_math import check_token_dims, maxsim_scores, pack_rows


def maxsim(query_tokens: np.ndarray, doc_tokens: np.ndarray) -> float:
    """Score one document against one query by MaxSim.

    :param query_tokens: query token vectors, shape (q, dim).
    :param doc_tokens: document token vectors, shape (m, dim).
    :return: the sum over query tokens of their best dot product with a document token; 0.0 if either is empty.
    :raises VectorSizeError: if the two dimensions differ.
    """
    check_token_dims(query_tokens, doc_tokens)
    if len(query_tokens) == 0 or len(doc_tokens) == 0:
        return 0.0
    return float(maxsim_scores([query_tokens], doc_tokens, [0])[0, 0])


def maxsim_matrix(queries: Sequence[np.ndarray], docs: Sequence[np.ndarray], token_block: int = 131072
                  ) -> np.ndarray:
    """MaxSim of every query against every document, in blocks of document tokens to bound memory.

    :param queries: one (q_i, dim) array per query.
    :param docs: one (m_j, dim) array per document (m_j may be 0: such a document scores 0.0).
    :param token_block: about how many document tokens one matrix product covers (whole documents per block).
    :return: scores, shape (len(queries), len(docs)), float32.
    :raises VectorSizeError: if the query and document dimensions differ.
    """
    scores = np.zeros((len(queries), len(docs)), dtype=np.float32)
    filled = [index for index, doc in enumerate(docs) if len(doc)]
    if not filled or len(queries) == 0:
        return scores
    block: list[int] = []
    block_tokens = 0
    for position, doc_index in enumerate(filled):
        block.append(doc_index)
        block_tokens += len(docs[doc_index])
        if block_tokens >= token_block or position == len(filled) - 1:
            scores[:, block] = maxsim_scores(queries, *pack_rows([docs[i] for i in block]))
            block, block_tokens = [], 0
    return scores
