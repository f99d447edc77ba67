"""What a faster ``lmk-rag query`` start must not change, on the real MiniLM: a query's token ids and chunks, its
vector and chunk vectors (``tests/fixtures/query_encodings.json``, recorded at commit 0d35bcc, before the cold-start
work of issue 27 item 8), the default encoder's fingerprint, and that a store reopened as the CLI opens it
rebuilds that encoder from its record (on ONNX Runtime, torch-free: within cosine 0.9999 of the recording). The
recording predates the shipped projection: it is the default encoder with ``projection=None``; a record without
``projection`` (written before projections existed) is refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lmk_rag.encoder import LandmarkEncoder
from lmk_rag.paths import CACHE_ENV
from lmk_rag.store import LandmarkStore

RECORDED = Path(__file__).resolve().parents[1] / "fixtures" / "query_encodings.json"
#: Recorded on an AVX-512 CPU; other CPUs' float32 kernels round differently, by far less than any real change of
#: tokens, model or pooling moves a component (1e-3 and more).
ATOL = 1e-5


@pytest.fixture(scope="module")
def recorded() -> dict[str, Any]:
    """The recorded settings, fingerprint and query encodings."""
    return json.loads(RECORDED.read_text())


@pytest.fixture(scope="module")
def default_encoder() -> LandmarkEncoder:
    """``LandmarkEncoder(projection=None)``: the default encoder of before projections, which the recording holds."""
    return LandmarkEncoder(projection=None)


def test_the_default_encoder_keeps_its_settings_and_fingerprint(default_encoder, recorded) -> None:
    assert default_encoder.settings == {**recorded["settings"], "projection": None}
    assert default_encoder.fingerprint == recorded["fingerprint"]
    assert LandmarkEncoder().settings == {**recorded["settings"], "projection": "shipped"}


def test_queries_keep_their_token_ids_and_chunks(default_encoder, recorded) -> None:
    assert [len(query["spans"]) for query in recorded["queries"]] == [1, 3]  # one chunk, and several
    for query in recorded["queries"]:
        ids, plan = default_encoder.plan(query["text"])
        assert ids == query["token_ids"]
        assert [list(span) for span in plan.spans] == query["spans"]


def test_queries_keep_their_vectors(default_encoder, recorded) -> None:
    for query in recorded["queries"]:
        encoded = default_encoder.encode_queries(query["text"])
        assert [list(span) for span in encoded.spans] == query["spans"]
        np.testing.assert_allclose(encoded.vector, np.array(query["vector"], np.float32), rtol=0, atol=ATOL)
        np.testing.assert_allclose(encoded.chunk_vectors, np.array(query["chunk_vectors"], np.float32), rtol=0,
                                   atol=ATOL)


@pytest.mark.slow
def test_a_read_only_open_rebuilds_the_recorded_encoder_on_onnx_runtime(tmp_path: Path, default_encoder, recorded,
                                                                        onnx_cache, monkeypatch) -> None:
    monkeypatch.setenv(CACHE_ENV, str(onnx_cache))
    short, long = (query["text"] for query in recorded["queries"])
    with LandmarkStore(tmp_path / "store", encoder=default_encoder) as store:
        store.upsert_documents([("page", long, None)])
        store.optimize()
    with LandmarkStore(tmp_path / "store", read_only=True) as store:  # as lmk-rag query opens it: no encoder given
        assert store.settings["encoder"]["fingerprint"] == recorded["fingerprint"]
        encoder = store.encoder  # the record's encoder on ONNX Runtime, checked against the record
        assert encoder.settings == {**default_encoder.settings, "backend": "onnx"}
        assert encoder.fingerprint_with("torch", "float32") == recorded["fingerprint"]
        for query in recorded["queries"]:
            encoded = encoder.encode_queries(query["text"])
            assert [list(span) for span in encoded.spans] == query["spans"]
            assert float(encoded.vector @ np.array(query["vector"], np.float32)) >= 0.9999
        assert [hit.doc_id for hit in store.search(short, k=1)] == ["page"]


@pytest.mark.slow
def test_a_record_without_projection_is_refused_as_an_earlier_format(tmp_path: Path, default_encoder,
                                                                     recorded) -> None:
    from lmk_rag.errors import StoreFormatError
    from lmk_rag.store.edge import EdgeBackend

    with LandmarkStore(tmp_path / "store", encoder=default_encoder) as store:
        store.upsert_documents([("page", recorded["queries"][1]["text"], None)])
        settings = store.settings
    old = {key: value for key, value in settings["encoder"]["settings"].items() if key != "projection"}
    backend = EdgeBackend(tmp_path / "store")
    try:  # the record as a store written before projections existed holds it
        backend.write_settings({**settings, "encoder": {**settings["encoder"], "settings": old}})
    finally:
        backend.close()
    with pytest.raises(StoreFormatError, match=r"lacks encoder\.settings\.projection.*re-ingest"):
        LandmarkStore(tmp_path / "store", read_only=True)
