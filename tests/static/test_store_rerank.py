"""Static token MaxSim reranking through a real Qdrant Edge store on disk, with the real static model."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from lmk_rag.errors import SettingsMismatchError
from lmk_rag.static import StaticTokenEncoder, maxsim


@pytest.fixture(scope="module")
def pages(fixture_data: Path) -> list[str]:
    """Six real manual-page DESCRIPTION texts (manpages-short corpus)."""
    out = []
    with gzip.open(fixture_data / "manpages-short" / "corpus.jsonl.gz", "rt") as handle:
        for line in handle:
            out.append(json.loads(line)["text"])
            if len(out) == 6:
                return out
    return out


@pytest.mark.slow
def test_static_rerank_through_the_store(tmp_path, static_encoder, minilm_encoder, pages) -> None:
    from lmk_rag.store import LandmarkStore

    with LandmarkStore(path=tmp_path / "store", encoder=minilm_encoder, static_encoder=static_encoder) as store:
        store.upsert_documents([(f"page{i}", text, {"i": i}) for i, text in enumerate(pages)])
        node = store.get_nodes(filter={"doc_id": "page2"})[0]
        # the store keeps each node's distinct static tokens, as the encoder gives them
        assert np.allclose(node.static_vectors, static_encoder.encode_document_tokens(node.text), atol=1e-5)
        query = " ".join(pages[2].split()[:12])
        hits = store.search(query, k=3, rerank="static", one_per_document=False, alpha=1.0)
        assert hits[0].doc_id == "page2"
        top = store.get_nodes(node_ids=[hits[0].node_id])[0]
        query_tokens = static_encoder.encode_query_tokens(query)
        expected = maxsim(query_tokens, static_encoder.encode_document_tokens(top.text)) / len(query_tokens)
        assert hits[0].score == pytest.approx(expected, rel=1e-3)
    # a store built with one static model refuses another (the mixer changes the fingerprint)
    from lmk_rag.static.mixer_torch import ConvMixer

    mixed = StaticTokenEncoder(static_encoder.vectors, mixer=ConvMixer(static_encoder.dim))
    with pytest.raises(SettingsMismatchError, match="static"):
        LandmarkStore(path=tmp_path / "store", encoder=minilm_encoder, static_encoder=mixed)
