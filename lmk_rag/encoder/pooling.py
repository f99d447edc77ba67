"""Pooling: from raw chunk states to the normalised text vector and chunk vectors."""

from __future__ import annotations

import numpy as np

from lmk_rag.encoder.types import ChunkStates, ChunkVector, EncodedText, Pooling
from lmk_rag.vector_math import l2_normalize


def chunk_means(states: ChunkStates) -> np.ndarray:
    """Mean of each chunk's token states, shape (n_chunks, dim), not normalised."""
    return states.chunk_sums / np.maximum(states.chunk_sizes, 1)[:, None]


def text_vector(states: ChunkStates, pooling: Pooling | str) -> np.ndarray:
    """The pooled text vector, shape (dim,), L2-normalised.

    ``lmk`` and ``multicls``: mean of the landmark states; ``mean``: mean of all owned and prompt token states
    (exactly sentence-transformers' mean pooling for a text that fits one window); ``cls``: the first
    window's CLS state; ``max`` and ``weightedmean``: sentence-transformers' modes over every window's owned and
    prompt tokens; ``lasttoken``: the state of the last window's last token, the text's last landmark.
    """
    if pooling in ("lmk", "multicls"):
        vector = states.landmark_states.mean(axis=0)
    elif pooling == "mean" and states.prompt_sum is not None:
        total = states.chunk_sums.sum(axis=0) + states.prompt_sum
        vector = total / max(float(states.chunk_sizes.sum()) + states.prompt_size, 1.0)
    elif pooling == "mean":
        vector = states.chunk_sums.sum(axis=0) / max(float(states.chunk_sizes.sum()), 1.0)
    elif pooling == "cls":
        vector = states.cls_states[0] if len(states.cls_states) else states.landmark_states[0]
    elif pooling == "lasttoken":
        vector = states.landmark_states[-1]
    elif pooling in ("max", "weightedmean"):
        if states.token_max is None or states.weighted_sum is None:
            raise ValueError(f"these chunk states were cached without what {pooling!r} pooling needs; encode again")
        vector = states.token_max if pooling == "max" else states.weighted_sum / max(states.weight_total, 1.0)
    else:
        raise ValueError(f"unknown pooling {pooling!r}")
    return l2_normalize(vector)


def pool_states(states: ChunkStates, pooling: Pooling | str, chunk_vector: ChunkVector | str) -> EncodedText:
    """Build an :class:`EncodedText` from raw states with the given pooling and chunk vector choice."""
    chunks = states.landmark_states if chunk_vector == "landmark" else chunk_means(states)
    return EncodedText(
        vector=text_vector(states, pooling),
        chunk_vectors=l2_normalize(chunks),
        spans=list(states.spans),
        token_counts=list(states.token_counts),
    )
