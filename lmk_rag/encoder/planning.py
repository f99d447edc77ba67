"""Landmark planning: where chunks start and end, from token offsets alone (pure, no model).

A plan cuts a text's tokens into chunks; the encoder later inserts one landmark token per chunk.
The char spans of the chunks tile the text: the gap between two tokens belongs to the chunk
before it, so ``text[s:e]`` over all spans rebuilds the input exactly.
"""

from __future__ import annotations

import hashlib
import itertools
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from lmk_rag.encoder.types import Granularity
from lmk_rag.errors import InvalidInputError

VARIABLE_GRANULARITIES: tuple[int, ...] = (32, 64, 128, 256)
"""The chunk sizes that ``granularity="variable"`` samples from (as in the LMK paper)."""

_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+|\n[ \t]*\n\s*")


@dataclass(frozen=True)
class LandmarkPlan:
    """The chunks of one text.

    :param chunks: token index ranges ``[start, end)`` into the text's tokens, in order.
    :param spans: the char span ``(start, end)`` of each chunk in the text.
    :param truncated: whether tokens were dropped (only with ``granularity=None``).
    """

    chunks: list[tuple[int, int]]
    spans: list[tuple[int, int]]
    truncated: bool = False


def variable_granularity(text: str, rng: random.Random | None = None) -> int:
    """Pick a chunk size for ``granularity="variable"``.

    Training samples it with ``rng``; inference derives it from a hash of the text, so that the
    same text always gets the same landmarks.

    :param text: the text to chunk.
    :param rng: a random generator (training), or None (deterministic).
    :return: one of :data:`VARIABLE_GRANULARITIES`.
    """
    if rng is not None:
        return rng.choice(VARIABLE_GRANULARITIES)
    digest = hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest()
    return VARIABLE_GRANULARITIES[int.from_bytes(digest, "little") % len(VARIABLE_GRANULARITIES)]


def check_granularity(granularity: Any) -> None:
    """Reject a granularity :func:`plan_landmarks` cannot use, naming the choices.

    :raises InvalidInputError: for anything but an int >= 1, ``"sentence"``, ``"variable"`` or None.
    """
    if granularity is None or granularity in ("sentence", "variable"):
        return
    if not isinstance(granularity, int) or isinstance(granularity, bool):
        raise InvalidInputError(f"granularity must be an int, 'sentence', 'variable' or None, got {granularity!r}")
    if granularity < 1:
        raise InvalidInputError(f"granularity must be >= 1 token, got {granularity}")


def plan_landmarks(
    text: str,
    offsets: Sequence[tuple[int, int]],
    granularity: Granularity,
    max_chunk_tokens: int,
    *,
    sentence_max_tokens: int = 128,
    rng: random.Random | None = None,
) -> LandmarkPlan:
    """Cut a tokenised text into landmark chunks.

    :param text: the text the offsets refer to.
    :param offsets: per token, its char ``(start, end)`` in ``text`` (no special tokens).
    :param granularity: ``k`` (chunks of k tokens), ``"sentence"`` (one chunk per sentence, longer
        sentences split at ``sentence_max_tokens``), ``"variable"`` (k from
        :data:`VARIABLE_GRANULARITIES`, see :func:`variable_granularity`) or ``None`` (one chunk:
        the plain encoder, truncated at ``max_chunk_tokens`` like sentence-transformers).
    :param max_chunk_tokens: the most tokens a chunk may hold (the model window less its special
        tokens); larger k are capped to it.
    :param sentence_max_tokens: the longest sentence chunk, for ``"sentence"``.
    :param rng: random generator for ``"variable"`` during training.
    :return: the plan; every chunk, the last partial one included, is listed.
    :raises InvalidInputError: for an unknown granularity, k < 1, or no tokens.
    """
    n_tokens = len(offsets)
    if n_tokens == 0:
        raise InvalidInputError("cannot plan landmarks for a text without tokens")
    if max_chunk_tokens < 1:
        raise InvalidInputError(f"max_chunk_tokens must be >= 1, got {max_chunk_tokens}")
    if granularity is None:
        end = min(n_tokens, max_chunk_tokens)
        truncated = end < n_tokens
        span_end = offsets[end - 1][1] if truncated else len(text)
        return LandmarkPlan(chunks=[(0, end)], spans=[(0, span_end)], truncated=truncated)
    if granularity == "sentence":
        starts = _sentence_starts(text, offsets, min(sentence_max_tokens, max_chunk_tokens))
    else:
        if granularity == "variable":
            k = variable_granularity(text, rng)
        elif isinstance(granularity, int) and not isinstance(granularity, bool):
            k = granularity
        else:
            raise InvalidInputError(
                f"granularity must be an int, 'sentence', 'variable' or None, got {granularity!r}"
            )
        if k < 1:
            raise InvalidInputError(f"granularity must be >= 1 token, got {k}")
        starts = list(range(0, n_tokens, min(k, max_chunk_tokens)))
    chunks = [(start, end) for start, end in zip(starts, [*starts[1:], n_tokens])]
    return LandmarkPlan(chunks=chunks, spans=_tiling_spans(text, offsets, starts))


def _sentence_starts(text: str, offsets: Sequence[tuple[int, int]], max_tokens: int) -> list[int]:
    """Token indices that open a chunk: sentence starts, plus splits of sentences over ``max_tokens``."""
    boundaries = [match.end() for match in _SENTENCE_END.finditer(text)]
    starts = [0]
    boundary_index = 0
    for token_index in range(1, len(offsets)):
        token_start = offsets[token_index][0]
        new_sentence = False
        while boundary_index < len(boundaries) and boundaries[boundary_index] <= token_start:
            boundary_index += 1
            new_sentence = True
        if new_sentence or token_index - starts[-1] >= max_tokens:
            starts.append(token_index)
    return starts


def _tiling_spans(text: str, offsets: Sequence[tuple[int, int]], starts: list[int]) -> list[tuple[int, int]]:
    """Char spans that tile ``text``: each chunk runs from its first token to the next chunk's first token."""
    cuts = [0]
    for token_index in starts[1:]:
        cuts.append(max(cuts[-1], offsets[token_index][0]))
    cuts.append(len(text))
    return list(itertools.pairwise(cuts))
