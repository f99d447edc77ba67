"""StaticDocumentEncoder: documents and queries encoded like the landmark encoder does, from static vectors alone.

A static store (``LandmarkStore(mode="static")``) and ``LandmarkEmbedding(static=True)`` encode with it: a text is
tokenised once, its tokens are cut into chunks of ``granularity`` tokens by the landmark encoder's own planner
(:func:`~lmk_rag.encoder.planning.plan_landmarks`, so both stores cut the same nodes), each chunk's vector is its
pooled static vector (model2vec's embedding: the SIF-weighted mean of its raw token vectors) and the text's vector
pools all its tokens. The result is an :class:`~lmk_rag.encoder.types.EncodedText`, which the store's node cutting
and the LlamaIndex node parser take as they take the landmark encoder's. Token multivectors (with the mixer) come
from :attr:`tokens`. numpy only: no transformer, no torch.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, overload

import numpy as np

from lmk_rag.encoder.planning import plan_landmarks
from lmk_rag.encoder.types import EncodedText, Granularity
from lmk_rag.errors import InvalidInputError, ModelNotFoundError
from lmk_rag.static.encoder import StaticTokenEncoder, check_text, sum_rows
from lmk_rag.static.mixer import DEFAULT_MIXER, SHIPPED_MIXER, SHIPPED_MIXER_DIR
from lmk_rag.static.model import SHIPPED_MODEL_DIR
from lmk_rag.vectors import l2_normalize

DEFAULT_STATIC_GRANULARITY = 64
"""Static tokens per chunk: the landmark encoder's default granularity (same tokenizer), so that a static store
cuts the nodes a transformer store cuts."""
UNSAVED_MIXER = "unsaved"
"""What :attr:`StaticDocumentEncoder.settings` records for a mixer that was never saved to a folder."""


class StaticDocumentEncoder:
    """Encode documents and queries into :class:`EncodedText` with a static model (no transformer).

    :param static_model: a model2vec folder or hub id; None: the shipped model.
    :param mixer: the ConvMixer of the token multivectors: ``"default"`` (the user's trained mixer, else the
        shipped one), ``"shipped"``, a mixer folder, or None (raw static token vectors).
    :param granularity: tokens per chunk (node boundaries fall between chunks), ``"sentence"`` or ``"variable"``, as
        for :class:`~lmk_rag.LandmarkEncoder`.
    :param tokens: an already built :class:`StaticTokenEncoder` to use instead of ``static_model`` and ``mixer``.
    :raises ModelNotFoundError: when the model or mixer cannot be found locally.
    """

    def __init__(
        self,
        static_model: str | os.PathLike[str] | None = None,
        mixer: str | os.PathLike[str] | None = DEFAULT_MIXER,
        granularity: Granularity = DEFAULT_STATIC_GRANULARITY,
        *,
        tokens: StaticTokenEncoder | None = None,
    ) -> None:
        """Load the static model and mixer (see the class docstring)."""
        if mixer == UNSAVED_MIXER:
            raise ModelNotFoundError(
                "the store was made with a mixer that was never saved to a folder: open it with "
                "encoder=StaticDocumentEncoder(tokens=StaticTokenEncoder(..., mixer=that_mixer))"
            )
        self.tokens = tokens if tokens is not None else StaticTokenEncoder(static_model, mixer=mixer)
        self.granularity = granularity
        plan_landmarks("a", [(0, 1)], granularity, sys.maxsize)  # checks the granularity now, not at the first text

    @property
    def dim(self) -> int:
        """The vector dimension (of node, query and token vectors)."""
        return self.tokens.dim

    @property
    def settings(self) -> dict[str, Any]:
        """The settings that rebuild this encoder, JSON-able: ``StaticDocumentEncoder(**settings)``.

        The shipped model is recorded as None and the shipped mixer as ``"shipped"``, so that a store opens on any
        install; other models and mixers by their folder (or hub id).
        """
        source = self.tokens.vectors.source
        model = None if _same_folder(source, SHIPPED_MODEL_DIR) else source
        mixer = self.tokens.mixer
        if mixer is None:
            mixer_name = None
        elif mixer.source is None:
            mixer_name = UNSAVED_MIXER
        else:
            mixer_name = SHIPPED_MIXER if _same_folder(mixer.source, SHIPPED_MIXER_DIR) else mixer.source
        return {"static_model": model, "mixer": mixer_name, "granularity": self.granularity}

    @property
    def fingerprint(self) -> str:
        """A hash of the static model, the mixer and the granularity (for stores and node parsers)."""
        text = json.dumps({"tokens": self.tokens.fingerprint, "granularity": self.granularity})
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @overload
    def encode_documents(self, texts: str) -> EncodedText: ...

    @overload
    def encode_documents(self, texts: Sequence[str]) -> list[EncodedText]: ...

    def encode_documents(self, texts: str | Sequence[str]) -> EncodedText | list[EncodedText]:
        """Encode documents: text vector, one pooled static vector per chunk, chunk spans and token counts.

        :param texts: one text or a list of texts.
        :return: one :class:`EncodedText` per text (a single one for a str).
        :raises EmptyTextError: for an empty or whitespace-only text.
        :raises InvalidInputError: for a text with no token the static model knows.
        """
        if isinstance(texts, str):
            return self._encode(texts, self.granularity)
        return [self._encode(text, self.granularity) for text in _texts(texts)]

    @overload
    def encode_queries(self, texts: str) -> EncodedText: ...

    @overload
    def encode_queries(self, texts: Sequence[str]) -> list[EncodedText]: ...

    def encode_queries(self, texts: str | Sequence[str]) -> EncodedText | list[EncodedText]:
        """Encode queries: the pooled static vector of the whole query (one chunk).

        :param texts: one query or a list of queries.
        :return: one :class:`EncodedText` per query (a single one for a str).
        :raises EmptyTextError: for an empty or whitespace-only query.
        """
        if isinstance(texts, str):
            return self._encode(texts, None)
        return [self._encode(text, None) for text in _texts(texts)]

    def encode_query_tokens(self, text: str) -> np.ndarray:
        """The query's static token vectors (see :meth:`StaticTokenEncoder.encode_query_tokens`), shape (q, dim)."""
        return self.tokens.encode_query_tokens(text)

    def encode_document_tokens(self, text: str) -> np.ndarray:
        """A text's distinct static token vectors (see :meth:`StaticTokenEncoder.encode_document_tokens`), (m, dim)."""
        return self.tokens.encode_document_tokens(text)

    def _encode(self, text: str, granularity: Granularity) -> EncodedText:
        check_text(text)
        ids, offsets = self.tokens.tokenize(text)
        if len(ids) == 0:
            raise InvalidInputError(f"no token of this text is in the static model's vocabulary: {text[:40]!r}")
        plan = plan_landmarks(text, offsets.tolist(), granularity, sys.maxsize)
        lengths = np.array([end - start for start, end in plan.chunks], dtype=np.int64)
        sums = sum_rows(self.tokens.vectors.weighted_table, ids, lengths)
        return EncodedText(
            vector=l2_normalize(sums.sum(axis=0)),
            chunk_vectors=l2_normalize(sums),
            spans=plan.spans,
            token_counts=lengths.tolist(),
        )

    def __repr__(self) -> str:
        """The settings."""
        return f"StaticDocumentEncoder({', '.join(f'{k}={v!r}' for k, v in self.settings.items())})"


def _texts(texts: Sequence[str]) -> list[str]:
    if not isinstance(texts, Sequence) or not all(isinstance(text, str) for text in texts):
        raise InvalidInputError(f"expected a str or a list of str, got {type(texts).__name__}")
    return list(texts)


def _same_folder(source: str, folder: Path) -> bool:
    """Whether a model or mixer source names ``folder``."""
    try:
        return Path(source).resolve() == folder.resolve()
    except OSError:
        return False
