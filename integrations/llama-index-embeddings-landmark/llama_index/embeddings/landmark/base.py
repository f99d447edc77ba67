"""LandmarkEmbedding: LlamaIndex's embedding interface over :class:`lmk_rag.LandmarkEncoder`."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Mapping
from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding, Embedding
from llama_index.core.bridge.pydantic import Field, PrivateAttr, ValidationError
from llama_index.core.callbacks import CallbackManager
from llama_index.core.schema import BaseNode
from tqdm import tqdm

from lmk_rag import DocumentEncoder, EncodedText, LandmarkEncoder, TokenEncoder
from lmk_rag.adapters import invalid_fields
from lmk_rag.errors import InvalidInputError, needs_extra

PIPELINE_BAR = "Applying transformations"
"""The description of the bar ``IngestionPipeline.run(show_progress=True)`` shows over its transformations."""


def pipeline_shows_progress() -> bool:
    """Whether an ``IngestionPipeline.run(show_progress=True)`` (or ``arun``) is applying its transformations now.

    LlamaIndex shows its bar over the transformations but passes ``show_progress`` on to none of them, so a
    transformation that runs for minutes (the encoder, on a long document) would show nothing: the landmark node
    parser and embedding show the encoder's bar when this bar is open.

    :return: True while a shown (not disabled) "Applying transformations" bar is open in this process.
    """
    with tqdm.get_lock():
        return any(getattr(bar, "desc", "") == PIPELINE_BAR and not bar.disable for bar in list(tqdm._instances))


class LandmarkEmbedding(BaseEmbedding):
    """Landmark (LMK) pooling embeddings for LlamaIndex.

    A text's vector pools the landmark tokens of its chunks, so long texts keep the detail of every part. The
    keyword arguments are :class:`lmk_rag.LandmarkEncoder`'s settings (``granularity``, ``context``, ``pooling``,
    ``max_length``, ``backend``, ...): the encoder is built from them, and checks them, when the embedding is made;
    or pass an encoder already built with ``encoder=``. The encoder is shared with :class:`LandmarkNodeParser` and
    :class:`LandmarkVectorStore` through :attr:`encoder`. Its settings are the serialised fields (``model_name``
    and ``encoder_settings``), so ``to_dict()``/``from_dict()`` rebuild the same encoder.

    With ``static=True`` no transformer runs: the encoder is a :class:`lmk_rag.static.StaticDocumentEncoder`
    (pooled static vectors over chunks of ``granularity`` tokens; its settings are ``granularity``,
    ``static_model`` and ``mixer``), for a static store
    (``LandmarkVectorStore(embed_model=LandmarkEmbedding(static=True))``).

    Example::

        from llama_index.core import Settings
        from llama_index.embeddings.landmark import LandmarkEmbedding

        Settings.embed_model = LandmarkEmbedding(granularity=64)
    """

    model_name: str | None = Field(
        default=None, description="Hub id or folder of the transformer (None with static=True)."
    )
    encoder_settings: dict[str, Any] = Field(
        default_factory=dict,
        description="The encoder's other settings (LandmarkEncoder's, or StaticDocumentEncoder's with static=True), "
        "as the encoder reports them: what rebuilds it.",
    )
    static: bool = Field(
        default=False,
        description="Encode with the shipped static model and mixer instead of a transformer (for a static store).",
    )

    _encoder: DocumentEncoder = PrivateAttr()
    _empty: list[float] | None = PrivateAttr(default=None)
    _show_progress: bool = PrivateAttr(default=False)

    def __init__(
        self,
        *,
        encoder: DocumentEncoder | None = None,
        model_name: str | None = None,
        static: bool = False,
        encoder_settings: Mapping[str, Any] | None = None,
        embed_batch_size: int = 32,
        device: str | None = None,
        callback_manager: CallbackManager | None = None,
        query_instruction: str | None = None,
        text_instruction: str | None = None,
        **settings: Any,
    ) -> None:
        """Build the encoder from its settings, or take the one given.

        :param encoder: an encoder already built (a :class:`lmk_rag.LandmarkEncoder`, or a
            :class:`lmk_rag.static.StaticDocumentEncoder`, which means ``static=True``); the settings are then
            read from it and may not be given.
        :param model_name: hub id or local folder of the transformer (resolved offline when ``HF_HUB_OFFLINE=1``);
            None is the default MiniLM, which ships as a pip package.
        :param static: encode with the static model (no transformer): a static store's embedding.
        :param encoder_settings: encoder settings as a mapping (what ``to_dict()`` writes); ``settings`` are added.
        :param embed_batch_size: texts per call to the encoder, and windows per forward pass.
        :param device: ``"cpu"``, ``"cuda"``, ...; default: the best available (not serialised; unused with
            ``static``).
        :param callback_manager: LlamaIndex callback manager.
        :param query_instruction: ``HuggingFaceEmbedding``'s word for the encoder's ``query_prompt`` (the text put
            before every query; None: the model's own prompt).
        :param text_instruction: ``HuggingFaceEmbedding``'s word for the encoder's ``document_prompt``.
        :param settings: the encoder's settings (:class:`lmk_rag.LandmarkEncoder`'s, or with ``static``
            :class:`lmk_rag.static.StaticDocumentEncoder`'s); keys that are :class:`BaseEmbedding` fields
            (``num_workers``, ...) go to LlamaIndex.
        :raises InvalidInputError: for a setting the encoder refuses, a bad field, or an encoder and settings both.
        :raises TypeError: for a setting the encoder does not take (with ``static``, a transformer setting is named as
            one).
        """
        fields = {key: settings.pop(key) for key in list(settings) if key in BaseEmbedding.model_fields}
        try:
            super().__init__(embed_batch_size=embed_batch_size, callback_manager=callback_manager, **fields)
        except ValidationError as error:
            raise invalid_fields("LandmarkEmbedding", error) from None
        given = {**(encoder_settings or {}), **settings}
        for word, setting in (("query_instruction", "query_prompt"), ("text_instruction", "document_prompt")):
            value = query_instruction if word == "query_instruction" else text_instruction
            if value is not None and setting in given:
                raise InvalidInputError(f"LandmarkEmbedding: give {word} or {setting}, not both (they are one setting)")
            if value is not None:
                given[setting] = value
        if model_name is not None:
            given["model_name"] = model_name
        if encoder is None:
            encoder = _build_encoder(static, given, embed_batch_size, device)
        elif given or device is not None:
            raise InvalidInputError(
                f"LandmarkEmbedding: give encoder= or the settings to build one, not both (got {sorted(given)})"
            )
        elif static and not isinstance(encoder, TokenEncoder):
            raise InvalidInputError(f"LandmarkEmbedding: static=True needs a static encoder, got {encoder!r}")
        self._encoder = encoder
        recorded = dict(encoder.settings)
        self.model_name = recorded.pop("model_name", None)
        self.encoder_settings = recorded
        self.static = isinstance(encoder, TokenEncoder)

    @classmethod
    def class_name(cls) -> str:
        """The name LlamaIndex serialises this class under."""
        return "LandmarkEmbedding"

    def __getstate__(self) -> dict[str, Any]:
        """Pickle the fields (the encoder's settings), not the encoder and its model weights: unpickling builds the
        encoder again from them, as :meth:`from_dict` does (a pickled index stays small; docs/llamaindex.md)."""
        state = super().__getstate__()
        state["__pydantic_private__"] = {}
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Build the encoder from the pickled settings (see :meth:`__getstate__`).

        :raises ModelNotFoundError: when the model is not here any more (naming what was tried).
        """
        self.__init__(**state["__dict__"])  # type: ignore[misc]

    @property
    def encoder(self) -> DocumentEncoder:
        """The encoder: a :class:`lmk_rag.LandmarkEncoder` (with ``static``, a
        :class:`lmk_rag.static.StaticDocumentEncoder`)."""
        return self._encoder

    def empty_text_embedding(self) -> Embedding:
        """The embedding of a text without words ("" or whitespace), which has no landmarks: the encoder's
        ``empty_text_vector()``, what a sentence-transformers model (``HuggingFaceEmbedding``) gives it (with
        ``static``: the normalised mean of the static model's token vectors). So an empty ``Document`` or an
        ``ImageNode`` without text can be indexed as with any LlamaIndex embedding model.

        :return: the vector, computed once.
        """
        if self._empty is None:
            self._empty = self.encoder.empty_text_vector().tolist()
        return self._empty

    def _get_query_embedding(self, query: str) -> Embedding:
        return self._embed([query], self.encoder.encode_queries)[0]

    def _get_text_embedding(self, text: str) -> Embedding:
        return self._get_text_embeddings([text])[0]

    def _get_text_embeddings(self, texts: list[str]) -> list[Embedding]:
        return self._embed(texts, lambda worded: self.encoder.encode_documents(worded, self._show_progress or None))

    def get_text_embedding_batch(self, texts: list[str], show_progress: bool = False, **kwargs: Any) -> list[Embedding]:
        """Embed texts in batches of ``embed_batch_size``; with ``show_progress``, the encoder's bar (tokens, tokens/s
        and documents done, advancing per window batch, so a long text moves it too) replaces LlamaIndex's bar over
        texts.

        :param texts: the texts.
        :param show_progress: show the progress bar.
        :return: one embedding per text.
        """
        self._show_progress = show_progress
        try:
            return super().get_text_embedding_batch(texts, show_progress=False, **kwargs)
        finally:
            self._show_progress = False

    def __call__(self, nodes: list[BaseNode], **kwargs: Any) -> list[BaseNode]:
        """Embed nodes as a transformation of an ``IngestionPipeline``; the encoder's bar shows when the pipeline runs
        with ``show_progress=True`` (see :func:`pipeline_shows_progress`) or ``show_progress=True`` is passed."""
        kwargs["show_progress"] = kwargs.get("show_progress", False) or pipeline_shows_progress()
        return super().__call__(nodes, **kwargs)

    def _embed(self, texts: list[str], encode: Callable[[list[str]], list[EncodedText]]) -> list[Embedding]:
        """Encode the texts with words in one call; a text without words gets :meth:`empty_text_embedding`.
        :raises InvalidInputError: for a text that is not a str or not valid Unicode (the encoder checks them)."""
        blank = [isinstance(text, str) and not text.strip() for text in texts]
        worded = [text for text, empty in zip(texts, blank) if not empty]
        vectors = iter([encoded.vector.tolist() for encoded in encode(worded)] if worded else [])
        return [self.empty_text_embedding() if empty else next(vectors) for empty in blank]

    async def _aget_query_embedding(self, query: str) -> Embedding:
        return await asyncio.to_thread(self._get_query_embedding, query)

    async def _aget_text_embedding(self, text: str) -> Embedding:
        return await asyncio.to_thread(self._get_text_embedding, text)

    async def _aget_text_embeddings(self, texts: list[str]) -> list[Embedding]:
        return await asyncio.to_thread(self._get_text_embeddings, texts)


def _build_encoder(static: bool, settings: dict[str, Any], batch_size: int, device: str | None) -> DocumentEncoder:
    """The encoder the settings describe; it checks them (its errors name the setting).

    :param static: build the static encoder (which takes no batch size or device).
    :param settings: the encoder's keyword arguments.
    :param batch_size: windows per forward pass of a transformer.
    :param device: the transformer's device, or None for the best available.
    """
    if static:
        with needs_extra("LandmarkEmbedding(static=True)", "static"):
            from lmk_rag.static import StaticDocumentEncoder

        static_settings = set(inspect.signature(StaticDocumentEncoder).parameters)
        transformer_settings = set(inspect.signature(LandmarkEncoder).parameters)
        transformer_only = sorted((set(settings) - static_settings) & transformer_settings)
        if transformer_only:  # a TypeError, as for any setting the encoder does not take, in the user's words
            raise TypeError(
                f"LandmarkEmbedding(static=True) runs no transformer, and {', '.join(transformer_only)} "
                f"{'is a setting' if len(transformer_only) == 1 else 'are settings'} of transformer models: leave "
                f"{'it' if len(transformer_only) == 1 else 'them'} out, or drop static=True to encode with a "
                f"transformer (static settings: {', '.join(sorted(static_settings - {'token_encoder'}))})"
            )
        return StaticDocumentEncoder(**settings)
    return LandmarkEncoder(**settings, batch_size=batch_size, device=device)
