"""Encode texts to :class:`lmk_rag.encoder.ChunkStates` once per model and setting, through the disk cache.

One document-context pass serves the ``cls``, ``mean``, ``lmk``, ``maxsim-landmark`` and
``maxsim-chunkmean`` pipelines, with or without a projection: the cache key leaves out the pooling, chunk-vector
and projection choices, which only matter after the pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from lmk_rag.eval.cache import cached_arrays

if TYPE_CHECKING:  # pragma: no cover
    from lmk_rag.encoder import ChunkStates, LandmarkEncoder

#: Encoder settings that change nothing in the states (they are applied by pooling afterwards).
_POOLING_ONLY = ("pooling", "chunk_vector", "model_name", "projection")


@dataclass(frozen=True)
class CachedStates:
    """Chunk states of a list of texts.

    :param states: one :class:`ChunkStates` per text.
    :param encode_s: the cold encoding time in seconds.
    :param cached: whether they were loaded from the cache.
    """

    states: list[ChunkStates]
    encode_s: float
    cached: bool


def states_key(encoder: LandmarkEncoder) -> dict[str, Any]:
    """The cache key of an encoder's passes: model digest, the settings that shape the states, the landmark placement
    (under the key ``layout``, its name when the cache was first written).

    :param encoder: the encoder.
    :return: a JSON-able dict.
    """
    settings = {name: value for name, value in encoder.settings.items() if name not in _POOLING_ONLY}
    return {"kind": "chunk_states", "model": encoder.model_digest, "layout": encoder.placement, **settings}


def encode_states_cached(encoder: LandmarkEncoder, texts: Sequence[str], cache_dir: Path) -> CachedStates:
    """Encode texts with ``encoder.encode_states``, or load the states of an earlier identical pass.

    :param encoder: the encoder.
    :param texts: the texts.
    :param cache_dir: the cache folder.
    :return: the states, the cold encoding time and whether they came from the cache.
    """
    result = cached_arrays(cache_dir, states_key(encoder), texts, lambda: pack_states(encoder.encode_states(texts)))
    return CachedStates(unpack_states(result.arrays), result.encode_s, result.cached)


def pack_states(states: Sequence[ChunkStates]) -> dict[str, np.ndarray]:
    """Concatenate a list of states into flat arrays (with per-text counts) for ``np.savez``.

    :param states: the states (as :meth:`LandmarkEncoder.encode_states` returns them).
    :return: named arrays.
    """
    dim = states[0].landmark_states.shape[1]
    arrays = {
        "landmark_states": np.concatenate([s.landmark_states for s in states]).astype(np.float32),
        "chunk_sums": np.concatenate([s.chunk_sums for s in states]).astype(np.float32),
        "chunk_sizes": np.concatenate([s.chunk_sizes for s in states]).astype(np.float32),
        "cls_states": np.concatenate([s.cls_states for s in states]).astype(np.float32),
        "spans": np.array([span for s in states for span in s.spans], dtype=np.int64).reshape(-1, 2),
        "token_counts": np.array([count for s in states for count in s.token_counts], dtype=np.int64),
        "n_chunks": np.array([len(s.spans) for s in states], dtype=np.int64),
        "n_windows": np.array([len(s.cls_states) for s in states], dtype=np.int64),
    }
    if any(s.token_max is None or s.weighted_sum is None for s in states):  # states not made by the encoder
        return arrays
    return {
        **arrays,
        "prompt_sums": np.stack([s.prompt_sum if s.prompt_sum is not None else np.zeros(dim, np.float32)
                                 for s in states]).astype(np.float32),
        "prompt_sizes": np.array([s.prompt_size for s in states], dtype=np.float32),
        "token_max": np.stack([s.token_max for s in states]).astype(np.float32),
        "weighted_sums": np.stack([s.weighted_sum for s in states]).astype(np.float32),
        "weight_totals": np.array([s.weight_total for s in states], dtype=np.float64),
    }


def unpack_states(arrays: dict[str, np.ndarray]) -> list[ChunkStates]:
    """Invert :func:`pack_states`. A cache written before the prompt, max and weighted-mean arrays existed gives
    states without them (no prompt; ``max`` and ``weightedmean`` pooling then ask to encode again).

    :param arrays: the named arrays.
    :return: one :class:`ChunkStates` per text.
    """
    from lmk_rag.encoder import ChunkStates

    chunk_ends = np.cumsum(arrays["n_chunks"])
    window_ends = np.cumsum(arrays["n_windows"])
    states = []
    for index, (chunk_end, window_end) in enumerate(zip(chunk_ends, window_ends)):
        chunk = slice(int(chunk_end - arrays["n_chunks"][index]), int(chunk_end))
        window = slice(int(window_end - arrays["n_windows"][index]), int(window_end))
        states.append(
            ChunkStates(
                landmark_states=arrays["landmark_states"][chunk],
                chunk_sums=arrays["chunk_sums"][chunk],
                chunk_sizes=arrays["chunk_sizes"][chunk],
                cls_states=arrays["cls_states"][window],
                spans=[(int(start), int(end)) for start, end in arrays["spans"][chunk]],
                token_counts=[int(count) for count in arrays["token_counts"][chunk]],
                **_text_arrays(arrays, index),
            )
        )
    return states


def _text_arrays(arrays: dict[str, np.ndarray], index: int) -> dict[str, Any]:
    """The per-text prompt, max and weighted-mean fields of text ``index`` (none from an older cache)."""
    if "token_max" not in arrays:
        return {}
    prompted = float(arrays["prompt_sizes"][index]) != 0
    return {
        "prompt_sum": arrays["prompt_sums"][index] if prompted else None,
        "prompt_size": float(arrays["prompt_sizes"][index]),
        "token_max": arrays["token_max"][index],
        "weighted_sum": arrays["weighted_sums"][index],
        "weight_total": float(arrays["weight_totals"][index]),
    }
