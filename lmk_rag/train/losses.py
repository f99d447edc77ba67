"""Contrastive losses for LMK fine-tuning, and the torch MaxSim that it and the static mixer's training
(:mod:`lmk_rag.static.train`) score with."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def info_nce(queries: torch.Tensor, passages: torch.Tensor, temperature: float) -> torch.Tensor:
    """InfoNCE with in-batch negatives: query ``i``'s positive is passage ``i``; every other passage is a negative.

    :param queries: normalised query vectors, shape (B, dim).
    :param passages: normalised passage vectors, shape (P, dim) with P >= B; rows B.. are extra (hard) negatives.
    :param temperature: divides the cosine similarities.
    :return: the mean cross-entropy, a scalar.
    """
    scores = queries @ passages.T / temperature
    return F.cross_entropy(scores, torch.arange(len(queries), device=queries.device))


#: The similarity a padded document vector gets: below every real one, and finite, so that a text without vectors
#: scores very low instead of -inf (whose loss would be inf and gradients NaN).
PADDING_SIMILARITY = -1e4


def maxsim_scores(queries: torch.Tensor, query_mask: torch.Tensor | None, docs: torch.Tensor, doc_mask: torch.Tensor,
                  mean: bool = False) -> torch.Tensor:
    """MaxSim of every query against every document, padded (the torch twin of
    :func:`lmk_rag.vector_math.maxsim_scores`): each real query vector takes its best real document vector, summed.

    :param queries: query vectors, shape (Q, q, dim), padded.
    :param query_mask: 1 (or True) where a query vector is real, shape (Q, q); None: all are.
    :param docs: document vectors, shape (T, n, dim), padded.
    :param doc_mask: 1 (or True) where a document vector is real, shape (T, n).
    :param mean: divide each query's score by its number of real vectors (at least 1) instead of keeping the sum.
    :return: scores, shape (Q, T).
    """
    similarities = torch.einsum("aqd,bpd->abqp", queries, docs)
    similarities = similarities.masked_fill(doc_mask[None, :, None, :] == 0, PADDING_SIMILARITY)
    best = similarities.max(dim=-1).values  # (Q, T, q)
    if query_mask is not None:
        best = best * query_mask[:, None, :]
    scores = best.sum(-1)
    if mean:
        scores = scores / (best.shape[-1] if query_mask is None else query_mask.sum(-1, keepdim=True).clamp(min=1))
    return scores


def landmark_maxsim_nce(
    queries: torch.Tensor, landmarks: torch.Tensor, mask: torch.Tensor, temperature: float
) -> torch.Tensor:
    """InfoNCE over haystacks scored by MaxSim: query ``i``'s positive is haystack ``i``.

    Only the best landmark of each haystack gets gradient, so the landmarks that cover the needle
    learn to match its query on their own.

    :param queries: normalised query vectors, shape (B, dim).
    :param landmarks: normalised haystack landmarks, shape (B, n, dim), padded.
    :param mask: True where a landmark is real, shape (B, n).
    :param temperature: divides the similarities.
    :return: the mean cross-entropy, a scalar.
    """
    scores = maxsim_scores(queries[:, None], None, landmarks, mask) / temperature
    return F.cross_entropy(scores, torch.arange(len(queries), device=queries.device))

