"""Where ingest time goes (issue 63 item 2, first step): the encoder's stages and the forward pass's operators.

Encodes a small sample of manual pages (the shared dev sets, ``../shared/data``, else the shipped test corpus,
``tests/fixtures/data``) with the default encoder (torch float32), torch bfloat16, and its ONNX float32 and int8
runtimes, timing each stage of ``encode_documents``: tokenisation,
landmark planning, window packing, padding, the forward pass, and the rest (scatter of states, pooling,
projection); it counts the padded tokens. Then it profiles the same padded batches operator by operator: torch's
profiler (self CPU time by aten operator) and ONNX Runtime's (time by node type). Writes
``benchmarks/results/ingest_profile.md``::

    python benchmarks/ingest_profile.py [--docs 64] [--long 4] [--data DIR]
"""

from __future__ import annotations

import argparse
import collections
import datetime as dt
import gzip
import json
import os
import platform
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from lmk_rag.encoder import LandmarkEncoder
from lmk_rag.research import encoder_steps as encoder_module

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "benchmarks" / "results" / "ingest_profile.md"
SHARED = REPO.parent / "shared" / "data"
DATA = SHARED if SHARED.is_dir() else REPO / "tests" / "fixtures" / "data"
FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16", "amx_int8")


def texts(data: Path, short: int, long: int) -> list[str]:
    """``short`` manpages-short passages (over 1,200 chars) and ``long`` manpages-longdoc pages of a data folder."""
    out = []
    for name, count in (("manpages-short", short), ("manpages-longdoc", long)):
        with gzip.open(data / name / "corpus.jsonl.gz", "rt") as lines:
            found = [text for text in (json.loads(line)["text"] for line in lines) if len(text) > 1200]
        out += found[:count]
    return out


