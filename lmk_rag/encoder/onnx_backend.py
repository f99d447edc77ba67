"""The ONNX Runtime backend: token states from an exported model on the CPU (needs the ``onnx`` extra)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from lmk_rag.errors import needs_extra

with needs_extra("backend='onnx'", "onnx"):
    import onnxruntime

from lmk_rag.encoder.onnx_export import exported_model


class OnnxStates:
    """Final hidden states from an ONNX Runtime session over the exported model (float32 or int8).

    :param model_path: the Hugging Face model folder (exported on first use, see :mod:`lmk_rag.encoder.onnx_export`).
    :param dtype: ``"float32"`` or ``"int8"``.
    :param threads: intra-op threads of the session (the torch backend's ``torch.get_num_threads()`` by default
        in :class:`lmk_rag.LandmarkEncoder`, so one setting governs both backends).
    """

    def __init__(self, model_path: Path, dtype: str, threads: int) -> None:
        self.path = exported_model(model_path, dtype)
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
