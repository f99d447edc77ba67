"""BM25 sparse vectors of nodes and queries, the same for every backend.

Qdrant's own BM25 (the Rust model shipped in ``qdrant-edge-py``, whose configuration mirrors the server's
``Bm25Config``) makes term-frequency vectors on the client; every backend stores them as the ``bm25`` sparse
vector with Qdrant's IDF modifier, so IDF comes from the collection at search time. A store records its
tokenizer; see docs/decisions.md ("store: BM25 evidence in the final score") for the choice.
"""

from __future__ import annotations

from typing import Literal

from lmk_rag.errors import InvalidInputError
from lmk_rag.store.types import SparseVector

Bm25Tokenizer = Literal["word", "code"]
BM25_TOKENIZERS: tuple[str, ...] = ("word", "code")
BM25_TOKENIZER: Bm25Tokenizer = "code"
"""The tokens of new stores: Qdrant's code tokenizer keeps an identifier (``dry_run``, ``CamelCase``, dotted
names) and also its parts, with English stop words and stemming. Level with ``"word"`` (Qdrant's default, which
keeps ``dry_run`` whole) on the whole dev sets, so the identifiers of technical text decided (docs/decisions.md);
stores written before it was recorded use ``"word"``."""


class Bm25Encoder:
    """Qdrant's BM25 model: term-frequency vectors of documents (k=1.2, b=0.75, average length 256 tokens)
    and binary query vectors.

    :param tokenizer: ``"word"`` or ``"code"`` (English stop words and stemming in both).
    :raises InvalidInputError: for an unknown tokenizer.
    :raises ImportError: when ``qdrant-edge-py`` (which ships the model) is not installed.
    """

    def __init__(self, tokenizer: Bm25Tokenizer = BM25_TOKENIZER) -> None:
        """Build the model."""
        if tokenizer not in BM25_TOKENIZERS:
            raise InvalidInputError(f"bm25 tokenizer must be one of {BM25_TOKENIZERS}, got {tokenizer!r}")
        try:
            import qdrant_edge as qe
        except ImportError as error:
            raise ImportError(
                "BM25 needs Qdrant's BM25 model from qdrant-edge-py: pip install qdrant-edge-py"
            ) from error
        kind = qe.TokenizerType.Code if tokenizer == "code" else qe.TokenizerType.Word
        self.tokenizer = tokenizer
        self._model = qe.Bm25(qe.Bm25Config(tokenizer=kind))

    def embed_document(self, text: str) -> SparseVector:
        """A node's BM25 vector (term-frequency weights)."""
        vector = self._model.embed_document(text)
        return SparseVector(list(vector.indices), list(vector.values))

    def embed_query(self, text: str) -> SparseVector:
        """A query's BM25 vector (weight 1 per distinct term); empty when every word is a stop word."""
        vector = self._model.embed_query(text)
        return SparseVector(list(vector.indices), list(vector.values))
