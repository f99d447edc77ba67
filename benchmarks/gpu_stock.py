"""The stock LlamaIndex baselines' node embeddings of a large set, computed on a lent GPU, in three steps.

The baselines (``llamaindex-chunked``, ``-fused`` and the quality report's tuned row) embed ``SentenceSplitter``
nodes with ``HuggingFaceEmbedding``; on manpages-needle/L32768 (48,734 nodes of up to 250 tokens) that takes 97
minutes on a 2-core CPU and seconds on an H200. The embeddings land in the eval cache under the key the pipelines
look up, so ``benchmarks/report.py`` then runs those rows here without encoding.

1. ``prepare`` (here): split the set with the baselines' splitter and write the node texts and the base model in
   float16 (the device's 64 MiB working tree holds no float32 MiniLM beside the texts) to ``.gpu_stock``.
2. ``run`` (there): embed the texts as ``HuggingFaceEmbedding`` does with this model (sentence-transformers'
   Transformer, mean pooling over the attention mask, L2 normalisation, 256 positions), computing in float32
   without TF32, and write them as float16 parts under the device's 16 MiB a file.
3. ``load`` (here): join the parts and store them in the eval cache for the same node texts (split again here).

    python benchmarks/gpu_stock.py prepare [--set manpages-needle/L32768]
    # device tool: run(command="python3 benchmarks/gpu_stock.py run --out $OUT", carry=[".gpu_stock"])
    python benchmarks/gpu_stock.py load /work/.device/.../  [--set ...]

The float16 weights and float16 output keep each vector within a cosine of 0.999999 of the CPU's float32
``HuggingFaceEmbedding`` on L32768 (``load`` measures it on a sample and prints it). 2026-12-04's run and the
rows it gave: benchmarks/results/finetune.md ("Second GPU session").
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import time
from pathlib import Path

import numpy as np
from gpu_finetune import ignore_in_git, read_parts, save_half, write_parts

REPO = Path(__file__).resolve().parents[1]
CARRY = REPO / ".gpu_stock"
DEFAULT_SET = "manpages-needle/L32768"
#: The parts the embeddings come back in (float16, ``gpu_finetune.write_parts``).
PARTS = "embeddings.f16"
#: Node texts per forward pass on the device.
BATCH = 512
#: Node texts ``load`` embeds here with ``HuggingFaceEmbedding`` to measure the difference.
CHECK_SAMPLE = 64


def _node_texts(name: str) -> list[str]:
    """The baselines' node texts of a whole set, in the order ``llamaindex-chunked`` embeds them."""
    from report import set_folder
    from stock_pipelines import make_splitter, node_texts, split_documents

    from lmk_rag.encoder import resolve_model_path
    from lmk_rag.eval import load_beir

    dataset = load_beir(set_folder(name), name=name)
    docs = [text for text in dataset.doc_texts if text.strip()]  # as report.evaluate_tuned indexes them
    return node_texts(split_documents(docs, make_splitter(resolve_model_path(None))))


def prepare(carry: Path, name: str) -> None:
    """Write the set's node texts and the packaged MiniLM in float16 to ``carry``."""
    from lmk_rag.encoder import resolve_model_path

    if carry.exists():
        shutil.rmtree(carry)
    save_half(resolve_model_path(None), carry / "model")
    texts = _node_texts(name)
    with gzip.open(carry / "texts.json.gz", "wt", encoding="utf-8") as handle:
        json.dump(texts, handle)
    ignore_in_git(carry)
    size = sum(path.stat().st_size for path in carry.rglob("*") if path.is_file())
    print(f"{carry}: {len(texts)} node texts, {size / 2**20:.1f} MiB")