class Timed:
    """A runtime that times its calls and keeps the padded batches it ran."""

    def __init__(self, runtime: Any) -> None:
        self.runtime, self.seconds, self.batches = runtime, 0.0, []

    def __call__(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
        start = time.perf_counter()
        states = self.runtime(input_ids, attention_mask)
        self.seconds += time.perf_counter() - start
        self.batches.append((input_ids, attention_mask))
        return states


def stages(encoder: LandmarkEncoder, sample: list[str]) -> dict[str, Any]:
    """Seconds of each stage of one ``encode_documents`` call, and the token counts."""
    timed = Timed(encoder.runtime)
    encoder.runtime = timed
    spent: dict[str, float] = collections.defaultdict(float)
    originals = {name: getattr(encoder_module, name) for name in ("tokenize_with_offsets", "plan_landmarks",
                                                                  "build_windows", "pad_windows")}

    def timing(name: str) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return originals[name](*args, **kwargs)
            finally:
                spent[name] += time.perf_counter() - start
        return call

    for name in originals:
        setattr(encoder_module, name, timing(name))
    try:
        start = time.perf_counter()
        encoder.encode_documents(sample, show_progress_bar=False)
        total = time.perf_counter() - start
    finally:
        for name, function in originals.items():
            setattr(encoder_module, name, function)
        encoder.runtime = timed.runtime
    real = sum(int(mask.sum()) for _, mask in timed.batches)
    padded = sum(mask.size for _, mask in timed.batches)
    rest = total - timed.seconds - sum(spent.values())
    return {"total": total, "forward": timed.seconds, **spent, "rest": rest, "real": real, "padded": padded,
            "batches": timed.batches}


def torch_operators(encoder: LandmarkEncoder, batches: list[tuple[np.ndarray, np.ndarray]]) -> list[tuple[str, float]]:
    """Self CPU seconds by aten operator over the batches (torch's profiler)."""
    import torch

    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profile:
        for ids, mask in batches:
            encoder.runtime(ids, mask)
    events = [(event.key, event.self_cpu_time_total / 1e6) for event in profile.key_averages()]
    return sorted(events, key=lambda item: -item[1])


def onnx_operators(path: Path, threads: int, batches: list[tuple[np.ndarray, np.ndarray]]) -> list[tuple[str, float]]:
    """Seconds by node type over the batches (ONNX Runtime's profiler)."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    options.enable_profiling = True
    with tempfile.TemporaryDirectory() as folder:
        options.profile_file_prefix = str(Path(folder) / "ort")
        session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        for ids, mask in batches:
            session.run(["states"], {"input_ids": ids, "attention_mask": mask})
        events = json.loads(Path(session.end_profiling()).read_text())
    spent: dict[str, float] = collections.defaultdict(float)
    for event in events:
        if event.get("cat") == "Node" and event["name"].endswith("_kernel_time"):
            spent[event["args"]["op_name"]] += event["dur"] / 1e6
    return sorted(spent.items(), key=lambda item: -item[1])


def machine() -> str:
    """CPU model, cores and vector flags."""
    info = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    model = next((line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("model name")),
                 platform.processor() or platform.machine())
    flags = set(next((line.split(":", 1)[1].split() for line in info.splitlines() if line.startswith("flags")), []))
    return f"{model}, {os.cpu_count()} cores; " + ", ".join(f"{flag} {'yes' if flag in flags else 'no'}"
                                                           for flag in FLAGS)


def main() -> None:
    """Profile and write the report."""
    import torch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=64, help="manpages-short passages")
    parser.add_argument("--long", type=int, default=4, help="manpages-longdoc pages")
    parser.add_argument("--data", type=Path, default=DATA, help="the folder holding the BEIR sets")
    args = parser.parse_args()
    sample = texts(args.data, args.docs, args.long)
    started, load_start = dt.datetime.now(dt.timezone.utc), os.getloadavg()
    encoders = {"torch float32 (default)": LandmarkEncoder(),
                "torch bfloat16": LandmarkEncoder(dtype="bfloat16"),
                "onnx float32": LandmarkEncoder(backend="onnx"),
                "onnx int8": LandmarkEncoder(backend="onnx", dtype="int8")}
    for encoder in encoders.values():  # warm-up: first calls allocate
        encoder.encode_documents(sample[:2], show_progress_bar=False)
    measured = {name: stages(encoder, sample) for name, encoder in encoders.items()}
    operators = {name: torch_operators(encoders[name], measured[name]["batches"])
                 for name in ("torch float32 (default)", "torch bfloat16")}
    for name in ("onnx float32", "onnx int8"):
        operators[name] = onnx_operators(encoders[name].runtime.path, torch.get_num_threads(),
                                         measured[name]["batches"])
    load_end = os.getloadavg()
    first = next(iter(measured.values()))
    lines = [
        "# Where ingest time goes (`benchmarks/ingest_profile.py`)", "",
        f"Date: {started:%Y-%m-%d %H:%M} UTC. Machine: {machine()}. torch {torch.__version__} "
        f"({torch.get_num_threads()} threads), onnxruntime (intra-op threads: the same). Load average at the start "
        f"{', '.join(f'{v:.2f}' for v in load_start)}, at the end {', '.join(f'{v:.2f}' for v in load_end)} (a shared "
        "machine: the shares matter more than the seconds).", "",
        f"Sample: {args.docs} manpages-short passages and {args.long} manpages-longdoc pages ({args.data.name}), "
        f"{sum(map(len, sample)) / 1e3:.0f}k chars; the default encoder's settings (k=64, 256-token windows, batch "
        f"32): {first['real']} real tokens in {len(first['batches'])} batches, {first['padded']} with padding "
        f"({100 * (1 - first['real'] / first['padded']):.1f}% padding). One `encode_documents` call per runtime "
        "after a warm-up.", "",
        "| stage | " + " | ".join(measured) + " |", "|---|" + "---|" * len(measured),
    ]
    names = {"tokenize_with_offsets": "tokenisation (fast tokenizer, offsets)", "plan_landmarks": "landmark planning",
             "build_windows": "window packing", "pad_windows": "padding (numpy)", "forward": "forward pass",
             "rest": "the rest: scatter of states into chunks, pooling, projection"}
    for key, label in names.items():
        lines.append(f"| {label} | " + " | ".join(
            f"{run[key]:.2f} s ({100 * run[key] / run['total']:.1f}%)" for run in measured.values()) + " |")
    lines.append("| total | " + " | ".join(f"{run['total']:.2f} s, {run['real'] / run['total']:.0f} tok/s"
                                           for run in measured.values()) + " |")
    for name, ranked in operators.items():
        total = sum(seconds for _, seconds in ranked)
        lines += ["", f"Forward pass, {name}: the operators by {'self CPU' if 'torch' in name else 'kernel'} time "
                  f"(profiled run, {total:.2f} s in all; the top 10):", "", "| operator | s | share |", "|---|---|---|"]
        lines += [f"| {op} | {seconds:.3f} | {100 * seconds / total:.1f}% |" for op, seconds in ranked[:10]]
    OUT.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
