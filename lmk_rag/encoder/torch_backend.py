"""The torch backend: token states from a Hugging Face torch model on any device, and the devices it runs on."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from transformers import AutoConfig, AutoModel, AutoTokenizer

from lmk_rag.encoder.runtime import Runtime
from lmk_rag.errors import InvalidInputError

_TORCH_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


class TorchStates:
    """Final hidden states from a Hugging Face torch model (in its own dtype, returned as float32).

    :param model: the model, on ``device`` and in eval mode.
    :param device: where the model runs.
    """

    def __init__(self, model: torch.nn.Module, device: torch.device) -> None:
        self.model = model
        self.device = device

    def __call__(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
        """Final hidden states of a padded batch (see :class:`~lmk_rag.encoder.runtime.TokenStates`)."""
        with torch.inference_mode():
            output = self.model(
                input_ids=torch.from_numpy(input_ids).to(self.device),
                attention_mask=torch.from_numpy(attention_mask).to(self.device),
            )
        return output.last_hidden_state.float().cpu().numpy()


def load_torch(model_path: Path, dtype: str, device: torch.device) -> Runtime:
    """transformers' tokenizer and config of a model folder, and its torch model in a dtype, on a device, in eval
    mode."""
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    config = AutoConfig.from_pretrained(model_path)
    model = AutoModel.from_pretrained(model_path, config=config, dtype=torch_dtype(dtype, device))
    model.to(device).eval()
    return Runtime(tokenizer, config, TorchStates(model, device), model, device)


def torch_dtype(dtype: str, device: torch.device) -> torch.dtype:
    """The torch dtype for a torch backend dtype name; ``"auto"`` is bfloat16 on CUDA and float32 elsewhere."""
    if dtype == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    return _TORCH_DTYPES[dtype]


def torch_device(name: str | None) -> torch.device:
    """The torch device called ``name`` (None: the best available: cuda, then mps, then cpu), checked to exist.

    :raises InvalidInputError: for an unknown device name, or a CUDA/MPS device this machine lacks.
    """
    name = name or _best_device()
    try:
        device = torch.device(name)
    except (RuntimeError, TypeError, ValueError) as error:
        raise InvalidInputError(f"device={name!r} is not a torch device ({error}); use e.g. 'cpu' or 'cuda'") from None
    available = {
        "cpu": True,
        "cuda": torch.cuda.is_available() and (device.index or 0) < torch.cuda.device_count(),
        "mps": getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available(),
    }
    if not available.get(device.type, True):  # other accelerators: torch says when it loads the model
        raise InvalidInputError(f"device={name!r} is not available on this machine; leave device=None to pick one")
    return device


def _best_device() -> str:
    """cuda, then mps, then cpu."""
    if torch.cuda.is_available():
        return "cuda"
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return "mps"
    return "cpu"
