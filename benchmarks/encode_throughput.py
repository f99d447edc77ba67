"""Tokens/s of ``LandmarkEncoder`` on each backend and dtype vs ``SentenceTransformer.encode``, in one run.

Two workloads, the same tokens for every encoder: *passages* (manpages-short, each cut to fit one window, so
every encoder encodes every token) and *long documents* (manpages-longdoc texts of at least 1,024 tokens;
LandmarkEncoder encodes each whole document in windows, SentenceTransformer gets the same documents cut at token
boundaries into pieces of one window). tokens/s counts content tokens (no special tokens, no landmarks).

Encoders: SentenceTransformer torch float32 and bfloat16 (the model cast with ``.to(torch.bfloat16)``) in this
environment; LandmarkEncoder with backend torch (float32, bfloat16) and onnx (float32, int8); and
sentence-transformers' own ONNX (float32, int8 ``avx512_vnni``) and OpenVINO backends, which need optimum and so an
older transformers: they run from the separate venv that ``benchmarks/st_baselines/build_venv.sh`` builds
(``benchmarks/st_baselines/run.py``), or are reported as skipped with the reason. In-process encoders are interleaved
and the median of the repeats is reported, so load on the machine hits them alike; the venv's encoders run in one
block after them. Each row is also given as a share of the fastest sentence-transformers backend of the run (issue 63
item 2: a LandmarkEncoder runtime at >= 1.25x it). The header names the CPU's model and its AVX/AMX flags.

    python benchmarks/encode_throughput.py [--texts 256] [--long 16] [--repeats 3] [--threads N]
    python benchmarks/encode_throughput.py --texts 4 --long 1 --repeats 1 --output /tmp/smoke.md   # smoke run
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import gzip
import json
import os
import platform
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
from sentence_transformers import SentenceTransformer

from lmk_rag.encoder import DEFAULT_GRANULARITY, LandmarkEncoder
from lmk_rag.research import cpu_flags

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "encode_throughput.md"
BASELINE_PYTHON = HERE / "st_baselines" / ".venv" / "bin" / "python"
BASELINE_SCRIPT = HERE / "st_baselines" / "run.py"
LANDMARK_RUNTIMES = [("torch", "float32"), ("torch", "bfloat16"), ("onnx", "float32"), ("onnx", "int8")]
LONG_MIN_TOKENS = 1024


def read_corpus(name: str) -> Iterator[str]:
    """The texts of a dev set's corpus, in file order."""
    with gzip.open(DATA / name / "corpus.jsonl.gz", "rt") as lines:
        for line in lines:
            yield json.loads(line)["text"]


def cut(tokenizer: object, text: str, max_tokens: int) -> list[str]:
    """A text cut at token boundaries into consecutive pieces of at most ``max_tokens`` tokens."""
    offsets = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
    pieces, start = [], 0
    for first in range(0, len(offsets), max_tokens):
        end = offsets[min(first + max_tokens, len(offsets)) - 1][1]
        pieces.append(text[start:end])
        start = end
    return pieces


def workloads(encoder: LandmarkEncoder, passages: int, long: int, max_tokens: int) -> dict[str, dict]:
    """Each workload's texts for LandmarkEncoder, texts for SentenceTransformer, and content tokens."""
    tokenizer = encoder.tokenizer
    short = [cut(tokenizer, text, max_tokens)[0] for text, _ in zip(read_corpus("manpages-short"), range(passages))]
    documents = [text for text in read_corpus("manpages-longdoc")
                 if len(tokenizer(text, add_special_tokens=False)["input_ids"]) >= LONG_MIN_TOKENS][:long]
    out = {}
    for name, ours, theirs in (
        ("passages", short, short),
        ("long documents", documents, [piece for text in documents for piece in cut(tokenizer, text, max_tokens)]),
    ):
        if ours:
            tokens = sum(len(ids) for ids in tokenizer(ours, add_special_tokens=False)["input_ids"])
            out[name] = {"ours": ours, "theirs": theirs, "tokens": tokens}
    return out


def encode_documents(encoder: LandmarkEncoder, load: dict) -> object:
    """LandmarkEncoder's side of a workload."""
    return encoder.encode_documents(load["ours"])


def encode_pieces(model: SentenceTransformer, batch_size: int, load: dict) -> object:
    """SentenceTransformer's side of a workload."""
    return model.encode(load["theirs"], batch_size=batch_size)


def time_it(run: Callable[[dict], object], load: dict) -> float:
    """Seconds one run of a workload takes."""
    start = time.perf_counter()
    run(load)
    return time.perf_counter() - start


