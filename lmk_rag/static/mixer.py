"""ConvMixer inference in numpy: the weights of a trained :class:`~lmk_rag.static.mixer_torch.ConvMixer`,
applied without torch (the encoder and the store stay numpy-only).

``out = l2norm(x + sigmoid(x @ G.T + g) * (depthwise_conv(x) @ L.T + l))``, the same function as
:meth:`ConvMixer.forward` on one unpadded text.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file

from lmk_rag.errors import ModelNotFoundError, VectorSizeError
from lmk_rag.hashing import short_hash
from lmk_rag.paths import recorded_folder
from lmk_rag.static.model import cache_dir

CONFIG_FILE = "mixer_config.json"
WEIGHTS_FILE = "mixer.safetensors"
SHIPPED_MIXER_DIR = Path(__file__).parent / "data" / "mixer"
"""The mixer that ships with the package, trained on the shipped static model (docs/static.md says how)."""


def user_mixer_dir() -> Path:
    """The folder ``lmk-rag train-mixer`` writes to by default (in the user cache dir)."""
    return cache_dir() / "mixer-default"


def default_mixer_dir() -> Path:
    """The mixer used when none is named: the user's own (:func:`user_mixer_dir`) once ``lmk-rag train-mixer`` has
    written one, else the shipped one (:data:`SHIPPED_MIXER_DIR`)."""
    user = user_mixer_dir()
    return user if (user / CONFIG_FILE).is_file() and (user / WEIGHTS_FILE).is_file() else SHIPPED_MIXER_DIR


DEFAULT_MIXER = "default"
"""Mixer name: :func:`default_mixer_dir` (the user's trained mixer, else the shipped one)."""
SHIPPED_MIXER = "shipped"
"""Mixer name: the shipped mixer (:data:`SHIPPED_MIXER_DIR`), whatever the user has trained."""


def mixer_folder(mixer: str | os.PathLike[str]) -> Path:
    """The folder a mixer name or path means.

    :param mixer: :data:`DEFAULT_MIXER`, :data:`SHIPPED_MIXER` or a mixer folder.
    :return: the folder.
    """
    if mixer == DEFAULT_MIXER:
        return default_mixer_dir()
    if mixer == SHIPPED_MIXER:
        return SHIPPED_MIXER_DIR
    return Path(mixer)


@dataclass(frozen=True)
class MixerWeights:
    """A trained mixer's weights, float32, named as in the torch module's ``state_dict``.

    :param config: the mixer config (``dim``, ``kernel_size``, ``gate_bias``).
    :param weights: ``conv.weight`` (dim, 1, k), ``conv.bias`` (dim,), ``linear.weight`` (dim, dim),
        ``linear.bias`` (dim,), ``gate.weight`` (dim, dim), ``gate.bias`` (dim,).
    :param source: the folder the weights were loaded from (None: copied from a live torch module).
    """

    config: dict[str, float | int]
    weights: dict[str, np.ndarray]
    source: str | None = None

    @property
    def dim(self) -> int:
        """The token vector dimension."""
        return int(self.config["dim"])

    def gates(self, tokens: np.ndarray) -> np.ndarray:
        """The gate values of input tokens (they depend on each token alone, so callers may tabulate them).

        :param tokens: L2-normalised static token vectors, shape (n, dim).
        :return: values in (0, 1), shape (n, dim).
        """
        logits = tokens @ self.weights["gate.weight"].T + self.weights["gate.bias"]
        return (1.0 / (1.0 + np.exp(-logits))).astype(np.float32)

    def mix(self, tokens: np.ndarray, gates: np.ndarray | None = None) -> np.ndarray:
        """Mix one text's token vectors with their neighbours.

        :param tokens: L2-normalised static token vectors, shape (n, dim).
        :param gates: the tokens' precomputed :meth:`gates` (e.g. looked up in a per-vocabulary table),
            shape (n, dim); None computes them.
        :return: L2-normalised float32 mixed vectors, shape (n, dim).
        :raises VectorSizeError: if ``tokens`` has another dimension than the mixer.
        """
        if tokens.ndim != 2 or tokens.shape[1] != self.dim:
            raise VectorSizeError(f"the mixer takes (n, {self.dim}) token vectors, got {tokens.shape}")
        w = self.weights
        taps = self._taps  # (k, dim): one contiguous row per kernel offset
        k = len(taps)
        x = tokens.astype(np.float32, copy=False)
        padded = np.pad(x, ((k // 2, k // 2), (0, 0)))
        conv = padded[: len(x)] * taps[0]
        for offset in range(1, k):
            conv += padded[offset : offset + len(x)] * taps[offset]
        conv += w["conv.bias"]
        mixed = conv @ self._linear_t
        mixed += w["linear.bias"]
        mixed *= self.gates(x) if gates is None else gates
        mixed += x
        mixed /= np.maximum(np.sqrt(np.einsum("ij,ij->i", mixed, mixed)), 1e-12)[:, None]
        return mixed

    @cached_property
    def _taps(self) -> np.ndarray:
        return np.ascontiguousarray(self.weights["conv.weight"][:, 0, :].T)

    @cached_property
    def _linear_t(self) -> np.ndarray:
        return np.ascontiguousarray(self.weights["linear.weight"].T)

    def fingerprint(self) -> str:
        """A short hash of the config and weights (equal to the torch module's for the same weights)."""
        weights = [part for name in sorted(self.weights)
                   for part in (name.encode(), np.ascontiguousarray(self.weights[name], dtype=np.float32).tobytes())]
        return short_hash([json.dumps(self.config, sort_keys=True).encode(), *weights])

    @classmethod
    def load(cls, folder: str | os.PathLike[str]) -> MixerWeights:
        """Load a mixer folder written by :meth:`ConvMixer.save`.

        :param folder: the folder holding ``mixer_config.json`` and ``mixer.safetensors``.
        :return: the weights.
        :raises ModelNotFoundError: if either file is missing.
        """
        path = Path(folder)
        if not (path / CONFIG_FILE).is_file() or not (path / WEIGHTS_FILE).is_file():
            raise ModelNotFoundError(
                f"{path} is not a ConvMixer folder: it needs {CONFIG_FILE} and {WEIGHTS_FILE} "
                "(`lmk-rag train-mixer` writes one)"
            )
        weights = {k: v.astype(np.float32) for k, v in load_file(str(path / WEIGHTS_FILE)).items()}
        return cls(json.loads((path / CONFIG_FILE).read_text()), weights, recorded_folder(path))
