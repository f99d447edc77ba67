"""A linear projection: one learned (dim, dim) matrix applied to every vector the encoder outputs.

``projected(x) = l2norm(W @ x)`` for the text vector, every chunk vector and (through them) every node vector, of
documents and queries alike, so a cosine between two projected vectors is a cosine in a space fitted to retrieval
(LlamaIndex's ``LinearAdapterEmbeddingModel`` is the same idea, on the query side only). The projection works on
pooled vectors, after the transformer: the same encoding pass serves the plain and the projected encoder.

One projection ships with the package, trained by ``lmk-rag train-projection`` for the packaged all-MiniLM-L6-v2 on the
training pairs only (docs/decisions.md, "quality: a linear projection"). A projection folder holds
``projection.safetensors`` (``weight``, float32) and ``projection_config.json`` (``dim``, the ``model_digest`` of the
model it was trained on, the ``chunk_vector`` it was trained with).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import load_file, save_file

from lmk_rag.encoder.types import EncodedText
from lmk_rag.errors import InvalidInputError, ModelNotFoundError
from lmk_rag.hashing import short_hash
from lmk_rag.paths import recorded_folder
from lmk_rag.vector_math import l2_normalize

WEIGHTS_FILE = "projection.safetensors"
CONFIG_FILE = "projection_config.json"
SHIPPED_PROJECTION_DIR = Path(__file__).parent / "data" / "projection"
"""The projection that ships with the package, for the packaged all-MiniLM-L6-v2 with chunk means."""

AUTO_PROJECTION = "auto"
"""Projection name: the shipped projection when it was trained for the encoder's model and chunk vectors, else none."""
SHIPPED_PROJECTION = "shipped"
"""Projection name: the shipped projection (:data:`SHIPPED_PROJECTION_DIR`); an error for any other model."""


@dataclass(frozen=True)
class LinearProjection:
    """A trained projection.

    :param weight: the matrix ``W``, shape (dim, dim), float32: ``projected(x) = l2norm(W @ x)``.
    :param config: ``dim``, ``model_digest`` (the model it was trained on), ``chunk_vector`` (the chunk vectors it
        was trained with), and anything else the trainer recorded.
    """

    weight: np.ndarray
    config: dict[str, Any]

    @property
    def dim(self) -> int:
        """The vector dimension."""
        return int(self.weight.shape[0])

    @cached_property
    def fingerprint(self) -> str:
        """A short hash of the weights (the encoder's fingerprint includes it)."""
        return short_hash([np.ascontiguousarray(self.weight, dtype=np.float32).tobytes()])

    def apply(self, vectors: np.ndarray) -> np.ndarray:
        """Project vectors, shape (..., dim): ``l2norm(W @ x)`` for each, float32."""
        return l2_normalize(vectors @ self.weight.T)

    def project(self, encoded: EncodedText) -> EncodedText:
        """An encoded text with its text vector and chunk vectors projected (spans and counts unchanged)."""
        return replace(encoded, vector=self.apply(encoded.vector), chunk_vectors=self.apply(encoded.chunk_vectors))

    def save(self, folder: str | os.PathLike[str]) -> Path:
        """Write the projection folder (created if needed) and return it."""
        path = Path(folder)
        path.mkdir(parents=True, exist_ok=True)
        save_file({"weight": np.ascontiguousarray(self.weight, dtype=np.float32)}, str(path / WEIGHTS_FILE))
        (path / CONFIG_FILE).write_text(json.dumps(self.config, indent=2) + "\n")
        return path

    @classmethod
    def load(cls, folder: str | os.PathLike[str]) -> LinearProjection:
        """Read a projection folder.

        :raises ModelNotFoundError: when the folder lacks the projection's files.
        :raises InvalidInputError: when the weights are not a square matrix of the recorded ``dim``.
        """
        path = Path(folder)
        if not (path / WEIGHTS_FILE).is_file() or not (path / CONFIG_FILE).is_file():
            raise ModelNotFoundError(
                f"no projection in {path} (it needs {WEIGHTS_FILE} and {CONFIG_FILE}); give a folder written by "
                "lmk-rag train-projection, 'auto' or None"
            )
        weight = load_file(str(path / WEIGHTS_FILE)).get("weight")
        config = json.loads((path / CONFIG_FILE).read_text())
        dim = config.get("dim")
        if weight is None or weight.ndim != 2 or weight.shape != (dim, dim):
            raise InvalidInputError(f"the projection in {path} is not a ({dim}, {dim}) 'weight' matrix")
        return cls(weight.astype(np.float32), config)


def resolve_projection(
    projection: str | os.PathLike[str] | None, model_digest: str, chunk_vector: str, dim: int
) -> tuple[str | None, LinearProjection | None]:
    """The projection an encoder setting means, and the value the encoder's settings record for it.

    :param projection: :data:`AUTO_PROJECTION`, :data:`SHIPPED_PROJECTION`, a projection folder, or None (none).
    :param model_digest: the encoder's model digest (:func:`lmk_rag.encoder.resolve.model_digest`).
    :param chunk_vector: the encoder's chunk vectors (``"mean"`` or ``"landmark"``).
    :param dim: the model's vector dimension.
    :return: ``(recorded, projection)``: ``(None, None)`` for no projection, ``("shipped", ...)`` for the shipped one,
        the folder as a string for any other.
    :raises InvalidInputError: for a value of another type, or a projection trained for another model or chunk vector.
    :raises ModelNotFoundError: for a folder without a projection.
    """
    chunk_vector = getattr(chunk_vector, "value", chunk_vector)  # a ChunkVector member or its value
    if projection is None:
        return None, None
    if not isinstance(projection, (str, os.PathLike)):
        raise InvalidInputError(
            f"projection must be 'auto', 'shipped', a projection folder or None, got {projection!r}"
        )
    if projection == AUTO_PROJECTION:
        shipped = LinearProjection.load(SHIPPED_PROJECTION_DIR)
        fits = (shipped.config.get("model_digest"), shipped.config.get("chunk_vector")) == (model_digest, chunk_vector)
        return (SHIPPED_PROJECTION, shipped) if fits else (None, None)
    recorded = SHIPPED_PROJECTION if projection == SHIPPED_PROJECTION else recorded_folder(projection)
    loaded = LinearProjection.load(SHIPPED_PROJECTION_DIR if projection == SHIPPED_PROJECTION else projection)
    if loaded.config.get("model_digest") != model_digest or loaded.dim != dim:
        raise InvalidInputError(
            f"projection {recorded!r} was trained for another model (digest {loaded.config.get('model_digest')}, this "
            f"model's is {model_digest}); train one for it with lmk-rag train-projection, or use projection=None"
        )
    if loaded.config.get("chunk_vector") != chunk_vector:
        raise InvalidInputError(
            f"projection {recorded!r} was trained on {loaded.config.get('chunk_vector')!r} chunk vectors, this "
            f"encoder's are {chunk_vector!r}; use chunk_vector={loaded.config.get('chunk_vector')!r} or projection=None"
        )
    return recorded, loaded
