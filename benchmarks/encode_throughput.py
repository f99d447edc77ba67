"""Tokens/s of ``LandmarkEncoder.encode_documents`` vs ``SentenceTransformer.encode`` in the same run.

Same texts (manual-page passages cut to fit the model window, so both encode every token), same
model (all-MiniLM-L6-v2) and max length (256), same batch size. Runs are interleaved and the median
of the repeats is reported, so load on the machine hits both sides alike. Target: ratio >= 0.95 on
CPU (landmarks add about 1/k tokens).

    python benchmarks/encode_throughput.py [--texts 256] [--repeats 3] [--granularity 32]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import statistics
import time
from datetime import datetime, timezone
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
from sentence_transformers import SentenceTransformer  # noqa: E402

from lmk_rag.encoder import DEFAULT_GRANULARITY, LandmarkEncoder  # noqa: E402

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "manpages-short" / "corpus.jsonl.gz"
RESULTS = Path(__file__).resolve().parent / "results" / "encode_throughput.md"


def load_texts(encoder: LandmarkEncoder, count: int, max_tokens: int) -> list[str]:
    """Manual-page passages, each cut at a token boundary to at most ``max_tokens`` tokens."""
    texts = []
    with gzip.open(DATA, "rt") as lines:
        for line in lines:
            text = json.loads(line)["text"]
            offsets = encoder.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
            texts.append(text[: offsets[min(len(offsets), max_tokens) - 1][1]])
            if len(texts) == count:
                return texts
    return texts


def main() -> None:
    """Run the benchmark, print the ratio and write the results file."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--granularity", type=int, default=DEFAULT_GRANULARITY)
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args()

    encoder = LandmarkEncoder(granularity=args.granularity, batch_size=args.batch_size, device="cpu")
    model = SentenceTransformer(str(encoder.model_path), device="cpu")
    model.max_seq_length = encoder.max_length
    # landmarks take k/(k+1) of the window, so cut texts to what both encode without truncation
    texts = load_texts(encoder, args.texts, encoder.max_length - 2 - encoder.max_length // (args.granularity + 1))
    n_tokens = sum(len(ids) for ids in encoder.tokenizer(texts, add_special_tokens=False)["input_ids"])

    ours, theirs = [], []
    encoder.encode_documents(texts[:8])
    model.encode(texts[:8])
    for _ in range(args.repeats):
        start = time.perf_counter()
        model.encode(texts, batch_size=args.batch_size)
        theirs.append(n_tokens / (time.perf_counter() - start))
        start = time.perf_counter()
        encoder.encode_documents(texts)
        ours.append(n_tokens / (time.perf_counter() - start))
    ratio = statistics.median(ours) / statistics.median(theirs)

    machine = f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPU cores, torch {torch.__version__}"
    date = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    report = (
        f"# encode throughput: LandmarkEncoder vs SentenceTransformer\n\n"
        f"Machine: {machine} (CPU, no GPU). Date: {date}.\n"
        f"{len(texts)} manpages-short passages, {n_tokens} content tokens, all-MiniLM-L6-v2, max length "
        f"{encoder.max_length}, batch {args.batch_size}, k={args.granularity}, median of {args.repeats} interleaved runs.\n\n"
        f"| encoder | tokens/s |\n|---|---|\n"
        f"| SentenceTransformer.encode | {statistics.median(theirs):,.0f} |\n"
        f"| LandmarkEncoder.encode_documents | {statistics.median(ours):,.0f} |\n\n"
        f"Ratio (ours / sentence-transformers): **{ratio:.3f}** (target >= 0.95).\n"
    )
    print(report)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(report)


if __name__ == "__main__":
    main()