def embed(texts: list[str], model_dir: Path, device: str) -> np.ndarray:
    """``HuggingFaceEmbedding(max_length=256)``'s vectors of ``texts`` with transformers alone (the device has no
    sentence-transformers): mean of the last hidden states over the attention mask, L2-normalised, float32."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModel.from_pretrained(model_dir, dtype=torch.float32).to(device).eval()
    order = sorted(range(len(texts)), key=lambda index: len(texts[index]))
    vectors = np.zeros((len(texts), model.config.hidden_size), dtype=np.float32)
    with torch.inference_mode():
        for start in range(0, len(order), BATCH):
            batch = order[start:start + BATCH]
            tokens = tokenizer([texts[index] for index in batch], padding=True, truncation=True, max_length=256,
                               return_tensors="pt").to(device)
            states = model(**tokens).last_hidden_state
            mask = tokens["attention_mask"].unsqueeze(-1).to(states.dtype)
            pooled = (states * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            vectors[batch] = torch.nn.functional.normalize(pooled, dim=-1).cpu().numpy()
    return vectors


def run(carry: Path, out: Path) -> None:
    """Embed the carried node texts and write ``embeddings.f16.partN`` and ``embed.json`` to ``out``."""
    import torch

    with gzip.open(carry / "texts.json.gz", "rt", encoding="utf-8") as handle:
        texts = json.load(handle)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    start = time.perf_counter()
    vectors = embed(texts, carry / "model", device)
    seconds = time.perf_counter() - start
    write_parts(vectors.astype(np.float16).tobytes(), out, PARTS)
    hardware = torch.cuda.get_device_name(0) if device == "cuda" else "cpu"
    (out / "embed.json").write_text(json.dumps({"texts": len(texts), "seconds": round(seconds, 1),
                                                "hardware": hardware}))
    print(f"{len(texts)} texts in {seconds:.1f} s on {hardware}")


def load(parts: Path, name: str, cache: Path | None) -> None:
    """Join the parts, compare a sample with ``HuggingFaceEmbedding`` here, store the embeddings in the eval cache
    (None: the quality report's) under the key ``llamaindex-chunked`` looks up for this set's node texts."""
    from llama_index.embeddings.huggingface import HuggingFaceEmbedding
    from report import CACHE
    from stock_pipelines import MAX_LENGTH, embedding_key

    from lmk_rag.encoder import resolve_model_path
    from lmk_rag.eval import cached_arrays

    texts = _node_texts(name)
    vectors = np.frombuffer(read_parts(parts, PARTS), dtype=np.float16).reshape(len(texts), -1).astype(np.float32)
    model_path = resolve_model_path(None)
    sample = np.random.default_rng(0).choice(len(texts), size=min(CHECK_SAMPLE, len(texts)), replace=False)
    stock = np.asarray(HuggingFaceEmbedding(model_name=str(model_path), max_length=MAX_LENGTH)
                       .get_text_embedding_batch([texts[index] for index in sample]), dtype=np.float32)
    cosines = np.sum(stock * vectors[sample], axis=1) / np.linalg.norm(vectors[sample], axis=1)
    print(f"{len(texts)} vectors; against HuggingFaceEmbedding on {len(sample)}: min cosine {cosines.min():.6f}")
    result = cached_arrays(cache or CACHE, embedding_key(model_path), texts,
                           lambda: {"embeddings": vectors})
    print(f"stored: {result.path}")


def main() -> None:
    """Command line: prepare | run | load."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    prep = commands.add_parser("prepare", help="write the node texts and the model to the carry folder (here)")
    prep.add_argument("--carry", type=Path, default=CARRY)
    prep.add_argument("--set", default=DEFAULT_SET)
    go = commands.add_parser("run", help="embed the node texts (on the device)")
    go.add_argument("--carry", type=Path, default=CARRY)
    go.add_argument("--out", type=Path, required=True)
    back = commands.add_parser("load", help="store the returned embeddings in the eval cache (here)")
    back.add_argument("parts", type=Path, help="the folder holding embeddings.f16.part*")
    back.add_argument("--set", default=DEFAULT_SET)
    back.add_argument("--cache", type=Path, default=None, help="the eval cache (default: the quality report's)")
    args = parser.parse_args()
    if args.command == "prepare":
        prepare(args.carry, args.set)
    elif args.command == "run":
        run(args.carry, args.out)
    else:
        load(args.parts, args.set, args.cache)


if __name__ == "__main__":
    main()
