"""Static fixtures: the real static model distilled from MiniLM (shipped with the package) and a tiny in-memory
model2vec folder (6-word vocabulary) for mechanics."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from lmk_rag.static import StaticTokenEncoder, StaticVectors, load_static_vectors

TINY_VOCAB = ["[UNK]", "the", "cat", "sat", "on", "mat"]


@pytest.fixture(scope="session")
def static_vectors() -> StaticVectors:
    """The default static model (model2vec distillation of the real all-MiniLM-L6-v2, 256 dims; package data)."""
    return load_static_vectors()


@pytest.fixture(scope="session")
def static_encoder(static_vectors: StaticVectors) -> StaticTokenEncoder:
    """A raw (no mixer) static token encoder over the real distilled model."""
    return StaticTokenEncoder(static_vectors)


@pytest.fixture()
def tiny_model_dir(tmp_path: Path) -> Path:
    """A model2vec folder with a 6-token WordPiece vocabulary and seeded random 4-d vectors."""
    from model2vec import StaticModel
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

    tokenizer = Tokenizer(models.WordPiece({t: i for i, t in enumerate(TINY_VOCAB)}, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.Lowercase()
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    vectors = np.random.default_rng(0).normal(size=(len(TINY_VOCAB), 4)).astype(np.float32)
    StaticModel(vectors=vectors, tokenizer=tokenizer).save_pretrained(tmp_path / "tiny")
    return tmp_path / "tiny"
