"""LlamaIndex's own tests of its Qdrant vector store, ported to LandmarkVectorStore.

Origin: run-llama/llama_index (MIT licence),
``llama-index-integrations/vector_stores/llama-index-vector-stores-qdrant/tests/test_vector_stores_qdrant.py`` and
its ``conftest.py``. Adapted only as allowed for this port: the store is a LandmarkVectorStore on a Qdrant Edge
folder (a Qdrant server for the payload-index test, skipped without ``QDRANT_URL``); the nodes' 2-d embeddings
are real LandmarkEmbedding vectors of their texts; async tests run with ``asyncio.run``; the hybrid store needs no
fastembed model (the store's BM25 is Qdrant's own, shipped in qdrant-edge-py, so nothing is downloaded).
Assertions are unchanged.

Not ported, and why:

- ``test_clear``, ``test_aclear``: they expect reads after ``clear()`` to fail because QdrantVectorStore drops its
  collection; LandmarkVectorStore keeps the store and its settings, as SimpleVectorStore does (the port of
  llama-index-core's ``test_clear`` in test_upstream_core_vector_store.py covers it).
- ``test_parse_query_result``, ``test_filter_conditions``, ``test_generate_shard_key_selector_none``,
  ``test_[a]create_shard_keys_returns_early...``, ``test_[a]create_payload_indexes_returns_early...``,
  ``test_sparse_vector_name_*``: private QdrantVectorStore methods and attributes (the last ones on a MagicMock
  client); the filter translation is tested in test_metadata_filters.py.
- the shard tests (``QDRANT_CLUSTER_URL``): custom sharding, which LandmarkVectorStore does not offer.
- ``test_payload_indexes_created_on_existing_collection[_sync]``: indexes added to a collection made by someone
  else; a LandmarkStore refuses a foreign collection (``CorruptStoreError``).
- ``test_async_query_initializes_with_async_client_only``: QdrantVectorStore's separate async client.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode
from llama_index.core.vector_stores.types import (
    BasePydanticVectorStore,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryMode,
)

from llama_index.embeddings.landmark import LandmarkEmbedding
from llama_index.vector_stores.landmark import LandmarkVectorStore
from lmk_rag.store.records import PAYLOAD_INDEXES

IDS = ["11111111-1111-1111-1111-111111111111", "22222222-2222-2222-2222-222222222222",
       "33333333-3333-3333-3333-333333333333"]


def _nodes(embed_model: LandmarkEmbedding, metadata: list[dict] | None = None) -> list[TextNode]:
    """The conftest's three nodes ``test1``..``test3``, the first two of document ``test-0``."""
    texts = ["test1", "test2", "test3"]
    source = {NodeRelationship.SOURCE: RelatedNodeInfo(node_id="test-0")}
    return [
        TextNode(
            text=text,
            id_=node_id,
            embedding=embedding,
            metadata=(metadata or [{}, {}, {}])[i],
            relationships=source if i < 2 else {},
        )
        for i, (text, node_id, embedding) in enumerate(zip(texts, IDS, embed_model.get_text_embedding_batch(texts)))
    ]


def _filled(store: LandmarkVectorStore, nodes: list[TextNode]) -> LandmarkVectorStore:
    store.add(nodes)
    asyncio.run(store.async_add(nodes))  # upstream: "in-memory client does not share data between instances"
    return store


@pytest.fixture
def vector_store(tmp_path: Path, embed_model: LandmarkEmbedding) -> Iterator[LandmarkVectorStore]:
    nodes = _nodes(embed_model, [{"some_key": 1}, {"some_key": 2}, {"some_key": "3"}])
    with LandmarkVectorStore(path=tmp_path / "test", embed_model=embed_model) as store:
        yield _filled(store, nodes)


@pytest.fixture
def hybrid_vector_store(tmp_path: Path, embed_model: LandmarkEmbedding) -> Iterator[LandmarkVectorStore]:
    with LandmarkVectorStore(path=tmp_path / "hybrid", embed_model=embed_model, bm25=True) as store:
        yield _filled(store, _nodes(embed_model))


def test_class():
    names_of_base_classes = [b.__name__ for b in LandmarkVectorStore.__mro__]
    assert BasePydanticVectorStore.__name__ in names_of_base_classes


