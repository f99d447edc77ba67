"""The CPU's measured matrix-multiply peaks (float32, bfloat16, int8), the yardstick issue 63 item 2 reports the
encoder's speed against ("int8 and bfloat16 as shares of the machine's measured peaks").

Each precision: the best of a few GEMM shapes, the model's own (M = batch x 256 tokens rows against MiniLM's 384 x 384,
384 x 1536 and 1536 x 384 weights) and a large square one, on every core torch uses. float32 and bfloat16 through
``torch.matmul`` (oneDNN: AMX tiles where the CPU has them, else AVX-512 BF16 / FMA); int8 through ONNX Runtime's
``MatMulInteger`` (uint8 x int8 -> int32, MLAS: AMX or AVX-512 VNNI), the kernel the int8 export runs, and
``torch._int_mm`` where this torch has it on the CPU. One multiply-add counts as 2 operations. Prints a JSON line
(precision -> {"tops": best tera-ops/s, "shape": the best shape}) and a markdown table::

    python benchmarks/cpu_peaks.py [--seconds 1.0]
"""

from __future__ import annotations

import argparse
import functools
import json
import time
from collections.abc import Callable

import numpy as np
import onnxruntime
import torch
from onnx import TensorProto, helper

SHAPES = [(8192, 384, 384), (8192, 384, 1536), (8192, 1536, 384), (2048, 2048, 2048)]
"""(M, K, N): MiniLM's linear layers over a batch of 32 windows of 256 tokens, and a square one."""


def rate(run: Callable[[], object], flops: float, seconds: float) -> float:
    """Tera-operations per second of ``run`` (one call does ``flops``), best of repeated timed blocks."""
    run()
    best, spent = float("inf"), 0.0
    while spent < seconds:
        start = time.perf_counter()
        run()
        elapsed = time.perf_counter() - start
        best, spent = min(best, elapsed), spent + elapsed
    return flops / best / 1e12


def torch_rates(dtype: torch.dtype, seconds: float) -> dict[tuple[int, int, int], float]:
    """torch.matmul in a dtype, per shape."""
    out = {}
    for m, k, n in SHAPES:
        a, b = torch.randn(m, k).to(dtype), torch.randn(k, n).to(dtype)
        with torch.inference_mode():
            out[(m, k, n)] = rate(functools.partial(torch.matmul, a, b), 2.0 * m * k * n, seconds)
    return out


def int_mm_rates(seconds: float) -> dict[tuple[int, int, int], float]:
    """torch._int_mm (int8 x int8 -> int32) per shape; empty where this torch has no CPU kernel for it."""
    out = {}
    for m, k, n in SHAPES:
        a = torch.randint(-128, 127, (m, k), dtype=torch.int8)
        b = torch.randint(-128, 127, (k, n), dtype=torch.int8)
        try:
            out[(m, k, n)] = rate(functools.partial(torch._int_mm, a, b), 2.0 * m * k * n, seconds)
        except (RuntimeError, NotImplementedError):
            return {}
    return out


def ort_int8_rates(seconds: float) -> dict[tuple[int, int, int], float]:
    """ONNX Runtime MatMulInteger (uint8 activations x int8 weights -> int32) per shape."""
    out = {}
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = torch.get_num_threads()
    for m, k, n in SHAPES:
        weight = np.random.randint(-128, 127, (k, n), dtype=np.int8)
        graph = helper.make_graph(
            [helper.make_node("MatMulInteger", ["a", "w"], ["y"])], "mm",
            [helper.make_tensor_value_info("a", TensorProto.UINT8, [m, k])],
            [helper.make_tensor_value_info("y", TensorProto.INT32, [m, n])],
            [helper.make_tensor("w", TensorProto.INT8, [k, n], weight.tobytes(), raw=True)],
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        session = onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        a = np.random.randint(0, 255, (m, k), dtype=np.uint8)
        out[(m, k, n)] = rate(functools.partial(session.run, None, {"a": a}), 2.0 * m * k * n, seconds)
    return out


def main() -> None:
    """Measure, print the table and the JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=1.0, help="timing per shape and precision")
    args = parser.parse_args()
    measured = {
        "float32 (torch.matmul)": torch_rates(torch.float32, args.seconds),
        "bfloat16 (torch.matmul)": torch_rates(torch.bfloat16, args.seconds),
        "int8 (onnxruntime MatMulInteger)": ort_int8_rates(args.seconds),
        "int8 (torch._int_mm)": int_mm_rates(args.seconds),
    }
    print(f"{torch.get_num_threads()} threads, torch {torch.__version__}, onnxruntime {onnxruntime.__version__}, "
          f"oneDNN ISA {torch.backends.cpu.get_cpu_capability()}")
    print("| precision | " + " | ".join(f"{m}x{k}x{n}" for m, k, n in SHAPES) + " | peak TOPS |")
    print("|---|" + "---|" * (len(SHAPES) + 1))
    peaks = {}
    for name, rates in measured.items():
        if not rates:
            print(f"| {name} | " + "n/a | " * len(SHAPES) + "n/a |")
            continue
        shape, best = max(rates.items(), key=lambda item: item[1])
        peaks[name] = {"tops": round(best, 3), "shape": "x".join(map(str, shape))}
        print(f"| {name} | " + " | ".join(f"{rates[s]:.2f}" for s in SHAPES) + f" | {best:.2f} |")
    print(json.dumps(peaks))


if __name__ == "__main__":
    main()
