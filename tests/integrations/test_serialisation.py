"""LandmarkVectorStore.to_dict / from_dict round-trip the configuration (never an API key), and QdrantVectorStore's
attributes url, batch_size, parallel, enable_hybrid and flat_metadata have values."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from qdrant_client import QdrantClient

from llama_index.embeddings.landmark import LandmarkEmbedding
from llama_index.vector_stores.landmark import LandmarkVectorStore
from lmk_rag.store import LandmarkStore


def test_an_edge_store_round_trips_its_configuration(tmp_path: Path, embed_model: LandmarkEmbedding) -> None:
    folder = tmp_path / "store"
    with LandmarkVectorStore(path=folder, embed_model=embed_model, enable_hybrid=False, alpha=0.4,
                             payload_indexes=[{"field_name": "tenant", "field_schema": "keyword"}], batch_size=16,
                             rerank="node") as vector_store:
        data = vector_store.to_dict()
        assert data == {"path": str(folder), "enable_hybrid": False, "alpha": 0.4, "batch_size": 16,
                        "payload_indexes": [{"field_name": "tenant", "field_schema": "keyword"}], "rerank": "node",
                        "class_name": "LandmarkVectorStore"}
        assert json.loads(vector_store.to_json()) == data
    with LandmarkVectorStore.from_dict(data, embed_model=embed_model) as reopened:
        assert reopened.to_dict() == data
        assert (reopened.rerank, reopened.store.alpha, reopened.batch_size) == ("node", 0.4, 16)
        assert reopened.store.where == str(folder) and reopened.enable_hybrid is False
        with pytest.raises(TypeError, match="to_dict"):
            reopened.to_dict(exclude={"path"})


def test_a_configuration_recorded_with_the_old_rerank_name_says_the_new_one(tmp_path: Path) -> None:
    from lmk_rag.errors import InvalidInputError

    recorded = {"path": str(tmp_path / "store"), "rerank": "none", "class_name": "LandmarkVectorStore"}
    with pytest.raises(InvalidInputError, match="rerank 'none' is now called 'node'"):
        LandmarkVectorStore.from_dict(recorded)
    assert not (tmp_path / "store").exists()  # refused before a store is opened


def test_a_qdrant_client_store_round_trips_without_its_api_key(tmp_path: Path, minilm_encoder) -> None:
    folder = str(tmp_path / "local")
    with LandmarkVectorStore("docs", location=folder, max_retries=5, batch_size=32,
                             embed_model=LandmarkEmbedding(encoder=minilm_encoder)) as vector_store:
        data = vector_store.to_dict()
        vector_store.store.upsert_documents([("a", "the tar archiver bundles files", {})])
    assert data == {"location": folder, "collection_name": "docs", "max_retries": 5, "batch_size": 32,
                    "enable_hybrid": True, "class_name": "LandmarkVectorStore"}
    with LandmarkVectorStore.from_dict(data) as reopened:
        assert reopened.store.count_documents() == 1 and reopened.url is None


def test_a_store_given_as_a_client_or_store_object_records_where_it_is(tmp_path: Path, minilm_encoder) -> None:
    client = QdrantClient(path=str(tmp_path / "local"))
    with LandmarkVectorStore("docs", client=client) as vector_store:
        assert vector_store.to_dict() == {"location": str(tmp_path / "local"), "collection_name": "docs",
                                          "enable_hybrid": True, "class_name": "LandmarkVectorStore"}
    client.close()
    with LandmarkStore(tmp_path / "edge", encoder=minilm_encoder) as store:
        assert LandmarkVectorStore(store=store).to_dict()["path"] == str(tmp_path / "edge")


def test_a_server_store_leaves_the_api_key_out() -> None:
    # No Qdrant server runs in the tests, so no server store can open: a stand-in store holds a real remote client
    # made with an API key, which is all to_dict reads of a server store.
    remote = QdrantClient(url="https://127.0.0.1:9", api_key="secret-key", check_compatibility=False)
    vector_store = LandmarkVectorStore.model_construct()
    vector_store._store = SimpleNamespace(collection_name="docs", client=remote, aclient=None, bm25=True)
    data = vector_store.to_dict()
    assert data["url"] == "https://127.0.0.1:9" and vector_store.url == "https://127.0.0.1:9"
    assert "secret-key" not in json.dumps(data) and "api_key" not in data


def test_upstream_attributes_have_values(vector_store: LandmarkVectorStore) -> None:
    assert vector_store.url is None
    assert vector_store.batch_size == 64 and vector_store.parallel == 1
    assert vector_store.enable_hybrid is True and vector_store.flat_metadata is False
    with pytest.raises(AttributeError):
        vector_store.batch_size = 8  # type: ignore[misc]
