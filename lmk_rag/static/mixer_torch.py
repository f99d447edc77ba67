"""ConvMixer: a small torch module that adds local context to static token vectors.

``out = l2norm(x + gate * mixed)`` where ``x`` are the L2-normalised static token vectors (T, dim),
``mixed = linear(depthwise_conv_k(x))`` mixes each token with its ``kernel_size`` neighbours, and
``gate = sigmoid(W_g x + b_g)`` is computed from the input tokens alone. The gate bias starts negative so
that an untrained mixer stays close to the raw static vectors.
Training needs torch (this module and :mod:`lmk_rag.static.train`); inference runs in numpy
(:class:`~lmk_rag.static.mixer.MixerWeights`, from :meth:`ConvMixer.to_numpy` or a saved folder).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import save_file
from torch import nn

from lmk_rag.static.mixer import CONFIG_FILE, WEIGHTS_FILE, MixerWeights


class ConvMixer(nn.Module):
    """Depthwise conv over tokens + linear over dims, added back to the input through a sigmoid gate.

    :param dim: the static vector dimension.
    :param kernel_size: the conv's width in tokens (odd).
    :param gate_bias: initial gate bias; sigmoid(-2) ~= 0.12 keeps the untrained mixer near identity.
    :raises ValueError: if ``kernel_size`` is even.
    """

    def __init__(self, dim: int, kernel_size: int = 7, gate_bias: float = -2.0) -> None:
        super().__init__()
        if kernel_size % 2 == 0:
            raise ValueError(f"kernel_size must be odd to keep tokens centred, got {kernel_size}")
        self.config = {"dim": dim, "kernel_size": kernel_size, "gate_bias": gate_bias}
        self.conv = nn.Conv1d(dim, dim, kernel_size, padding=kernel_size // 2, groups=dim)
        self.linear = nn.Linear(dim, dim)
        self.gate = nn.Linear(dim, dim)
        nn.init.constant_(self.gate.bias, gate_bias)

    @property
    def dim(self) -> int:
        """The token vector dimension."""
        return int(self.config["dim"])

    @property
    def parameter_count(self) -> int:
        """The number of trainable parameters."""
        return sum(p.numel() for p in self.parameters())

    def gates(self, x: torch.Tensor) -> torch.Tensor:
        """The gate values for input tokens.

        :param x: normalised static token vectors, shape (batch, tokens, dim).
        :return: values in (0, 1), shape (batch, tokens, dim).
        """
        return torch.sigmoid(self.gate(x))

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Mix each token with its neighbours.

        :param x: normalised static token vectors, shape (batch, tokens, dim).
        :param mask: 1 for real tokens and 0 for padding, shape (batch, tokens); padding is zeroed first
            so that it does not leak into real tokens through the conv.
        :return: L2-normalised mixed token vectors, shape (batch, tokens, dim).
        """
        if mask is not None:
            x = x * mask.unsqueeze(-1).to(x.dtype)
        mixed = self.linear(self.conv(x.transpose(1, 2)).transpose(1, 2))
        return nn.functional.normalize(x + self.gates(x) * mixed, dim=-1)

    def to_numpy(self) -> MixerWeights:
        """Copy the weights for numpy inference (what :class:`~lmk_rag.static.StaticTokenEncoder` runs).

        :return: the weights as float32 numpy arrays.
        """
        weights = {k: v.detach().cpu().numpy().astype(np.float32) for k, v in self.state_dict().items()}
        return MixerWeights(dict(self.config), weights)

    def save(self, folder: str | os.PathLike[str]) -> Path:
        """Save as ``mixer_config.json`` + ``mixer.safetensors``.

        :param folder: the target folder (created if missing).
        :return: the folder.
        """
        path = Path(folder)
        path.mkdir(parents=True, exist_ok=True)
        (path / CONFIG_FILE).write_text(json.dumps(self.config, indent=2))
        save_file({k: v.contiguous() for k, v in self.state_dict().items()}, str(path / WEIGHTS_FILE))
        return path

    @classmethod
    def load(cls, folder: str | os.PathLike[str]) -> ConvMixer:
        """Load a mixer written by :meth:`save`, as :meth:`MixerWeights.load` reads it.

        :param folder: the folder holding ``mixer_config.json`` and ``mixer.safetensors``.
        :return: the mixer, in eval mode.
        :raises ModelNotFoundError: if either file is missing.
        """
        weights = MixerWeights.load(folder)
        mixer = cls(**weights.config)
        mixer.load_state_dict({name: torch.from_numpy(array) for name, array in weights.weights.items()})
        return mixer.eval()
