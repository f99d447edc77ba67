"""benchmarks/gpu_stock.py end to end on this CPU, on a set shipped with the repo: the device half embeds the stock
baselines' node texts as ``HuggingFaceEmbedding`` does, and what comes back in float16 parts lands in the eval cache
where ``llamaindex-chunked`` finds it, so the pipeline embeds nothing."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

SET = "perlfaq-answers"  # shipped under benchmarks/data: no ../shared


@pytest.fixture(scope="module")
def gpu_stock(benchmark_script):
    """benchmarks/gpu_stock.py imported as a module."""
    return benchmark_script("gpu_stock")


def test_the_returned_embeddings_fill_the_cache_the_stock_pipeline_reads(gpu_stock, benchmark_script, tmp_path: Path,
                                                                         monkeypatch) -> None:
    from llama_index.embeddings.huggingface import HuggingFaceEmbedding

    from lmk_rag.encoder import resolve_model_path
    from lmk_rag.eval import PipelineOptions, get_pipeline, load_beir

    model = resolve_model_path(None)
    carry, out, cache = tmp_path / "carry", tmp_path / "out", tmp_path / "cache"
    out.mkdir()
    shutil.copytree(model, carry / "model")
    texts = gpu_stock._node_texts(SET)
    with gzip.open(carry / "texts.json.gz", "wt", encoding="utf-8") as handle:
        json.dump(texts, handle)
    # several parts, as 48k vectors make on the device
    monkeypatch.setattr(benchmark_script("gpu_finetune"), "PART_BYTES", 100_000)
    gpu_stock.run(carry, out)
    assert len(list(out.glob("embeddings.f16.part*"))) > 2
    assert json.loads((out / "embed.json").read_text())["texts"] == len(texts)

    gpu_stock.load(out, SET, cache)

    dataset = load_beir(benchmark_script("report").set_folder(SET), name=SET)
    pipeline = get_pipeline("llamaindex-chunked", PipelineOptions(cache_dir=cache))
    stats = pipeline.index([text for text in dataset.doc_texts if text.strip()])
    assert stats.cached  # the cache held the split's every node text under the pipeline's key
    stored = np.load(next(cache.glob("*.npz")))["embeddings"]
    max_length = benchmark_script("stock_pipelines").MAX_LENGTH
    stock = np.asarray(HuggingFaceEmbedding(model_name=str(model), max_length=max_length)
                       .get_text_embedding_batch(texts[:8]), dtype=np.float32)
    assert stored.shape == (len(texts), stock.shape[1])
    assert np.all(np.sum(stored[:8] * stock, axis=1) > 0.9999)
    hits = pipeline.search([dataset.query_texts[0]], 5)[0]
    assert hits and hits[0][1] > 0
