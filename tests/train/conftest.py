"""Fixtures for the fine-tuning tests: a tiny random BERT with the real MiniLM tokenizer, and real training pairs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-layer, 32-dim random BERT saved with the MiniLM tokenizer and a 64-token window."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    from lmk_rag.encoder import resolve_model_path

    folder = tmp_path_factory.mktemp("tiny_bert")
    tokenizer = AutoTokenizer.from_pretrained(resolve_model_path(None))
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
    )
    torch.manual_seed(0)
    BertModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 64}))
    return folder


@pytest.fixture(scope="session")
def pairs_file(tmp_path_factory: pytest.TempPathFactory, fixture_data: Path) -> Path:
    """The first 40 real training pairs (manpages-train) as a pairs JSONL file."""
    with open(fixture_data / "manpages-train" / "pairs.jsonl", encoding="utf-8") as handle:
        rows = [json.loads(next(handle)) for _ in range(40)]
    path = tmp_path_factory.mktemp("pairs") / "pairs.jsonl"
    path.write_text("".join(json.dumps({"query": row["query"], "positive": row["positive"]}) + "\n" for row in rows))
    return path


@pytest.fixture(autouse=True)
def one_torch_thread():
    """Tiny models run fastest on one thread; on a shared, busy CPU more threads mostly wait on each other."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
