"""Speed and memory of a long-context model: a random-weight ModernBERT with ModernBERT-base's dimensions (22 layers,
768 hidden, 12 heads, 8192 positions: the same FLOPs as the real one; weights do not change speed) at 512, 2048 and
8192-token windows, lmk-rag (``LandmarkEncoder``, granularity 64, document context) against
``SentenceTransformer.encode`` on the same model and the same tokens (the documents cut at token boundaries into
pieces of one window). Issue 44, item 5.

Each (encoder, window) runs in its own process, so its peak RSS (``ru_maxrss``) is its own; tokens/s counts content
tokens (no special tokens, landmarks or prompts). The texts are the manpages-longdoc documents of the test fixtures
(``tests/fixtures/data``), joined and cut into documents of ``--doc-tokens`` tokens. The table goes to
``benchmarks/results/long_context_throughput.md`` with the CPU model, its vector flags and the thread count.

    python benchmarks/long_context_throughput.py                                      # full run (long: minutes each)
    python benchmarks/long_context_throughput.py --docs 1 --doc-tokens 1024 --windows 512 --output /tmp/smoke.md
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

HERE = Path(__file__).resolve().parent
FIXTURE_CORPUS = HERE.parent / "tests" / "fixtures" / "data" / "manpages-longdoc" / "corpus.jsonl.gz"
RESULTS = HERE / "results" / "long_context_throughput.md"
WINDOWS = (512, 2048, 8192)
ENCODERS = ("lmk-rag", "sentence-transformers")
CPU_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_bf16")


def build_model(folder: Path) -> Path:
    """A random ModernBERT-base-sized model with the packaged MiniLM tokenizer, saved in the sentence-transformers
    layout (mean pooling, Normalize, 8192-token window)."""
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer
    from transformers import AutoTokenizer, ModernBertConfig, ModernBertModel

    from lmk_rag.encoder import resolve_model_path

    tokenizer = AutoTokenizer.from_pretrained(resolve_model_path(None))
    config = ModernBertConfig(  # ModernBERT-base: the defaults are its dimensions; the vocabulary is MiniLM's
        vocab_size=tokenizer.vocab_size, pad_token_id=tokenizer.pad_token_id, cls_token_id=tokenizer.cls_token_id,
        sep_token_id=tokenizer.sep_token_id, bos_token_id=tokenizer.cls_token_id, eos_token_id=tokenizer.sep_token_id,
    )
    assert (config.num_hidden_layers, config.hidden_size, config.max_position_embeddings) == (22, 768, 8192)
    torch.manual_seed(0)
    hf = folder / "hf"
    ModernBertModel(config).save_pretrained(hf)
    tokenizer.save_pretrained(hf)
    transformer = Transformer(str(hf), max_seq_length=8192)
    modules = [transformer, Pooling(transformer.get_embedding_dimension(), pooling_mode="mean"), Normalize()]
    SentenceTransformer(modules=modules, device="cpu").save(str(folder / "st"))
    return folder / "st"


def documents(tokenizer: object, count: int, doc_tokens: int) -> list[str]:
    """``count`` documents of ``doc_tokens`` tokens each, cut from the fixture corpus joined end to end."""
    with gzip.open(FIXTURE_CORPUS, "rt") as lines:
        corpus = "\n\n".join(json.loads(line)["text"] for line in lines)
    text = corpus
    while True:
        encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True, verbose=False)
        offsets = encoded["offset_mapping"]
        if len(offsets) >= count * doc_tokens:
            break
        text = text + "\n\n" + corpus
    return [text[offsets[i * doc_tokens][0]:offsets[(i + 1) * doc_tokens - 1][1]] for i in range(count)]


def pieces(tokenizer: object, text: str, max_tokens: int) -> list[str]:
    """A text cut at token boundaries into consecutive pieces of at most ``max_tokens`` tokens."""
    offsets = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True, verbose=False)["offset_mapping"]
    return [text[offsets[start][0]:offsets[min(start + max_tokens, len(offsets)) - 1][1]]
            for start in range(0, len(offsets), max_tokens)]


def run_one(model: Path, encoder_name: str, window: int, docs: int, doc_tokens: int) -> dict[str, float]:
    """Encode the documents once with one encoder at one window (in this process): tokens/s and peak RSS."""
    import torch

    if encoder_name == "lmk-rag":
        from lmk_rag.encoder import LandmarkEncoder

        encoder = LandmarkEncoder(model, granularity=64, max_length=window, projection=None, device="cpu")
        texts = documents(encoder.tokenizer, docs, doc_tokens)
        encoder.encode_documents(texts[0][:2000])  # warm-up
        start = time.perf_counter()
        encoder.encode_documents(texts)
    else:
        from sentence_transformers import SentenceTransformer

        st = SentenceTransformer(str(model), device="cpu")
        st.max_seq_length = window
        texts = documents(st.tokenizer, docs, doc_tokens)
        cut = [piece for text in texts for piece in pieces(st.tokenizer, text, window - 2)]
        st.encode([texts[0][:2000]])  # warm-up
        start = time.perf_counter()
        st.encode(cut, batch_size=max(1, 16384 // window))
    seconds = time.perf_counter() - start
    return {"tokens_per_s": docs * doc_tokens / seconds, "seconds": seconds, "threads": torch.get_num_threads(),
            "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def cpu_description() -> str:
    """The CPU model and which of :data:`CPU_FLAGS` it has."""
    info = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").is_file() else ""
    model = next((line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("model name")),
                 platform.processor() or "unknown")
    flags = next((line.split(":", 1)[1].split() for line in info.splitlines() if line.startswith("flags")), [])
    return f"{model}; flags: {', '.join(flag for flag in CPU_FLAGS if flag in flags) or 'none of ' + str(CPU_FLAGS)}"


def main() -> None:
    """Build the model, run every (encoder, window) in a subprocess, write the table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=4, help="documents per run")
    parser.add_argument("--doc-tokens", type=int, default=8192, help="tokens per document")
    parser.add_argument("--windows", type=int, nargs="+", default=list(WINDOWS))
    parser.add_argument("--output", type=Path, default=RESULTS)
    parser.add_argument("--one", nargs=3, metavar=("MODEL", "ENCODER", "WINDOW"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        model, encoder_name, window = args.one
        print(json.dumps(run_one(Path(model), encoder_name, int(window), args.docs, args.doc_tokens)))
        return
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        model = build_model(Path(folder))
        for window in args.windows:
            for encoder_name in ENCODERS:
                command = [sys.executable, __file__, "--docs", str(args.docs), "--doc-tokens", str(args.doc_tokens),
                           "--one", str(model), encoder_name, str(window)]
                output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
                result = json.loads(output.strip().splitlines()[-1])
                rows.append((window, encoder_name, result))
                print(window, encoder_name, result, flush=True)
    lines = [
        "# Long-context encoding speed (issue 44, item 5)",
        "",
        f"Random-weight ModernBERT-base dimensions (22 layers, 768 hidden, 8192 positions), float32, torch CPU; "
        f"{args.docs} documents of {args.doc_tokens} tokens; {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC.",
        f"CPU: {cpu_description()}; torch threads: {rows[0][2]['threads'] if rows else '?'}.",
        "Written by `benchmarks/long_context_throughput.py`.",
        "",
        "| window | encoder | tokens/s | seconds | peak RSS (MiB) |",
        "|---:|---|---:|---:|---:|",
        *[f"| {window} | {name} | {r['tokens_per_s']:.0f} | {r['seconds']:.1f} | {r['peak_rss_mib']:.0f} |"
          for window, name, r in rows],
        "",
    ]
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text("\n".join(lines))
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
