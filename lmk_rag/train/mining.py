"""Hard-negative mining with the model being trained, from the training pairs only."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from lmk_rag.encoder import LandmarkEncoder
from lmk_rag.train.data import TrainPair


def mine_hard_negatives(
    encoder: LandmarkEncoder, pairs: Sequence[TrainPair], skip: int = 3, depth: int = 30
) -> list[list[int]]:
    """For each pair, the training passages its query ranks highest that are not its positive.

    The top ``skip`` hits are left out (in small corpora they are often unlabelled positives).

    :param encoder: the current encoder (its text vectors are used).
    :param pairs: the training pairs; candidates are their positives.
    :param skip: how many top non-positive hits to leave out.
    :param depth: how many hits after those to keep.
    :return: per pair, indices into ``pairs`` of its mined negatives, best first.
    """
    passages = [pair.positive for pair in pairs]
    passage_vectors = np.stack([encoded.vector for encoded in encoder.encode_documents(passages)])
    query_vectors = np.stack([encoded.vector for encoded in encoder.encode_queries([p.query for p in pairs])])
    mined = []
    for index, scores in enumerate(query_vectors @ passage_vectors.T):
        order = [int(j) for j in np.argsort(-scores) if passages[int(j)] != passages[index]]
        mined.append(order[skip : skip + depth])
    return mined
