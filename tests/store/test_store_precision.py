"""A store records its encoder's backend and dtype: an int8 store refuses a float encoder, rebuilds its own int8
encoder when opened without one, and ``lmk-rag ingest --backend --dtype`` makes such a store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lmk_rag.cli import app
from lmk_rag.errors import SettingsMismatchError
from lmk_rag.paths import CACHE_ENV
from lmk_rag.store import LandmarkStore


def test_an_int8_store_refuses_a_float_encoder_and_rebuilds_its_own(
    tmp_path: Path, docs, minilm_encoder, onnx_encoders, onnx_cache, monkeypatch
) -> None:
    monkeypatch.setenv(CACHE_ENV, str(onnx_cache))
    folder = tmp_path / "store"
    doc_id, text = next(iter(docs.items()))
    with LandmarkStore(folder, encoder=onnx_encoders["int8"]) as store:
        store.upsert_document(doc_id, text)
        assert store.settings["encoder"]["settings"]["dtype"] == "int8"
    with pytest.raises(SettingsMismatchError, match="dtype is 'int8' in the store but not set here"):
        LandmarkStore(folder, encoder=minilm_encoder)
    with pytest.raises(SettingsMismatchError, match="dtype is 'int8' in the store but not set here"):
        LandmarkStore(folder, encoder=onnx_encoders["float32"])
    with LandmarkStore(folder, create=False) as store:
        hits = store.search(text.split(". ")[0], k=1)
        assert store.encoder.settings == onnx_encoders["int8"].settings
        assert hits[0].doc_id == doc_id


@pytest.mark.slow
def test_ingest_with_backend_and_dtype_records_them(tmp_path: Path, docs, onnx_encoders, onnx_cache,
                                                    monkeypatch) -> None:
    monkeypatch.setenv(CACHE_ENV, str(onnx_cache))
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    texts = list(docs.values())[:2]
    for index, text in enumerate(texts):
        (corpus / f"{index}.txt").write_text(text)
    store = str(tmp_path / "store")
    runner = CliRunner()
    result = runner.invoke(app, ["ingest", str(corpus), "--store", store, "--backend", "onnx", "--dtype", "int8"])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["info", "--store", store])
    settings = json.loads(result.stdout)["encoder"]["settings"]
    assert (settings["backend"], settings["dtype"]) == ("onnx", "int8")
    result = runner.invoke(app, ["query", texts[1].split(". ")[0][:200], "--store", store, "-k", "1", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["hits"][0]["doc_id"] == "1.txt"
    result = runner.invoke(app, ["ingest", str(corpus), "--store", store, "--backend", "onnx"])
    assert result.exit_code == 1 and "dtype is 'int8' in the store but not set here" in result.output
