"""Contrastive losses for LMK fine-tuning."""

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


def maxsim_scores(queries: torch.Tensor, landmarks: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Score each query against each text by its best landmark.

    :param queries: normalised query vectors, shape (Q, dim).
    :param landmarks: normalised landmark vectors, shape (T, n, dim), padded.
    :param mask: True where a landmark is real, shape (T, n).
    :return: ``max_l q . landmark_l`` for every query and text, shape (Q, T).
    """
    similarities = torch.einsum("qd,tnd->qtn", queries, landmarks)
    return similarities.masked_fill(~mask[None], float("-inf")).amax(dim=-1)


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
    scores = maxsim_scores(queries, landmarks, mask) / temperature
    return F.cross_entropy(scores, torch.arange(len(queries), device=queries.device))

