"""Export a transformer to ONNX (float32, or dynamically quantized to int8) once, into the user cache folder.

The graph maps ``input_ids`` and ``attention_mask`` (batch, tokens) to the final hidden states (batch, tokens,
dim), the token states the encoder pools. Recipe: ``torch.onnx.export`` (the dynamo exporter, which writes the
graph with onnxscript); for int8, ONNX Runtime's dynamic quantizer on every weight MatMul (int8 weights per
output channel, uint8 activations quantized per call); then onnxscript's ONNX Runtime fusions (attention,
skip layer norm, bias GELU), which the CPU kernels run fastest. Quantizing before fusing keeps the query, key
and value projections separate MatMuls, so they are quantized too.

Beside the graphs, the export saves the model's tokenizer as transformers loads it (:mod:`lmk_rag.encoder.tokenizer`).
Exporting needs torch and transformers; reading an export needs neither (the ONNX backend then imports onnxruntime
and tokenizers only).

Files are keyed by the model's content digest and :data:`RECIPE`; a file lock makes concurrent encoders wait for
the first export, and a file appears only complete (written beside its final name, then renamed).
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from filelock import FileLock

from lmk_rag.encoder.resolve import model_digest
from lmk_rag.encoder.tokenizer import saved, tokenizer_files
from lmk_rag.errors import InvalidInputError, ModelExportError, needs_extra
from lmk_rag.paths import user_cache_dir

RECIPE = 1
"""Version of the export recipe; bump it when the graph a model exports to changes, so old files are not reused."""

ONNX_DTYPES = ("float32", "int8")
"""The precisions an exported model runs in."""

_MAX_BYTES = 2**31 - 2**26
"""A single-file ONNX model (a protobuf) must stay under 2 GiB; this leaves room for the graph."""

_EXAMPLE_SHAPE = (2, 16)
"""Shape of the example input traced by the exporter; batch and sequence length stay dynamic."""


def onnx_cache_dir(model_path: Path) -> Path:
    """The folder holding a model's exported files: ``<user cache>/onnx/<model digest>-r<RECIPE>``.

    :param model_path: the model folder.
    :return: the folder (not created).
    """
    return user_cache_dir("onnx", f"{model_digest(model_path)}-r{RECIPE}")


def exported_model(model_path: Path, dtype: str) -> Path:
    """The ONNX file of a model in a precision, exported (and quantized) on first use with its tokenizer, then read
    from the cache.

    Needs no network: the weights come from ``model_path``. Needs torch and transformers only to export.

    :param model_path: the Hugging Face model folder.
    :param dtype: ``"float32"`` or ``"int8"``.
    :return: the ``.onnx`` file; its folder holds the saved tokenizer.
    :raises InvalidInputError: for another dtype, or a model too large for one ONNX file.
    :raises ModelExportError: when the exporter cannot convert the model, or the export is missing and torch or
        transformers, which make it, are not installed (the message names the command that makes it).
    """
    if dtype not in ONNX_DTYPES:
        raise InvalidInputError(f"an exported model runs in {' or '.join(map(repr, ONNX_DTYPES))}; got {dtype!r}")
    folder = onnx_cache_dir(model_path)
    target = folder / f"model-{dtype}.onnx"
    if target.is_file() and saved(folder):  # files appear only complete: no lock needed to read them
        return target
    _check_exporter(model_path, dtype, folder)
    folder.mkdir(parents=True, exist_ok=True)
    with FileLock(str(target) + ".lock"):
        if not target.is_file():
            _build(model_path, dtype, target)
        if not saved(folder):
            for name, text in tokenizer_files(model_path).items():
                with _partial_file(folder / name) as partial:
                    partial.write_text(text, encoding="utf-8")
    return target


def _check_exporter(model_path: Path, dtype: str, folder: Path) -> None:
    """Refuse to export where torch or transformers is missing, naming the command that makes the export.

    :raises ModelExportError: naming the missing package, the export's folder and the command.
    """
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ModuleNotFoundError as error:
        raise ModelExportError(
            f"no ONNX export of {model_path} ({dtype}) in {folder}, and {error.name}, which makes it, is not "
            f"installed: run `lmk-rag export-onnx --model {model_path} --dtype {dtype}` once where "
            "lmk-rag[encoder,onnx] is installed "
            "(with the same LMK_RAG_CACHE, or copy the folder here)"
        ) from None


def _build(model_path: Path, dtype: str, target: Path) -> None:
    """Export, quantize (int8), fuse and atomically write one model file."""
    with needs_extra("backend='onnx'", "onnx"):
        import onnx_ir as ir
        from onnxscript.rewriter.ort_fusions import optimize_for_ort

    model = _export(model_path)
    if dtype == "int8":
        model = _quantize(model)
    model, _ = optimize_for_ort(model)
    with _partial_file(target) as partial:
        ir.save(model, partial)


def _export(model_path: Path) -> Any:
    """The float32 graph of a model's final hidden states, as an ``onnx_ir`` model."""
    import torch
    from transformers import AutoModel

    model = AutoModel.from_pretrained(model_path, dtype=torch.float32).eval()
    size = sum(parameter.numel() * parameter.element_size() for parameter in model.parameters())
    if size > _MAX_BYTES:
        raise InvalidInputError(
            f"model {model_path} has {size / 2**30:.1f} GiB of weights, more than one ONNX file holds; "
            "use backend='torch'"
        )
    input_ids = torch.ones(_EXAMPLE_SHAPE, dtype=torch.long)
    attention_mask = torch.ones(_EXAMPLE_SHAPE, dtype=torch.long)
    batch, tokens = torch.export.Dim("batch"), torch.export.Dim("tokens")
    try:
        with _quiet():
            program = torch.onnx.export(
                _hidden_states(model),
                (input_ids, attention_mask),
                input_names=["input_ids", "attention_mask"],
                output_names=["states"],
                dynamic_shapes={"input_ids": {0: batch, 1: tokens}, "attention_mask": {0: batch, 1: tokens}},
                dynamo=True,
                verbose=False,
            )
    except Exception as error:  # the exporter raises many types (unsupported op, tracing, shape constraints)
        raise ModelExportError(
            f"cannot export {model_path} to ONNX ({type(error).__name__}: {error}); use backend='torch'"
        ) from error
    return program.model


