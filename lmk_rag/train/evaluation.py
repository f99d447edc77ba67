"""Periodic held-out evaluation during fine-tuning, through the inference encoder itself."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from lmk_rag.encoder import LandmarkEncoder
from lmk_rag.encoder.pooling import pool_states
from lmk_rag.train.data import HaystackBuilder, TrainPair
from lmk_rag.vector_math import maxsim_scores, pack_rows


@dataclass(frozen=True)
class HeldoutSet:
    """Held-out queries with their passages, and each passage hidden in a fixed haystack.

    :param queries: the held-out queries.
    :param passages: their positives (passage ``i`` answers query ``i``).
    :param haystacks: passage ``i`` hidden among training text.
    """

    queries: list[str]
    passages: list[str]
    haystacks: list[str]

    @classmethod
    def build(cls, pairs: Sequence[TrainPair], haystacks: HaystackBuilder, seed: int) -> HeldoutSet:
        """Build the set once per run; the haystacks depend on ``seed`` only.

        :param pairs: the held-out pairs.
        :param haystacks: builds the haystacks (its filler is training text only).
        :param seed: the run's seed.
        """
        rng = np.random.default_rng([seed, 3])
        return cls(
            queries=[pair.query for pair in pairs],
            passages=[pair.positive for pair in pairs],
            haystacks=[haystacks.build(pair.positive, rng, set())[0] for pair in pairs],
        )


def _rank_metrics(scores: np.ndarray) -> tuple[float, float]:
    """R@1 and MRR when the right answer of row ``i`` is column ``i``."""
    correct = scores[np.arange(len(scores)), np.arange(len(scores))]
    ranks = 1 + (scores > correct[:, None]).sum(axis=1)
    return float(np.mean(ranks == 1)), float(np.mean(1.0 / ranks))


def evaluate_heldout(encoder: LandmarkEncoder, heldout: HeldoutSet) -> dict[str, float]:
    """Score the held-out set with the encoder's current weights.

    :param encoder: the encoder being trained (any granularity; LMK query vectors are used).
    :param heldout: the held-out set.
    :return: ``lmk_r1``/``lmk_mrr`` (LMK text vectors, passages among the held-out passages),
        ``needle_landmark_r1`` and ``needle_mean_r1`` (haystacks by MaxSim over landmark states or chunk means).
    """
    queries = np.stack([pool_states(s, "lmk", "landmark").vector
                        for s in encoder.encode_states(heldout.queries, query=True)])
    passages = np.stack([pool_states(s, "lmk", "landmark").vector for s in encoder.encode_states(heldout.passages)])
    haystack_states = encoder.encode_states(heldout.haystacks)
    landmark = [pool_states(s, "lmk", "landmark").chunk_vectors for s in haystack_states]
    means = [pool_states(s, "lmk", "mean").chunk_vectors for s in haystack_states]
    lmk_r1, lmk_mrr = _rank_metrics(queries @ passages.T)
    return {
        "lmk_r1": lmk_r1,
        "lmk_mrr": lmk_mrr,
        "needle_landmark_r1": _rank_metrics(maxsim_scores(queries[:, None], *pack_rows(landmark)))[0],
        "needle_mean_r1": _rank_metrics(maxsim_scores(queries[:, None], *pack_rows(means)))[0],
    }
