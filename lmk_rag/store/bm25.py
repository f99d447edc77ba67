"""Qdrant's BM25 model, the same for every backend: the Rust model shipped in ``qdrant-edge-py`` (whose configuration
mirrors the server's ``Bm25Config``) makes term-frequency vectors on the client (:class:`Bm25Encoder`); every backend
stores them as the ``bm25`` sparse vector with Qdrant's IDF modifier, so IDF comes from the collection at search time.
A store records its tokenizer and language; see docs/decisions.md ("store: BM25 evidence in the final score") for the
choice.
"""

from __future__ import annotations

from lmk_rag.errors import InvalidInputError, needs_extra
from lmk_rag.store.types import SparseVector

BM25_TOKENIZER = "code"
"""The tokens of every store, recorded as its ``bm25_tokenizer``: Qdrant's code tokenizer keeps an identifier
(``dry_run``, ``CamelCase``, dotted names) and also its parts, with English stop words and stemming. Level with
Qdrant's default word tokenizer (which keeps ``dry_run`` whole) on the whole dev sets, so the identifiers of technical
text decided (docs/decisions.md); a settings record that names another tokenizer is refused as edited or damaged."""


BM25_LANGUAGE = "english"
"""The stop words and stemmer of new stores when none is given."""


def bm25_languages() -> list[str]:
    """The languages Qdrant's BM25 model has stop words for (``english``, ``german``, ...)."""
    with needs_extra("BM25 (Qdrant's BM25 model)"):
        import qdrant_edge as qe

    return sorted(name.lower() for name in dir(qe.Language) if not name.startswith("_"))


def check_language(language: str) -> str:
    """A BM25 language, lowercased.

    :raises InvalidInputError: for a language Qdrant's BM25 model does not know, naming the ones it does.
    """
    if not isinstance(language, str) or language.lower() not in bm25_languages():
        raise InvalidInputError(f"bm25_language must be one of {bm25_languages()}, got {language!r}")
    return language.lower()


class Bm25Encoder:
    """Qdrant's BM25 model with the code tokenizer (:data:`BM25_TOKENIZER`): term-frequency vectors of documents
    (k=1.2, b=0.75, average length 256 tokens) and binary query vectors.

    :param language: the stop words and stemmer (:func:`bm25_languages`; a language without a Snowball stemmer
        gets stop words only).
    :raises InvalidInputError: for an unknown language.
    :raises MissingExtraError: when ``qdrant-edge-py`` (which ships the model) is not installed.
    """

    def __init__(self, language: str = BM25_LANGUAGE) -> None:
        """Build the model."""
        with needs_extra("BM25 (Qdrant's BM25 model)"):
            import qdrant_edge as qe
        self.language = check_language(language)
        self._model = qe.Bm25(qe.Bm25Config(tokenizer=qe.TokenizerType.Code, language=self.language))

    def embed_document(self, text: str) -> SparseVector:
        """A node's BM25 vector (term-frequency weights)."""
        vector = self._model.embed_document(text)
        return SparseVector(list(vector.indices), list(vector.values))

    def embed_query(self, text: str) -> SparseVector:
        """A query's BM25 vector (weight 1 per distinct term); empty when every word is a stop word."""
        vector = self._model.embed_query(text)
        return SparseVector(list(vector.indices), list(vector.values))
