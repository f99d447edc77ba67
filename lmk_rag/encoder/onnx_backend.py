"""The ONNX Runtime backend: token states from an exported model on the CPU (needs the ``onnx`` extra), tokenized by
the tokenizer saved with the export; once the export exists it imports neither torch nor transformers."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from lmk_rag.errors import needs_extra

with needs_extra("backend='onnx'", "onnx"):
    import onnxruntime

from lmk_rag.encoder.onnx_export import exported_model
from lmk_rag.encoder.runtime import Runtime
from lmk_rag.encoder.tokenizer import SavedTokenizer


class OnnxStates:
    """Final hidden states from an ONNX Runtime session over an exported model (float32 or int8).

    :param path: the ``.onnx`` file (:func:`~lmk_rag.encoder.onnx_export.exported_model`).
    :param threads: intra-op threads of the session (0: ONNX Runtime's default, one per physical core).
    """

    def __init__(self, path: Path, threads: int) -> None:
        self.path = path
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        self.session = onnxruntime.InferenceSession(str(self.path), options, providers=["CPUExecutionProvider"])

    def __call__(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
        """Final hidden states of a padded batch.

        :param input_ids: token ids, int64, shape (batch, tokens).
        :param attention_mask: 1 for real tokens, 0 for padding, int64, shape (batch, tokens).
        :return: float32 states, shape (batch, tokens, dim).
        """
        (states,) = self.session.run(["states"], {"input_ids": input_ids, "attention_mask": attention_mask})
        return states


def load_onnx(model_path: Path, dtype: str) -> Runtime:
    """The exported model of a folder in a precision (exported on first use) and the tokenizer saved with it.

    The session's threads are torch's (``torch.get_num_threads()``) when torch is already imported, so one setting
    governs both backends; else ONNX Runtime's default, one per physical core, as torch's default is.

    :raises ModelExportError: when the export is missing and cannot be made here.
    """
    path = exported_model(model_path, dtype)
    tokenizer, config = SavedTokenizer.load(path.parent)
    torch = sys.modules.get("torch")
    states = OnnxStates(path, torch.get_num_threads() if torch is not None else 0)
    return Runtime(tokenizer, config, states, None, "cpu")
