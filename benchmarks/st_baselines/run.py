"""sentence-transformers' torch, ONNX (float32 and dynamic int8 ``avx512_vnni``) and OpenVINO (float32, and its
default precision: bfloat16 on CPUs with it) backends, timed on the texts ``benchmarks/encode_throughput.py``
hands over; runs in the venv ``build_venv.sh`` builds.

    .venv/bin/python run.py REQUEST.json

REQUEST.json: ``model`` (a model folder), ``max_length``, ``batch_size``, ``repeats``, ``threads`` and
``workloads`` (name -> texts). The last line printed is JSON: encoder -> workload -> median seconds, or the reason
an encoder was skipped.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
from sentence_transformers import SentenceTransformer, export_dynamic_quantized_onnx_model


def loaders(folder: Path, threads: int) -> dict[str, Callable[[], SentenceTransformer]]:
    """How to load each baseline from a writable copy of the model folder (exports are written into it)."""

    def onnx(file_name: str | None = None) -> SentenceTransformer:
        import onnxruntime

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        kwargs = {"session_options": options, **({"file_name": file_name} if file_name else {})}
        return SentenceTransformer(str(folder), device="cpu", backend="onnx", model_kwargs=kwargs)

    def onnx_int8() -> SentenceTransformer:
        export_dynamic_quantized_onnx_model(onnx(), "avx512_vnni", str(folder))
        return onnx("onnx/model_qint8_avx512_vnni.onnx")

    def openvino(precision: str | None = None) -> SentenceTransformer:
        config = {"INFERENCE_NUM_THREADS": str(threads)}
        if precision:
            config["INFERENCE_PRECISION_HINT"] = precision
        return SentenceTransformer(str(folder), device="cpu", backend="openvino", model_kwargs={"ov_config": config})

    return {
        "sentence-transformers torch float32 (baseline venv)": lambda: SentenceTransformer(str(folder), device="cpu"),
        "sentence-transformers onnx float32": onnx,
        "sentence-transformers onnx int8 (avx512_vnni)": onnx_int8,
        "sentence-transformers openvino float32": lambda: openvino("f32"),
        # OpenVINO's CPU default computes in bfloat16 where the CPU has it (AVX512-BF16, AMX)
        "sentence-transformers openvino default precision": openvino,
    }


def main() -> None:
    """Time every baseline on every workload and print the JSON line."""
    request = json.loads(Path(sys.argv[1]).read_text())
    torch.set_num_threads(request["threads"])
    results: dict[str, dict[str, object]] = {}
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch) / "model"
        shutil.copytree(request["model"], folder)
        for name, load in loaders(folder, request["threads"]).items():
            try:
                model = load()
            except Exception as error:  # an exporter or runtime that does not install or run here: report why
                reason = f"skipped: {type(error).__name__}: {str(error).splitlines()[0][:200]}"
                results[name] = dict.fromkeys(request["workloads"], reason)
                continue
            model.max_seq_length = request["max_length"]
            results[name] = {}
            for workload, texts in request["workloads"].items():
                model.encode(texts[:4], batch_size=request["batch_size"])
                seconds = []
                for _ in range(request["repeats"]):
                    start = time.perf_counter()
                    model.encode(texts, batch_size=request["batch_size"])
                    seconds.append(time.perf_counter() - start)
                results[name][workload] = statistics.median(seconds)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