def test_delete__and_get_nodes(vector_store: LandmarkVectorStore) -> None:
    vector_store.delete_nodes(node_ids=["11111111-1111-1111-1111-111111111111"])

    existing_nodes = vector_store.get_nodes(node_ids=IDS)
    assert len(existing_nodes) == 2


def test_adelete_and_aget(vector_store: LandmarkVectorStore) -> None:
    asyncio.run(vector_store.adelete_nodes(node_ids=["11111111-1111-1111-1111-111111111111"]))

    existing_nodes = asyncio.run(vector_store.aget_nodes(node_ids=IDS))
    assert len(existing_nodes) == 2


def test_get_with_embedding(vector_store: LandmarkVectorStore) -> None:
    existing_nodes = asyncio.run(vector_store.aget_nodes(node_ids=IDS))

    assert all(node.embedding is not None for node in existing_nodes)


def test_filters_with_types(vector_store: LandmarkVectorStore) -> None:
    results = vector_store.get_nodes(
        filters=MetadataFilters(filters=[MetadataFilter(key="some_key", value=[1, 2], operator=FilterOperator.IN)])
    )
    assert len(results) == 2

    results = vector_store.get_nodes(
        filters=MetadataFilters(filters=[MetadataFilter(key="some_key", value=[1, 2], operator=FilterOperator.NIN)])
    )
    assert len(results) == 1

    results = vector_store.get_nodes(
        filters=MetadataFilters(filters=[MetadataFilter(key="some_key", value=["3"], operator=FilterOperator.IN)])
    )
    assert len(results) == 1


def test_hybrid_vector_store_query(hybrid_vector_store: LandmarkVectorStore, embed_model: LandmarkEmbedding) -> None:
    query = VectorStoreQuery(
        query_embedding=embed_model.get_query_embedding("test1"),
        query_str="test1",
        similarity_top_k=1,
        sparse_top_k=1,
        hybrid_top_k=2,
        mode=VectorStoreQueryMode.HYBRID,
    )
    results = hybrid_vector_store.query(query)
    assert len(results.nodes) == 2

    # upstream first sets ``enable_hybrid = False``: LandmarkVectorStore has no such switch (BM25 is part of every
    # store made with bm25=True), so only the mode changes
    query.mode = VectorStoreQueryMode.DEFAULT
    results = hybrid_vector_store.query(query)
    assert len(results.nodes) == 1


@pytest.mark.parametrize("backend", ["edge", "server"])
def test_payload_indexes_created(backend: str, tmp_path: Path, embed_model: LandmarkEmbedding) -> None:
    """Upstream's ``test_payload_indexes_created[_sync]``: the indexes declared when the store is made exist. Here
    they are the store's own indexes plus the text indexes of ``text_keys``; upstream needs a server, the Edge
    shard answers the same question locally."""
    if backend == "server" and not os.environ.get("QDRANT_URL"):
        pytest.skip("QDRANT_URL is not set: no Qdrant server to test against")
    where = (
        {"path": tmp_path / "indexed"}
        if backend == "edge"
        else {"url": os.environ["QDRANT_URL"], "api_key": os.environ.get("QDRANT_API_KEY"),
              "collection": f"lmk_test_{uuid.uuid4().hex[:10]}"}
    )
    with LandmarkVectorStore(embed_model=embed_model, text_keys=["tenant_id"], **where) as store:
        _filled(store, _nodes(embed_model, [{"some_key": 1, "tenant_id": "A"}, {"some_key": 2, "tenant_id": "B"},
                                            {"some_key": "3", "tenant_id": "A"}]))
        backend_ = store.client.backend
        if backend == "edge":
            schema_keys = set(backend_.shard.info().payload_schema)
        else:
            schema_keys = set(backend_.client.get_collection(backend_.collection).payload_schema)
            backend_.client.delete_collection(backend_.collection)
        payload_keys = {key for key, _ in PAYLOAD_INDEXES} | {"meta.tenant_id"}
        missing = schema_keys - payload_keys
        extra = payload_keys - schema_keys
        assert not missing and not extra, f"Missing: {missing}, Extra: {extra}"
