"""StaticTokenEncoder: per-token static vectors with char offsets, for MaxSim and pooled search.

Implements the store's static-encoder protocol (``dim``, ``fingerprint``, ``encode_document_tokens``,
``encode_query_tokens``). numpy only: a trained mixer runs as :class:`~lmk_rag.static.mixer.MixerWeights`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain
from typing import TYPE_CHECKING, overload

import numpy as np
import scipy.sparse

from lmk_rag.checks import check_text, check_texts
from lmk_rag.errors import VectorSizeError
from lmk_rag.hashing import short_hash
from lmk_rag.static.mixer import MixerWeights, mixer_folder
from lmk_rag.static.model import StaticVectors, load_static_vectors
from lmk_rag.vector_math import l2_normalize

if TYPE_CHECKING:  # pragma: no cover
    from lmk_rag.static.mixer_torch import ConvMixer


@dataclass(frozen=True)
class StaticTokens:
    """One text's static tokens.

    :param ids: token ids, shape (n,).
    :param offsets: each token's char span ``(start, end)`` in the text, shape (n, 2).
    :param vectors: L2-normalised float32 token vectors (mixed when the encoder has a mixer), shape (n, dim).
    """

    ids: np.ndarray
    offsets: np.ndarray
    vectors: np.ndarray


def tokens_in_chunks(offsets: np.ndarray, spans: Sequence[tuple[int, int]]) -> np.ndarray:
    """Assign tokens to chunks by char offsets: a token belongs to the chunk holding its first char.

    Works across tokenizers: ``spans`` may come from the landmark encoder (another tokenizer).

    :param offsets: token char spans, shape (n, 2).
    :param spans: sorted, non-overlapping chunk char spans ``(start, end)``.
    :return: the chunk index of each token, shape (n,); -1 for a token outside every span.
    """
    if len(spans) == 0 or len(offsets) == 0:
        return np.full(len(offsets), -1, dtype=np.int64)
    bounds = np.asarray(spans, dtype=np.int64)
    starts = offsets[:, 0]
    chunk = np.searchsorted(bounds[:, 0], starts, side="right") - 1
    inside = (chunk >= 0) & (starts < bounds[np.clip(chunk, 0, None), 1])
    return np.where(inside, chunk, -1)


class StaticTokenEncoder:
    """Static (model2vec) token vectors for late interaction, optionally passed through a ConvMixer.

    :param model: a model2vec folder or hub id; None uses the shipped model (all-MiniLM-L6-v2 distilled by
        model2vec at 256 dims, see docs/static.md).
    :param mixer: a mixer folder (saved by :meth:`ConvMixer.save`), ``"default"`` (the user's trained mixer, else
        the shipped one), ``"shipped"``, :class:`MixerWeights`, a torch :class:`ConvMixer` (its weights are copied)
        or None for raw static vectors.
    :raises ModelNotFoundError: if the model or mixer cannot be found locally.
    :raises VectorSizeError: if the mixer's dimension differs from the model's.
    """

    def __init__(
        self,
        model: str | os.PathLike[str] | StaticVectors | None = None,
        mixer: MixerWeights | ConvMixer | str | os.PathLike[str] | None = None,
    ) -> None:
        self.vectors = model if isinstance(model, StaticVectors) else load_static_vectors(model)
        if isinstance(mixer, (str, os.PathLike)):
            mixer = MixerWeights.load(mixer_folder(mixer))
        elif mixer is not None and not isinstance(mixer, MixerWeights):
            mixer = mixer.to_numpy()
        if mixer is not None and mixer.dim != self.vectors.dim:
            raise VectorSizeError(f"mixer dim {mixer.dim} != static model dim {self.vectors.dim}")
        self.mixer: MixerWeights | None = mixer
        self._gate_table: np.ndarray | None = None  # the mixer's gate per token id, built on first use
        self._fingerprint: str | None = None

    @property
    def dim(self) -> int:
        """The token vector dimension."""
        return self.vectors.dim

    @property
    def fingerprint(self) -> str:
        """A hash of the static model (vectors and tokenizer) and the mixer, for stores and caches."""
        if self._fingerprint is None:
            extras = [b"-" if extra is None else np.ascontiguousarray(extra).tobytes()
                      for extra in (self.vectors.weights, self.vectors.mapping)]
            mixer = self.mixer.fingerprint() if self.mixer is not None else "no-mixer"
            self._fingerprint = short_hash([self.vectors.embedding.tobytes(), self.vectors.tokenizer.to_str().encode(),
                                            *extras, mixer.encode()])
        return self._fingerprint

    @property
    def settings(self) -> dict[str, str | int | None]:
        """JSON-able description (model source, dim, mixer config) for stores and caches."""
        mixer = None if self.mixer is None else str(self.mixer.config)
        return {"model": self.vectors.source, "dim": self.dim, "mixer": mixer, "fingerprint": self.fingerprint}

    def tokenize(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        """Tokenize without special tokens, dropping unknown tokens as model2vec does.

        :param text: the text.
        :return: ids (n,) and char offsets (n, 2).
        :raises InvalidInputError: if ``text`` is not a str (:func:`~lmk_rag.checks.check_text`).
        """
        check_text(text, blank=True)
        encoding = self.vectors.tokenizer.encode(text, add_special_tokens=False)
        ids = np.asarray(encoding.ids, dtype=np.int64)
        offsets = np.asarray(encoding.offsets, dtype=np.int64).reshape(-1, 2)
        if self.vectors.unk_id is not None:
            keep = ids != self.vectors.unk_id
            ids, offsets = ids[keep], offsets[keep]
        return ids, offsets

    def tokens(self, text: str) -> StaticTokens:
        """Token ids, offsets and normalised (mixed) vectors of one text.

        :param text: the text.
        :return: the text's tokens.
        """
        ids, offsets = self.tokenize(text)
        return StaticTokens(ids, offsets, self._token_vectors(ids))

    def _token_vectors(self, ids: np.ndarray) -> np.ndarray:
        vectors = self.vectors.unit_table[ids]
        if self.mixer is None or len(ids) == 0:
            return vectors
        if self._gate_table is None:
            self._gate_table = self.mixer.gates(self.vectors.unit_table)
        return self.mixer.mix(vectors, gates=self._gate_table[ids])

    def encode_query_tokens(self, text: str) -> np.ndarray:
        """Every query token's vector, in order (never deduplicated: repeated query words count twice).

        :param text: the query.
        :return: float32 L2-normalised vectors, shape (q, dim).
        :raises EmptyTextError: if the text is empty or whitespace.
        """
        check_text(text)
        return self.tokens(text).vectors

    def encode_document_tokens(self, text: str) -> np.ndarray:
        """The document's distinct token vectors: MaxSim only needs each distinct vector once.

        :param text: the document (or node) text.
        :return: float32 L2-normalised vectors, shape (m, dim), in first-occurrence order.
        :raises EmptyTextError: if the text is empty or whitespace.
        """
        check_text(text)
        return self.distinct_token_vectors(self.tokenize(text)[0])

    def distinct_token_vectors(self, ids: np.ndarray) -> np.ndarray:
        """The distinct vectors of a token id sequence, mixed among themselves as one text's tokens.

        Without a mixer a vector depends only on the token id, so tokens are deduplicated by id; with a
        mixer vectors depend on context and only identical rows are dropped.

        :param ids: the token ids (from :meth:`tokenize`), shape (n,).
        :return: float32 L2-normalised vectors, shape (m, dim), in first-occurrence order.
        """
        vectors = self._token_vectors(ids)
        return vectors[_first_distinct(ids if self.mixer is None else vectors)]

    def document_token_spans(self, text: str) -> np.ndarray:
        """The char spans of the tokens whose vectors :meth:`encode_document_tokens` gives, in its rows' order: each
        distinct token's first occurrence (without a mixer), or each distinct context's (with one: a mixed vector is
        a function of the ids in the mixer's window around its token, so equal windows give equal rows), found from
        the ids alone, without mixing again.

        :param text: the text.
        :return: int64, shape (m, 2).
        """
        ids, offsets = self.tokenize(text)
        if self.mixer is None or len(ids) == 0:
            return offsets[_first_distinct(ids)]
        half = int(self.mixer.config["kernel_size"]) // 2
        padded = np.pad(ids, half, constant_values=-1)  # the mixer pads with zero vectors: no id
        windows = np.lib.stride_tricks.sliding_window_view(padded, 2 * half + 1)
        return offsets[_first_distinct(np.ascontiguousarray(windows))]

    @overload
    def encode(self, texts: str) -> np.ndarray: ...

    @overload
    def encode(self, texts: Sequence[str]) -> np.ndarray: ...

    def encode(self, texts: str | Sequence[str]) -> np.ndarray:
        """Pooled static embeddings: the mean of a text's token vectors, L2-normalised.

        Without a mixer this is model2vec's embedding (mean of the SIF-weighted static vectors).

        :param texts: one text or a list of texts.
        :return: float32 (dim,) for one text, (n, dim) for a list; a text without known tokens gives zeros.
        """
        single = isinstance(texts, str)
        batch = check_texts(texts, blank=True)
        id_lists = [e.ids for e in self.vectors.tokenizer.encode_batch_fast(batch, add_special_tokens=False)]
        lengths = np.fromiter(map(len, id_lists), dtype=np.int64, count=len(id_lists))
        flat = np.fromiter(chain.from_iterable(id_lists), dtype=np.int64, count=int(lengths.sum()))
        if self.vectors.unk_id is not None:
            known = flat != self.vectors.unk_id
            lengths = np.bincount(np.repeat(np.arange(len(lengths)), lengths)[known], minlength=len(lengths))
            flat = flat[known]
        if self.mixer is None:
            table, columns = self.vectors.weighted_table, flat
        else:
            rows = np.split(flat, np.cumsum(lengths)[:-1])  # one row of ids per text (one empty row for no texts)
            table, columns = np.concatenate([self._token_vectors(row) for row in rows]), np.arange(len(flat))
        out = l2_normalize(sum_rows(table, columns, lengths))
        return out[0] if single else out


def sum_rows(table: np.ndarray, columns: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Sum ``table`` rows per run: run ``i`` sums rows ``columns[offset_i : offset_i + lengths[i]]``.

    One sparse (runs x rows) matrix product: much faster than ``np.add.reduceat`` on many short runs.
    The mean's division is left out: callers L2-normalise the result.

    :param table: the rows, shape (n_rows, dim).
    :param columns: the row index of every item, runs one after the other, shape (sum(lengths),).
    :param lengths: the items per run, shape (n_runs,).
    :return: float32 sums, shape (n_runs, dim).
    """
    indptr = np.concatenate([[0], np.cumsum(lengths)])
    ones = np.ones(len(columns), dtype=np.float32)
    counts = scipy.sparse.csr_matrix((ones, columns, indptr), shape=(len(lengths), len(table)))
    return np.asarray(counts @ table, dtype=np.float32)


def _first_distinct(keys: np.ndarray) -> np.ndarray:
    """The sorted positions of the first occurrence of each distinct key (token ids, or vector rows)."""
    if keys.ndim == 2:
        keys = np.ascontiguousarray(keys).view(np.dtype((np.void, keys.dtype.itemsize * keys.shape[1]))).ravel()
    _, first = np.unique(keys, return_index=True)
    return np.sort(first)