def _quantize(model: Any) -> Any:
    """Dynamic int8 quantization of every MatMul with a weight operand: int8 weights per output channel."""
    with needs_extra("backend='onnx'", "onnx"):
        import onnx_ir as ir
        from onnxruntime.quantization import QuantType, quantize_dynamic

    with tempfile.TemporaryDirectory(prefix="lmk_rag_onnx_") as folder:
        output = Path(folder) / "int8.onnx"
        with _quiet():
            quantize_dynamic(
                ir.serde.serialize_model(model),
                output,
                op_types_to_quantize=["MatMul"],
                per_channel=True,
                weight_type=QuantType.QInt8,
            )
        return ir.load(output)


def _hidden_states(model: Any) -> Any:
    """A Hugging Face model with one output, the final hidden states (batch, tokens, dim): the graph to export."""
    import torch

    class HiddenStates(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            return self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

    return HiddenStates()


@contextlib.contextmanager
def _partial_file(target: Path) -> Iterator[Path]:
    """A path beside ``target`` that replaces ``target`` when the block succeeds (else is removed); the caller holds
    the target's lock, so the name is not contended."""
    partial = target.with_name(f"{target.name}.{os.getpid()}.partial")
    try:
        yield partial
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Keep the exporter's progress lines and advice and the quantizer's advice off the console.

    Records below ERROR that this thread logs are dropped at the root logger, at torch's loggers that have handlers
    (torch's exporter logs through them) and at those handlers; the quantizer logs through the root logger. A
    handler of our own on the root logger stops ``logging.warning`` from configuring console logging for the whole
    process. stdout is the process's: during an export (once per model and precision) all of it is dropped.
    """
    only_errors, handler = _ThreadBelowError(), logging.NullHandler()
    root = logging.getLogger()
    root.addHandler(handler)
    torch_loggers = [
        logger
        for name, logger in logging.Logger.manager.loggerDict.items()
        if name.split(".")[0] == "torch" and isinstance(logger, logging.Logger) and logger.handlers
    ]
    filtered = [item for logger in (root, *torch_loggers) for item in (logger, *logger.handlers)]
    for item in filtered:
        item.addFilter(only_errors)
    try:
        with open(os.devnull, "w") as devnull, contextlib.redirect_stdout(devnull), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        for item in filtered:
            item.removeFilter(only_errors)
        root.removeHandler(handler)


class _ThreadBelowError(logging.Filter):
    """Drops the records below ERROR that the creating thread logs."""

    def __init__(self) -> None:
        super().__init__()
        self.thread = threading.get_ident()

    def filter(self, record: logging.LogRecord) -> bool:
        """Keep records of other threads and errors."""
        return record.thread != self.thread or record.levelno >= logging.ERROR
