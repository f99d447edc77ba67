"""LandmarkEmbedding: LlamaIndex's embedding interface over :class:`lmk_rag.LandmarkEncoder`."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any, Literal

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding, Embedding
from llama_index.core.bridge.pydantic import Field, PrivateAttr, ValidationError
from llama_index.core.callbacks import CallbackManager

from lmk_rag.checks import check_texts
from lmk_rag.encoder import DEFAULT_CONTEXT, DEFAULT_GRANULARITY, DEFAULT_MODEL, LandmarkEncoder
from lmk_rag.encoder.planning import check_granularity
from lmk_rag.encoder.runtime import BACKEND_DTYPES, check_dtype
from lmk_rag.encoder.types import Backend, ChunkVector, Context, EncodedText, Pooling
from lmk_rag.errors import InvalidInputError, invalid_fields


class LandmarkEmbedding(BaseEmbedding):
    """Landmark (LMK) pooling embeddings for LlamaIndex.

    A text's vector pools the landmark tokens of its chunks, so long texts keep the detail of
    every part. The fields mirror :class:`lmk_rag.LandmarkEncoder`; the encoder itself is built on
    first use (or injected) and shared with :class:`LandmarkNodeParser` and
    :class:`LandmarkVectorStore` through :attr:`encoder`.

    With ``static=True`` no transformer runs: the encoder is the static model's
    (:class:`lmk_rag.static.documents.StaticDocumentEncoder`: pooled static vectors over chunks of ``granularity``
    tokens), for a static store (``LandmarkVectorStore(embed_model=LandmarkEmbedding(static=True))``); the other
    transformer fields are then unused.

    Example::

        from llama_index.core import Settings
        from llama_index.embeddings.landmark import LandmarkEmbedding

        Settings.embed_model = LandmarkEmbedding(granularity=64)
    """

    model_name: str | None = Field(
        default=None, description=f"Hub id or folder of the transformer; None: {DEFAULT_MODEL} (shipped as a package)."
    )
    granularity: int | Literal["sentence", "variable"] | None = Field(
        default=DEFAULT_GRANULARITY,
        description="Landmark chunk size in tokens, 'sentence', 'variable', or None (plain encoder).",
    )
    context: Context = Field(
        default=Context(DEFAULT_CONTEXT),
        description="'document': chunks see their window; 'chunk': each chunk is encoded alone.",
    )
    pooling: Pooling = Field(
        default=Pooling.AUTO, description="Text pooling; 'auto' is 'lmk' for LMK-trained models, else 'mean'."
    )
    chunk_vector: ChunkVector = Field(
        default=ChunkVector.AUTO,
        description="Per-chunk vector; 'auto' is 'landmark' for LMK-trained models, else 'mean'.",
    )
    max_length: int | None = Field(default=None, gt=0, description="Window length in tokens; None: the model's.")
    window_overlap: int = Field(
        default=0, ge=0, description="Document context: up to this many tokens of preceding chunks prefix each window."
    )
    sentence_max_tokens: int = Field(default=128, gt=0, description="The longest chunk for granularity='sentence'.")
    backend: Backend = Field(
        default=Backend.TORCH, description="What runs the transformer: 'torch' or 'onnx' (ONNX Runtime on the CPU)."
    )
    dtype: str = Field(
        default="auto",
        description="torch: 'auto', 'float32', 'bfloat16', 'float16'; onnx: 'auto' (float32), 'float32', 'int8'.",
    )
    static: bool = Field(
        default=False,
        description="Encode with the shipped static model and mixer instead of a transformer (for a static store).",
    )

    _encoder: Any = PrivateAttr(default=None)
    _device: str | None = PrivateAttr(default=None)
    _empty: list[float] | None = PrivateAttr(default=None)
    _show_progress: bool = PrivateAttr(default=False)

    def __init__(
        self,
        model_name: str | None = None,
        granularity: int | Literal["sentence", "variable"] | None = DEFAULT_GRANULARITY,
        context: Context | str = DEFAULT_CONTEXT,
        pooling: Pooling | str = Pooling.AUTO,
        chunk_vector: ChunkVector | str = ChunkVector.AUTO,
        max_length: int | None = None,
        window_overlap: int = 0,
        sentence_max_tokens: int = 128,
        backend: Backend | str = Backend.TORCH,
        dtype: str = "auto",
        static: bool = False,
        embed_batch_size: int = 32,
        device: str | None = None,
        callback_manager: CallbackManager | None = None,
        encoder: Any = None,
        **kwargs: Any,
    ) -> None:
        """Configure the embedding model; the encoder loads on first use unless one is given.

        :param model_name: hub id or local folder of the transformer (resolved offline when
            ``HF_HUB_OFFLINE=1``); None is the default MiniLM, which ships as a pip package. Kept as
            given: a store records it, and reopening the store compares it.
        :param granularity: see :class:`lmk_rag.LandmarkEncoder`.
        :param context: see :class:`lmk_rag.LandmarkEncoder`.
        :param pooling: see :class:`lmk_rag.LandmarkEncoder`.
        :param chunk_vector: see :class:`lmk_rag.LandmarkEncoder`.
        :param max_length: see :class:`lmk_rag.LandmarkEncoder`.
        :param window_overlap: see :class:`lmk_rag.LandmarkEncoder`.
        :param sentence_max_tokens: see :class:`lmk_rag.LandmarkEncoder`.
        :param backend: see :class:`lmk_rag.LandmarkEncoder`.
        :param dtype: see :class:`lmk_rag.LandmarkEncoder`.
        :param static: encode with the static model (no transformer): a static store's embedding.
        :param embed_batch_size: texts per call to the encoder, and windows per forward pass.
        :param device: ``"cpu"``, ``"cuda"``, ...; default: the best available (not serialised).
        :param callback_manager: LlamaIndex callback manager.
        :param encoder: an already built encoder to use (a :class:`lmk_rag.LandmarkEncoder`, or a
            :class:`lmk_rag.static.documents.StaticDocumentEncoder`, which means ``static=True``); the settings fields
            are then read from it.
        :param kwargs: other :class:`BaseEmbedding` fields (e.g. ``num_workers``).
        """
        settings = {
            "model_name": model_name,
            "granularity": granularity,
            "context": context,
            "pooling": pooling,
            "chunk_vector": chunk_vector,
            "max_length": max_length,
            "window_overlap": window_overlap,
            "sentence_max_tokens": sentence_max_tokens,
            "backend": backend,
            "dtype": dtype,
        }
        static = static or hasattr(encoder, "encode_query_tokens")
        if encoder is not None:
            settings.update({key: getattr(encoder, key) for key in settings if hasattr(encoder, key)})
        else:
            _check_settings(settings, static)
        try:
            super().__init__(
                embed_batch_size=embed_batch_size, callback_manager=callback_manager, static=static, **settings,
                **kwargs,
            )
        except ValidationError as error:
            raise invalid_fields("LandmarkEmbedding", error) from None
        self._encoder = encoder
        self._device = device

    @classmethod
    def class_name(cls) -> str:
        """The name LlamaIndex serialises this class under."""
        return "LandmarkEmbedding"

    @property
    def encoder(self) -> Any:
        """The landmark encoder (with ``static``: the static document encoder), built from the fields on first
        access."""
        if self._encoder is None and self.static:
            from lmk_rag.static.documents import StaticDocumentEncoder

            self._encoder = StaticDocumentEncoder(granularity=self.granularity)
        if self._encoder is None:
            self._encoder = LandmarkEncoder(
                model_name=self.model_name,
                granularity=self.granularity,
                context=self.context,
                pooling=self.pooling,
                chunk_vector=self.chunk_vector,
                max_length=self.max_length,
                window_overlap=self.window_overlap,
                sentence_max_tokens=self.sentence_max_tokens,
                backend=self.backend,
                dtype=self.dtype,
                batch_size=self.embed_batch_size,
                device=self._device,
            )
        return self._encoder

    def empty_text_embedding(self) -> Embedding:
        """The embedding of a text without words ("" or whitespace), which has no landmarks: what a
        sentence-transformers model (``HuggingFaceEmbedding``) gives it, the normalised mean of the model's final
        states of the tokenizer's special tokens alone (``[CLS] [SEP]``). So an empty ``Document`` or an
        ``ImageNode`` without text can be indexed as with any LlamaIndex embedding model.

        With ``static``, a text without words has no tokens (model2vec gives it zeros, which no cosine can compare
        and no store accepts): its vector is the normalised mean of the static model's token vectors.

        :return: the vector, computed once.
        """
        if self._empty is None and self.static:
            mean = self.encoder.tokens.vectors.unit_table.mean(axis=0)
            self._empty = (mean / np.linalg.norm(mean)).tolist()
        if self._empty is None:
            import torch

            encoder = self.encoder
            inputs = encoder.tokenizer("", return_tensors="pt")
            with torch.inference_mode():
                states = encoder.model(**{k: v.to(encoder.device) for k, v in inputs.items()}).last_hidden_state
            vector = states[0].float().mean(dim=0).cpu().numpy()
            self._empty = (vector / np.linalg.norm(vector)).tolist()
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

    def _embed(self, texts: list[str], encode: Callable[[list[str]], list[EncodedText]]) -> list[Embedding]:
        """Encode the texts with words in one call; a text without words gets :meth:`empty_text_embedding`.

        :raises InvalidInputError: for a text that is not a str or not valid Unicode (see lmk_rag.checks.check_text).
        """
        check_texts(texts, blank=True)
        worded = [text for text in texts if text.strip()]
        vectors = iter([encoded.vector.tolist() for encoded in encode(worded)] if worded else [])
        return [next(vectors) if text.strip() else self.empty_text_embedding() for text in texts]

    async def _aget_query_embedding(self, query: str) -> Embedding:
        return await asyncio.to_thread(self._get_query_embedding, query)

    async def _aget_text_embedding(self, text: str) -> Embedding:
        return await asyncio.to_thread(self._get_text_embedding, text)

    async def _aget_text_embeddings(self, texts: list[str]) -> list[Embedding]:
        return await asyncio.to_thread(self._get_text_embeddings, texts)


def _check_settings(settings: dict[str, Any], static: bool) -> None:
    """Refuse now, not at the first text, a granularity or dtype the encoder cannot use, and transformer settings
    given to a static embedding (which would ignore them).

    :raises InvalidInputError: naming the setting.
    """
    check_granularity(settings["granularity"])
    if static:
        defaults = inspect.signature(LandmarkEmbedding.__init__).parameters
        ignored = [key for key, value in settings.items() if key != "granularity" and value != defaults[key].default]
        if ignored:
            raise InvalidInputError(
                f"static=True encodes with the shipped static model and takes only granularity; "
                f"{', '.join(ignored)} would be ignored"
            )
        return
    backend = getattr(settings["backend"], "value", settings["backend"])
    if backend in BACKEND_DTYPES:  # another backend is pydantic's to refuse
        check_dtype(backend, settings["dtype"])
