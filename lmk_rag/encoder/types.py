"""Value types produced by the landmark encoder."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Literal

import numpy as np

Granularity = int | Literal["sentence", "variable"] | None


class Context(str, Enum):
    """What a chunk's token states see: ``document`` encodes a text in windows of whole chunks (chunks see their
    neighbours); ``chunk`` encodes every chunk alone with its own landmark."""

    DOCUMENT = "document"
    CHUNK = "chunk"


class Pooling(str, Enum):
    """The text vector: ``lmk`` (mean of landmark states), ``mean`` (mean of all token states), ``cls`` (first
    CLS state), ``multicls`` (mean of a CLS before every chunk), sentence-transformers' ``max`` (elementwise maximum
    of the token states), ``weightedmean`` (token states weighted by their position in the window) and ``lasttoken``
    (the last token's state: the last landmark), ``auto`` (``lmk`` for an LMK-trained model, else the pooling of the
    model's sentence-transformers Pooling module, else ``mean``)."""

    LMK = "lmk"
    MEAN = "mean"
    CLS = "cls"
    MULTICLS = "multicls"
    MAX = "max"
    WEIGHTEDMEAN = "weightedmean"
    LASTTOKEN = "lasttoken"
    AUTO = "auto"


class ChunkVector(str, Enum):
    """A chunk's vector: ``landmark`` (its landmark token's state), ``mean`` (mean of its token states), ``auto``
    (for an LMK-trained model the choice its marker file records, else ``mean``)."""

    LANDMARK = "landmark"
    MEAN = "mean"
    AUTO = "auto"


class EncoderBackend(str, Enum):
    """What runs the transformer: ``torch`` (any device and float dtype) or ``onnx`` (ONNX Runtime on the CPU,
    float32 or dynamically quantized int8; needs the ``onnx`` extra)."""

    TORCH = "torch"
    ONNX = "onnx"


@dataclass(frozen=True)
class EncodedText:
    """One encoded text at its three granularities.

    :param vector: the pooled text vector, shape (dim,), L2-normalised float32.
    :param chunk_vectors: one vector per landmark chunk, shape (n_chunks, dim), L2-normalised float32.
        Depending on ``chunk_vector`` these are the landmark tokens' states or the chunk means.
    :param spans: the char span ``(start, end)`` of each chunk in the input text. For any
        granularity but ``None`` the spans tile the text: the first starts at 0, each ends where
        the next starts and the last ends at ``len(text)``.
    :param token_counts: the number of content tokens in each chunk (landmarks not counted).
    """

    vector: np.ndarray
    chunk_vectors: np.ndarray
    spans: list[tuple[int, int]]
    token_counts: list[int] = field(default_factory=list)

    @property
    def n_chunks(self) -> int:
        """The number of landmark chunks."""
        return len(self.spans)


@dataclass(frozen=True)
class ChunkStates:
    """Everything one encoding pass yields for a text, before choosing the pooling.

    Kept so that one pass can serve several poolings (the eval harness caches these).
    All arrays are float32 and *not* normalised.

    :param landmark_states: the final state of each chunk's landmark token, shape (n_chunks, dim).
    :param chunk_sums: the sum of the final states of each chunk's tokens, its landmark and (for
        the first chunk of a window) the window's CLS, shape (n_chunks, dim).
    :param chunk_sizes: how many token states each row of ``chunk_sums`` adds up, shape (n_chunks,).
    :param cls_states: the CLS state of each encoded window, shape (n_windows, dim).
    :param spans: char span of each chunk, as in :class:`EncodedText`.
    :param token_counts: content tokens per chunk.
    :param prompt_sum: what the text's mean adds to the chunks' sums, shape (dim,): the final states of the prompt's
        tokens over all windows (they belong to no chunk), or, for a model whose Pooling module leaves the prompt
        out (``include_prompt: false``), minus the sequence-start states that sentence-transformers leaves out with
        it; None without a prompt.
    :param prompt_size: how many token states ``prompt_sum`` adds (negative when it takes states out).
    :param token_max: the elementwise maximum of all owned and prompt token states, shape (dim,) (``max`` pooling).
    :param weighted_sum: the sum of the owned and prompt token states weighted by their position in their window
        (1 for the first), shape (dim,) (``weightedmean`` pooling).
    :param weight_total: the sum of those weights.
    """

    landmark_states: np.ndarray
    chunk_sums: np.ndarray
    chunk_sizes: np.ndarray
    cls_states: np.ndarray
    spans: list[tuple[int, int]]
    token_counts: list[int]
    prompt_sum: np.ndarray | None = None
    prompt_size: float = 0.0
    token_max: np.ndarray | None = None
    weighted_sum: np.ndarray | None = None
    weight_total: float = 0.0
