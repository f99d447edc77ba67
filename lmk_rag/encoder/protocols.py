"""What the store and the LlamaIndex adapters need of an encoder, as protocols (numpy only: no torch).

- :class:`DocumentEncoder` encodes documents and queries into :class:`~lmk_rag.EncodedText`: the landmark encoder
  (:class:`~lmk_rag.LandmarkEncoder`) and the static one (:class:`~lmk_rag.static.StaticDocumentEncoder`).
- :class:`TokenEncoder` gives a text's static token vectors for static MaxSim: :class:`~lmk_rag.StaticTokenEncoder`
  and :class:`~lmk_rag.static.StaticDocumentEncoder`. It is runtime-checkable: ``isinstance(encoder,
  TokenEncoder)`` tells a static encoder from a landmark encoder.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, overload, runtime_checkable

import numpy as np

from lmk_rag.encoder.types import EncodedText


class DocumentEncoder(Protocol):
    """Encodes documents and queries into text vectors, chunk vectors and chunk spans."""

    @property
    def dim(self) -> int:
        """The vector dimension."""
        ...

    @property
    def fingerprint(self) -> str:
        """A short hash of the settings and the model files (stores and node parsers compare it)."""
        ...

    @property
    def settings(self) -> dict[str, Any]:
        """The settings that decide the vectors, JSON-able: the encoder's class called with them rebuilds it."""
        ...

    @overload
    def encode_documents(self, texts: str, show_progress_bar: bool | None = None) -> EncodedText: ...

    @overload
    def encode_documents(self, texts: Sequence[str], show_progress_bar: bool | None = None) -> list[EncodedText]: ...

    def encode_documents(
        self, texts: str | Sequence[str], show_progress_bar: bool | None = None
    ) -> EncodedText | list[EncodedText]:
        """Encode documents (one text, or a list of texts); an empty or whitespace-only text is an error."""
        ...

    @overload
    def encode_queries(self, texts: str) -> EncodedText: ...

    @overload
    def encode_queries(self, texts: Sequence[str]) -> list[EncodedText]: ...

    def encode_queries(self, texts: str | Sequence[str]) -> EncodedText | list[EncodedText]:
        """Encode queries (one text, or a list of texts)."""
        ...

    def empty_text_vector(self) -> np.ndarray:
        """The vector of a text without words, which :meth:`encode_documents` refuses: float32, (dim,), unit norm."""
        ...


@runtime_checkable
class TokenEncoder(Protocol):
    """Gives a text's static token vectors, the multivectors of static MaxSim (``rerank="static"``)."""

    @property
    def dim(self) -> int:
        """The token vector dimension."""
        ...

    @property
    def fingerprint(self) -> str:
        """A short hash of the static model (and mixer): a store records it."""
        ...

    def encode_document_tokens(self, text: str) -> np.ndarray:
        """A document's distinct token vectors, float32, shape (m, dim)."""
        ...

    def document_token_spans(self, text: str) -> np.ndarray:
        """The char spans of the tokens :meth:`encode_document_tokens` gives vectors of, in its rows' order: int,
        shape (m, 2) (a hit's token evidence)."""
        ...

    def encode_query_tokens(self, text: str) -> np.ndarray:
        """A query's token vectors, float32, shape (q, dim)."""
        ...