def run_baselines(model_path: Path, loads: dict[str, dict], args: argparse.Namespace) -> dict[str, dict]:
    """sentence-transformers' ONNX and OpenVINO backends from their venv: median seconds per workload, or the
    reason they were skipped."""
    if not BASELINE_PYTHON.is_file():
        venv = BASELINE_PYTHON.relative_to(HERE.parent)
        reason = f"skipped: no {venv} (benchmarks/st_baselines/build_venv.sh builds it)"
        return {"sentence-transformers onnx / openvino": dict.fromkeys(loads, reason)}
    with tempfile.TemporaryDirectory() as folder:
        request = Path(folder) / "request.json"
        request.write_text(json.dumps({
            "model": str(model_path), "max_length": args.max_length, "batch_size": args.batch_size,
            "repeats": args.repeats, "threads": torch.get_num_threads(),
            "workloads": {name: load["theirs"] for name, load in loads.items()},
        }))
        done = subprocess.run([str(BASELINE_PYTHON), str(BASELINE_SCRIPT), str(request)], capture_output=True,
                              text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        reason = f"skipped: the baseline venv failed ({last})"
        return {"sentence-transformers onnx / openvino": dict.fromkeys(loads, reason)}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    """Run the benchmark, print the table and write the results file."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=256, help="manpages-short passages")
    parser.add_argument("--long", type=int, default=16, help=f"manpages-longdoc texts of >= {LONG_MIN_TOKENS} tokens")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--granularity", type=int, default=DEFAULT_GRANULARITY)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=None, help="torch threads; the ONNX backend follows torch")
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()
    start_load = load_average()
    if args.threads:
        torch.set_num_threads(args.threads)

    encoders = {
        f"LandmarkEncoder {backend} {dtype}": LandmarkEncoder(
            granularity=args.granularity, batch_size=args.batch_size, device="cpu", backend=backend, dtype=dtype
        )
        for backend, dtype in LANDMARK_RUNTIMES
    }
    first = next(iter(encoders.values()))
    args.max_length = first.max_length
    model = SentenceTransformer(str(first.model_path), device="cpu")
    model.max_seq_length = first.max_length
    model_bf16 = SentenceTransformer(str(first.model_path), device="cpu").to(torch.bfloat16)
    model_bf16.max_seq_length = first.max_length
    # landmarks take 1/(k+1) of a window, so passages are cut to what every encoder encodes without truncation
    max_tokens = first.max_length - 2 - first.max_length // (args.granularity + 1)
    loads = workloads(first, args.texts, args.long, max_tokens)

    runs: dict[str, Callable[[dict], object]] = {
        "SentenceTransformer torch float32": functools.partial(encode_pieces, model, args.batch_size),
        "SentenceTransformer torch bfloat16": functools.partial(encode_pieces, model_bf16, args.batch_size),
        **{name: functools.partial(encode_documents, encoder) for name, encoder in encoders.items()},
    }
    seconds: dict[str, dict[str, list[float]]] = {name: {load: [] for load in loads} for name in runs}
    for load_name, load in loads.items():
        warm_up = {"ours": load["ours"][:4], "theirs": load["theirs"][:4]}
        for run in runs.values():
            run(warm_up)
        for _ in range(args.repeats):
            for name, run in runs.items():
                seconds[name][load_name].append(time_it(run, load))
    results: dict[str, dict[str, object]] = {
        name: {load: loads[load]["tokens"] / statistics.median(values) for load, values in per_load.items()}
        for name, per_load in seconds.items()
    }
    for name, per_load in run_baselines(first.model_path, loads, args).items():
        results[name] = {
            load: value if isinstance(value, str) else loads[load]["tokens"] / value for load, value in per_load.items()
        }
    report = render(results, loads, args, (start_load, load_average()))
    print(report)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(report)


def render(results: dict[str, dict[str, object]], loads: dict[str, dict], args: argparse.Namespace,
           load_average: tuple[str, str]) -> str:
    """The markdown report: tokens/s per encoder and workload, the ratio to SentenceTransformer torch float32 and to
    the fastest sentence-transformers backend of the run (issue 63 item 2's anchor)."""
    flags = ", ".join(sorted(flag for flag in cpu_flags() if flag.startswith(("avx", "amx"))))
    machine = (f"{cpu_model()}, {os.cpu_count()} CPU cores, {torch.get_num_threads()} torch threads, torch "
               f"{torch.__version__}; CPU flags: {flags or 'unknown'}")
    date = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    reference = results["SentenceTransformer torch float32"]
    fastest = {
        load: max((per_load[load] for name, per_load in results.items()
                   if name.lower().startswith("sentence") and not isinstance(per_load[load], str)), default=None)
        for load in loads
    }
    header = " | ".join(f"{name} tokens/s | x ST torch | x fastest ST" for name in loads)
    lines = [
        "# encode throughput: LandmarkEncoder backends vs SentenceTransformer\n",
        f"Machine: {machine} (CPU, no GPU). Date: {date}. Load average at the start / end: {load_average[0]} / "
        f"{load_average[1]} (a shared machine).",
        *(f"- {name}: {len(load['ours'])} texts, {load['tokens']} content tokens "
          f"(SentenceTransformer: {len(load['theirs'])} pieces)" for name, load in loads.items()),
        f"all-MiniLM-L6-v2, max length {args.max_length}, batch {args.batch_size}, k={args.granularity}, median of "
        f"{args.repeats} interleaved runs.\n",
        f"| encoder | {header} |",
        "|---|" + "---|---|---|" * len(loads),
    ]
    for name, per_load in results.items():
        cells = []
        for load in loads:
            value = per_load[load]
            if isinstance(value, str):
                cells.append(f"{value} | | ")
            else:
                cells.append(f"{value:,.0f} | {value / reference[load]:.2f} | {value / fastest[load]:.2f}")
        lines.append(f"| {name} | {' | '.join(cells)} |")
    lines.append("\nTarget (issue 63 item 2): a LandmarkEncoder runtime >= 1.25x the fastest sentence-transformers "
                 "backend, with no dev set moving by more than -0.005 nDCG@10.")
    return "\n".join(lines) + "\n"


def load_average() -> str:
    """The machine's 1, 5 and 15 minute load averages."""
    return ", ".join(f"{value:.2f}" for value in os.getloadavg())


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else the platform's processor or machine."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    return platform.processor() or platform.machine()


if __name__ == "__main__":
    main()
