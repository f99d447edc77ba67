"""StaticDocumentEncoder: documents and queries encoded like the landmark encoder does, from static vectors alone.

A static store (``LandmarkStore(mode="static")``) and ``LandmarkEmbedding(static=True)`` encode with it: a text is
tokenised once, its tokens are cut into chunks of ``granularity`` tokens by the landmark encoder's own planner
(:func:`~lmk_rag.encoder.planning.plan_landmarks`, so both stores cut the same nodes), each chunk's vector is its
pooled static vector (model2vec's embedding: the SIF-weighted mean of its raw token vectors) and the text's vector
pools all its tokens. The result, a :class:`StaticEncodedText`, is an :class:`~lmk_rag.encoder.types.EncodedText`
(the store's node cutting and the LlamaIndex node parser take it as they take the landmark encoder's) that keeps
the text's static token ids, so that a static store cuts its nodes' token multivectors from the same tokenisation
(:meth:`StaticDocumentEncoder.encode_node_tokens`). numpy only: no transformer, no torch.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, overload

import numpy as np

from lmk_rag.checks import check_text, check_texts
from lmk_rag.encoder.planning import plan_landmarks
from lmk_rag.encoder.types import EncodedText, Granularity
from lmk_rag.errors import InvalidInputError, ModelNotFoundError
from lmk_rag.hashing import short_hash
from lmk_rag.static.mixer import DEFAULT_MIXER, SHIPPED_MIXER, SHIPPED_MIXER_DIR
from lmk_rag.static.model import SHIPPED_MODEL_DIR
from lmk_rag.static.token_encoder import StaticTokenEncoder, sum_rows, tokens_in_chunks
from lmk_rag.vector_math import l2_normalize

DEFAULT_STATIC_GRANULARITY = 64
"""Static tokens per chunk: the landmark encoder's default granularity (same tokenizer), so that a static store
cuts the nodes a transformer store cuts."""
UNSAVED_MIXER = "unsaved"
"""What :attr:`StaticDocumentEncoder.settings` records for a mixer that was never saved to a folder."""


@dataclass(frozen=True, kw_only=True)
class StaticEncodedText(EncodedText):
    """An :class:`EncodedText` that keeps the static tokens it was pooled from.

    :param token_ids: the text's static token ids, shape (n,).
    :param token_offsets: each token's char span ``(start, end)`` in the text, shape (n, 2).
    """

    token_ids: np.ndarray
    token_offsets: np.ndarray


class StaticDocumentEncoder:
    """Encode documents and queries into :class:`EncodedText` with a static model (no transformer).

    :param static_model: a model2vec folder or hub id; None: the shipped model.
    :param mixer: the ConvMixer of the token multivectors: ``"default"`` (the user's trained mixer, else the
        shipped one), ``"shipped"``, a mixer folder, or None (raw static token vectors).
    :param granularity: tokens per chunk (node boundaries fall between chunks), ``"sentence"`` or ``"variable"``, as
        for :class:`~lmk_rag.LandmarkEncoder`.
    :param token_encoder: an already built :class:`StaticTokenEncoder` to use instead of ``static_model`` and ``mixer``.
    :raises ModelNotFoundError: when the model or mixer cannot be found locally.
    """

    def __init__(
        self,
        static_model: str | os.PathLike[str] | None = None,
        mixer: str | os.PathLike[str] | None = DEFAULT_MIXER,
        granularity: Granularity = DEFAULT_STATIC_GRANULARITY,
        *,
        token_encoder: StaticTokenEncoder | None = None,
    ) -> None:
        """Load the static model and mixer (see the class docstring)."""
        if mixer == UNSAVED_MIXER:
            raise ModelNotFoundError(
                "the store was made with a mixer that was never saved to a folder: open it with "
                "encoder=StaticDocumentEncoder(token_encoder=StaticTokenEncoder(..., mixer=that_mixer))"
            )
        self.token_encoder = (token_encoder if token_encoder is not None
                              else StaticTokenEncoder(static_model, mixer=mixer))
        self.granularity = granularity
        plan_landmarks("a", [(0, 1)], granularity, sys.maxsize)  # checks the granularity now, not at the first text

    @property
    def dim(self) -> int:
        """The vector dimension (of node, query and token vectors)."""
        return self.token_encoder.dim

    @property
    def settings(self) -> dict[str, Any]:
        """The settings that rebuild this encoder, JSON-able: ``StaticDocumentEncoder(**settings)``.

        The shipped model is recorded as None and the shipped mixer as ``"shipped"``, so that a store opens on any
        install; other models and mixers by their folder (or hub id).
        """
        source = self.token_encoder.vectors.source
        model = None if _same_folder(source, SHIPPED_MODEL_DIR) else source
        mixer = self.token_encoder.mixer
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
        text = json.dumps({"tokens": self.token_encoder.fingerprint, "granularity": self.granularity})
        return short_hash([text.encode()])

    @overload
    def encode_documents(self, texts: str, show_progress_bar: bool | None = None) -> StaticEncodedText: ...

    @overload
    def encode_documents(
        self, texts: Sequence[str], show_progress_bar: bool | None = None
    ) -> list[StaticEncodedText]: ...

    def encode_documents(
        self, texts: str | Sequence[str], show_progress_bar: bool | None = None
    ) -> StaticEncodedText | list[StaticEncodedText]:
        """Encode documents: text vector, one pooled static vector per chunk, chunk spans and token counts.

        :param texts: one text or a list of texts.
        :param show_progress_bar: show a bar in documents (the static encoder runs no batches worth a finer one).
        :return: one :class:`StaticEncodedText` per text (a single one for a str).
        :raises EmptyTextError: for an empty or whitespace-only text.
        :raises InvalidInputError: for a text with no token the static model knows.
        """
        if isinstance(texts, str):
            return self._encode(check_text(texts), self.granularity)
        from tqdm.auto import tqdm

        return [self._encode(text, self.granularity)
                for text in tqdm(check_texts(texts), desc="Encoding", unit="doc", disable=not show_progress_bar,
                                 leave=None)]  # under another bar (an ingest's), it clears

    @overload
    def encode_queries(self, texts: str) -> StaticEncodedText: ...

    @overload
    def encode_queries(self, texts: Sequence[str]) -> list[StaticEncodedText]: ...

    def encode_queries(self, texts: str | Sequence[str]) -> StaticEncodedText | list[StaticEncodedText]:
        """Encode queries: the pooled static vector of the whole query (one chunk).

        :param texts: one query or a list of queries.
        :return: one :class:`StaticEncodedText` per query (a single one for a str).
        :raises EmptyTextError: for an empty or whitespace-only query.
        """
        if isinstance(texts, str):
            return self._encode(check_text(texts), None)
        return [self._encode(text, None) for text in check_texts(texts)]

    def empty_text_vector(self) -> np.ndarray:
        """The vector of a text without words (``""`` or whitespace), which has no tokens (model2vec gives it zeros,
        which no cosine can compare and no store accepts): the normalised mean of the static model's token vectors.
        :meth:`encode_documents` refuses such a text; a LlamaIndex embedding model must give it a vector.

        :return: float32, shape (dim,), L2-normalised.
        """
        return l2_normalize(self.token_encoder.vectors.unit_table.mean(axis=0))

    def encode_query_tokens(self, text: str) -> np.ndarray:
        """The query's static token vectors (see :meth:`StaticTokenEncoder.encode_query_tokens`), shape (q, dim)."""
        return self.token_encoder.encode_query_tokens(text)

    def encode_document_tokens(self, text: str) -> np.ndarray:
        """A text's distinct static token vectors (see :meth:`StaticTokenEncoder.encode_document_tokens`), (m, dim)."""
        return self.token_encoder.encode_document_tokens(text)

    def document_token_spans(self, text: str) -> np.ndarray:
        """The char spans of :meth:`encode_document_tokens`'s rows (see
        :meth:`StaticTokenEncoder.document_token_spans`), shape (m, 2)."""
        return self.token_encoder.document_token_spans(text)

    def encode_node_tokens(self, encoded: StaticEncodedText, spans: Sequence[tuple[int, int]]) -> list[np.ndarray]:
        """Each node's distinct static token vectors, cut from the tokens its document was encoded with.

        A node's tokens are those starting inside its span, mixed among themselves: what
        :meth:`encode_document_tokens` gives for the node's text, without tokenising it again. A node that starts
        inside a word keeps that word's piece as the document was tokenised (``##ing``, where the node's text
        alone reads ``ing``).

        :param encoded: the document's encoding (from :meth:`encode_documents`).
        :param spans: the nodes' char spans in the document, sorted and non-overlapping.
        :return: one float32 (m, dim) array per span.
        :raises InvalidInputError: for an encoding that does not carry static tokens.
        """
        if not isinstance(encoded, StaticEncodedText):
            raise InvalidInputError(
                f"encode_node_tokens takes an encoding from StaticDocumentEncoder.encode_documents, got "
                f"{type(encoded).__name__}"
            )
        node = tokens_in_chunks(encoded.token_offsets, spans)
        return [self.token_encoder.distinct_token_vectors(encoded.token_ids[node == index])
                for index in range(len(spans))]

    def _encode(self, text: str, granularity: Granularity) -> StaticEncodedText:
        """Encode one checked text (:func:`~lmk_rag.checks.check_text`)."""
        ids, offsets = self.token_encoder.tokenize(text)
        if len(ids) == 0:
            raise InvalidInputError(f"no token of this text is in the static model's vocabulary: {text[:40]!r}")
        plan = plan_landmarks(text, offsets.tolist(), granularity, sys.maxsize)
        lengths = np.array([end - start for start, end in plan.chunks], dtype=np.int64)
        sums = sum_rows(self.token_encoder.vectors.weighted_table, ids, lengths)
        return StaticEncodedText(
            vector=l2_normalize(sums.sum(axis=0)),
            chunk_vectors=l2_normalize(sums),
            spans=plan.spans,
            token_counts=lengths.tolist(),
            token_ids=ids,
            token_offsets=offsets,
        )

    def __repr__(self) -> str:
        """The settings."""
        return f"StaticDocumentEncoder({', '.join(f'{k}={v!r}' for k, v in self.settings.items())})"


def _same_folder(source: str, folder: Path) -> bool:
    """Whether a model or mixer source names ``folder``."""
    try:
        return Path(source).resolve() == folder.resolve()
    except OSError:
        return False
