"""What runs the transformer for the encoder: padded token ids in, float32 token states out.

Landmark planning, windows and pooling sit above this interface and are the same for every backend.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch
from transformers import AutoModel

from lmk_rag.encoder.types import EncoderBackend
from lmk_rag.errors import InvalidInputError

BACKEND_DTYPES: dict[str, tuple[str, ...]] = {
    EncoderBackend.TORCH.value: ("auto", "float32", "bfloat16", "float16"),
    EncoderBackend.ONNX.value: ("auto", "float32", "int8"),
}
"""The ``dtype`` names each backend runs; ``"auto"`` is bfloat16 on CUDA and float32 elsewhere (ONNX: float32)."""

_TORCH_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


class TokenStates(Protocol):
    """A transformer behind the encoder."""

    def __call__(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
        """Final hidden states of a padded batch.

        :param input_ids: token ids, int64, shape (batch, tokens).
        :param attention_mask: 1 for real tokens, 0 for padding, int64, shape (batch, tokens).
        :return: float32 states, shape (batch, tokens, dim).
        """
        ...


class TorchStates:
    """Final hidden states from a Hugging Face torch model (in its own dtype, returned as float32).

    :param model: the model, on ``device`` and in eval mode.
    :param device: where the model runs.
    """

    def __init__(self, model: torch.nn.Module, device: torch.device) -> None:
        self.model = model
        self.device = device

    def __call__(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
        """Final hidden states of a padded batch (see :class:`TokenStates`)."""
        with torch.inference_mode():
            output = self.model(
                input_ids=torch.from_numpy(input_ids).to(self.device),
                attention_mask=torch.from_numpy(attention_mask).to(self.device),
            )
        return output.last_hidden_state.float().cpu().numpy()


def load_runtime(
    model_path: Path, config: Any, backend: str, dtype: str, device: torch.device
) -> tuple[TokenStates, torch.nn.Module | None]:
    """Load the backend that runs a model.

    :param model_path: the model folder.
    :param config: the model's Hugging Face config.
    :param backend: ``"torch"`` or ``"onnx"``.
    :param dtype: a dtype the backend runs (see :func:`check_dtype`).
    :param device: the torch device (the ONNX backend runs on the CPU).
    :return: the runtime, and the torch model (None for ONNX).
    :raises ModelExportError: when the ONNX backend cannot export the model.
    """
    if backend == EncoderBackend.ONNX:
        from lmk_rag.encoder.onnx_backend import OnnxStates

        return OnnxStates(model_path, "float32" if dtype == "auto" else dtype, torch.get_num_threads()), None
    model = AutoModel.from_pretrained(model_path, config=config, dtype=torch_dtype(dtype, device))
    model.to(device).eval()
    return TorchStates(model, device), model


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


def torch_dtype(dtype: str, device: torch.device) -> torch.dtype:
    """The torch dtype for a torch backend dtype name; ``"auto"`` is bfloat16 on CUDA and float32 elsewhere."""
    if dtype == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    return _TORCH_DTYPES[dtype]
