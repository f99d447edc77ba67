"""The static store (``mode="static"``): pooled static node vectors, static token multivectors through the shipped
mixer, BM25; no ``chunks`` vector and no transformer. Real shipped static model, real Edge shards on disk."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from lmk_rag.errors import InvalidInputError, SettingsMismatchError
from lmk_rag.static import StaticTokenEncoder
from lmk_rag.static.document_encoder import StaticDocumentEncoder
from lmk_rag.store import LandmarkStore, Rerank, StoreMode

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def static_documents() -> StaticDocumentEncoder:
    """The default static document encoder: shipped model and mixer, chunks of 64 tokens."""
    return StaticDocumentEncoder()


def _first_sentence(text: str) -> str:
    return text.split(". ")[0][:200]


def test_a_static_store_holds_node_static_and_bm25_vectors_only(open_store, docs, static_documents) -> None:
    store = open_store(encoder=static_documents)
    assert store.mode == StoreMode.STATIC and store.default_rerank == Rerank.STATIC
    assert store.backend.vector_names() == {"node", "static", "bm25"}
    assert store.upsert_documents([(doc_id, text, {"n": i}) for i, (doc_id, text) in enumerate(docs.items())]) > 0
    assert store.settings["mode"] == "static" and store.info()["mode"] == "static"
    assert store.settings["encoder"]["settings"] == {"static_model": None, "mixer": "shipped", "granularity": 64}
    assert store.settings["static"] == {"fingerprint": static_documents.token_encoder.fingerprint, "dim": 256}
    for doc_id, text in docs.items():
        assert store.search(_first_sentence(text), k=1)[0].doc_id == doc_id
        assert store.search(_first_sentence(text), k=1, rerank="node")[0].doc_id == doc_id
    node = store.get_nodes(filter={"n": 0})[0]
    assert node.chunk_vectors.shape == (0, 256) and node.vector.shape == (256,)
    assert node.static_vectors is not None and node.static_vectors.shape[1] == 256
    with pytest.raises(SettingsMismatchError, match="no chunk vectors"):
        store.search("anything", rerank="chunks")


def test_a_static_store_writes_the_node_tokens_cut_from_the_document(open_store, docs, static_documents) -> None:
    store = open_store(encoder=static_documents)
    text = max(docs.values(), key=len)
    store.upsert_document("page", text)
    nodes = sorted(store.get_nodes(), key=lambda node: node.span)
    expected = static_documents.encode_node_tokens(static_documents.encode_documents(text), [n.span for n in nodes])
    assert len(nodes) > 1
    for node, vectors in zip(nodes, expected):
        np.testing.assert_allclose(node.static_vectors, vectors, atol=1e-5)


def test_static_and_transformer_stores_cut_the_same_nodes(open_store, docs, static_documents, minilm_encoder) -> None:
    static = open_store("static", encoder=static_documents, node_tokens=128)
    transformer = open_store("transformer", encoder=minilm_encoder, node_tokens=128)
    text = max(docs.values(), key=len)
    static.upsert_document("page", text)
    transformer.upsert_document("page", text)
    spans = [sorted(node.span for node in store.get_nodes()) for store in (static, transformer)]
    # one tokenizer (MiniLM's WordPiece; the static model drops the words it has no vector for)
    assert len(spans[0]) == len(spans[1]) and abs(spans[0][0][1] - spans[1][0][1]) < 40


def test_reopening_rebuilds_the_static_encoder_and_checks_it(tmp_path, docs) -> None:
    folder = tmp_path / "store"
    with LandmarkStore(folder, mode="static") as store:
        store.upsert_documents([(doc_id, text, None) for doc_id, text in docs.items()])
        before = [(h.node_id, h.score) for h in store.search(_first_sentence(next(iter(docs.values()))), k=3)]
    with LandmarkStore(folder) as store:
        assert store.mode == StoreMode.STATIC and store.encoder.fingerprint == store.settings["encoder"]["fingerprint"]
        assert [(h.node_id, h.score) for h in store.search(_first_sentence(next(iter(docs.values()))), k=3)] == before
    with LandmarkStore(folder, encoder=StaticTokenEncoder(mixer="shipped")) as store:  # the same vectors
        assert store.mode == StoreMode.STATIC
    with pytest.raises(SettingsMismatchError, match="holds static vectors of model"):
        LandmarkStore(folder, encoder=StaticTokenEncoder())  # raw vectors, no mixer
    with pytest.raises(SettingsMismatchError, match="static store, opened as a transformer"):
        LandmarkStore(folder, mode="transformer")


def test_mode_and_encoder_must_agree(tmp_path, minilm_encoder) -> None:
    with pytest.raises(InvalidInputError, match="mode='static' with a transformer encoder"):
        LandmarkStore(tmp_path / "a", mode="static", encoder=minilm_encoder)
    with pytest.raises(InvalidInputError, match="mode must be one of"):
        LandmarkStore(tmp_path / "b", mode="hybrid")
    with pytest.raises(InvalidInputError, match="not static_encoder="):
        LandmarkStore(tmp_path / "c", mode="static", static_encoder=StaticTokenEncoder())
    with LandmarkStore(tmp_path / "d", encoder=StaticTokenEncoder()) as store:  # a static encoder means static
        assert store.mode == StoreMode.STATIC and store.settings["encoder"]["settings"]["mixer"] is None


def test_a_transformer_store_reopens_as_one_and_refuses_static(tmp_path, minilm_encoder, doc_records) -> None:
    folder = tmp_path / "transformer"
    with LandmarkStore(folder, encoder=minilm_encoder) as store:
        doc_id, records = next(iter(doc_records.items()))
        store.upsert_encoded_document(doc_id, records)
        assert store.backend.vector_names() == {"node", "chunks", "document", "bm25"}
    assert json.loads((folder / "lmk_rag.json").read_text())["mode"] == "transformer"
    with LandmarkStore(folder, encoder=minilm_encoder) as store:
        assert store.mode == StoreMode.TRANSFORMER and store.default_rerank == Rerank.CHUNKS
        assert store.search(records[0].text[:200], k=1)[0].doc_id == doc_id
    with pytest.raises(SettingsMismatchError, match="transformer store, opened as a static"):
        LandmarkStore(folder, mode="static")


CHILD = textwrap.dedent(
    """
    import json, sys
    from typer.testing import CliRunner
    from lmk_rag.cli import app
    from lmk_rag.store import LandmarkStore

    folder, pages, docs = sys.argv[1], sys.argv[2], json.loads(open(sys.argv[3]).read())
    with LandmarkStore(folder, mode="static") as store:
        store.upsert_documents([(doc_id, text, None) for doc_id, text in docs.items()])
        store.optimize()
        hits = store.search(next(iter(docs.values()))[:100], k=2)
    with LandmarkStore(folder) as store:
        hits += store.search("a process", k=2, rerank="node")
    runner = CliRunner()
    ingest = runner.invoke(app, ["ingest", pages, "--store", folder + "-cli", "--static"])
    query = runner.invoke(app, ["query", "a process", "--store", folder + "-cli", "--json"])
    print(json.dumps({"hits": len(hits), "cli": [ingest.exit_code, query.exit_code, ingest.output[-300:]],
                      "loaded": sorted(m for m in ("torch", "transformers") if m in sys.modules)}))
    """
)


@pytest.mark.slow
def test_static_ingest_and_search_never_import_torch(tmp_path, docs) -> None:
    (tmp_path / "docs.json").write_text(json.dumps(docs))
    (tmp_path / "pages").mkdir()
    for doc_id, text in docs.items():
        (tmp_path / "pages" / doc_id).write_text(text)
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
    out = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path / "s"), str(tmp_path / "pages"),
                          str(tmp_path / "docs.json")], capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["hits"] == 4 and report["cli"][:2] == [0, 0], report
    assert report["loaded"] == [], report


def test_pooled_static_node_vectors_are_the_nodes_model2vec_embeddings(tmp_path, docs) -> None:
    with LandmarkStore(tmp_path / "s", encoder=StaticDocumentEncoder(granularity=256)) as store:
        text = next(iter(docs.values()))
        store.upsert_document("page", text)
        raw = StaticTokenEncoder(store.encoder.token_encoder.vectors)
        nodes = store.get_nodes()
        assert len(nodes) > 1
        for node in nodes:  # one chunk per node: the node vector pools the node's tokens (as cut from the whole text)
            assert float(node.vector @ raw.encode(node.text)) > 0.999
