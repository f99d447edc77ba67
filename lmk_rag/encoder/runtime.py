"""What runs the transformer for the encoder: a tokenizer, and padded token ids in, float32 token states out.

Landmark planning, windows and pooling sit above this interface and are the same for every backend. The torch
backend (:mod:`lmk_rag.encoder.torch_backend`) loads transformers' tokenizer and torch model; the ONNX backend
(:mod:`lmk_rag.encoder.onnx_backend`) loads the exported model and the tokenizer saved beside it, and imports neither
torch nor transformers once the export exists. The encoder imports the backend it runs when it is built.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from lmk_rag.errors import InvalidInputError

BACKEND_DTYPES: dict[str, tuple[str, ...]] = {
    "torch": ("auto", "float32", "bfloat16", "float16"),
    "onnx": ("auto", "float32", "int8"),
}
"""The ``dtype`` names each backend runs; ``"auto"`` is bfloat16 on CUDA and float32 elsewhere (ONNX: float32)."""


class TokenStates(Protocol):
    """A transformer behind the encoder."""

    def __call__(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
        """Final hidden states of a padded batch.

        :param input_ids: token ids, int64, shape (batch, tokens).
        :param attention_mask: 1 for real tokens, 0 for padding, int64, shape (batch, tokens).
        :return: float32 states, shape (batch, tokens, dim).
        """
        ...


@dataclass(frozen=True)
class Runtime:
    """A loaded backend.

    :param tokenizer: a transformers fast tokenizer, or for ONNX the one saved with the export
        (:class:`~lmk_rag.encoder.tokenizer.SavedTokenizer`, the same calls).
    :param config: the model's config (``hidden_size``, ``max_position_embeddings``).
    :param states: runs the model.
    :param model: the torch model (None for ONNX).
    :param device: where the model runs: a ``torch.device``, or ``"cpu"`` for ONNX.
    """

    tokenizer: Any
    config: Any
    states: TokenStates
    model: Any
    device: Any


def check_dtype(backend: str, dtype: str) -> str:
    """Check that a backend runs a dtype; the error names the fix.

    :param backend: ``"torch"`` or ``"onnx"``.
    :param dtype: a dtype name.
    :return: ``dtype``.
    :raises InvalidInputError: for a dtype the backend does not run.
    """
    choices = BACKEND_DTYPES[backend]
    if dtype in choices:
        return dtype
    others = [name for name, names in BACKEND_DTYPES.items() if name != backend and dtype in names]
    fix = f"; dtype={dtype!r} needs backend={others[0]!r}" if others else ""
    raise InvalidInputError(f"backend={backend!r} runs dtype {', '.join(map(repr, choices))}; got {dtype!r}{fix}")


BFLOAT16_CPU_FLAGS = ("amx_bf16", "avx512_bf16")
"""CPU flags (as Linux names them) of a CPU that multiplies bfloat16 natively: AMX tiles, or AVX-512 BF16."""


def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags as Linux lists them in ``/proc/cpuinfo`` (empty elsewhere)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return frozenset()
    for line in text.splitlines():
        if line.startswith("flags"):
            return frozenset(line.partition(":")[2].split())
    return frozenset()
