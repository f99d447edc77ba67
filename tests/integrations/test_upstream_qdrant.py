"""LlamaIndex's own tests of its Qdrant vector store, ported to LandmarkVectorStore.

Origin: run-llama/llama_index (MIT licence),
``llama-index-integrations/vector_stores/llama-index-vector-stores-qdrant/tests/test_vector_stores_qdrant.py`` and
its ``conftest.py``. The stores are constructed as upstream constructs them (``LandmarkVectorStore("test",
client=QdrantClient(":memory:"), aclient=AsyncQdrantClient(":memory:"))``, ``enable_hybrid=True,
fastembed_sparse_model="Qdrant/bm25"``, ``payload_indexes=[...], index_doc_id=False``), plus ``embed_model``. Adapted
only as allowed for this port: the nodes' 2-d embeddings are real LandmarkEmbedding vectors of their texts; async
tests run with ``asyncio.run``; the hybrid store needs no fastembed model (the store's BM25 is Qdrant's own, shipped
in qdrant-edge-py, so nothing is downloaded: the argument warns); the payload-index test also runs on a Qdrant Edge
folder (a server without ``QDRANT_URL`` is skipped); ``test_async_query_initializes_with_async_client_only`` writes
its point through the store (a LandmarkStore refuses a collection another program made). Assertions are unchanged.

Not ported, and why:

- ``test_clear``, ``test_aclear``: they expect reads after ``clear()`` to fail because QdrantVectorStore drops its
  collection; LandmarkVectorStore keeps the store and its settings, as SimpleVectorStore does (the port of
  llama-index-core's ``test_clear`` in test_upstream_core_vector_store.py covers it).
- ``test_parse_query_result``, ``test_filter_conditions``, ``test_generate_shard_key_selector_none``,
  ``test_[a]create_shard_keys_returns_early...``, ``test_[a]create_payload_indexes_returns_early...``,
  ``test_sparse_vector_name_*``: private QdrantVectorStore methods and attributes (the last ones on a MagicMock
  client); the filter translation is tested in test_metadata_filters.py, and ``sparse_vector_name`` is refused
  (tests/integrations/test_constructor.py).
- the shard tests (``QDRANT_CLUSTER_URL``): custom sharding, which LandmarkVectorStore does not offer.
- ``test_payload_indexes_created_on_existing_collection[_sync]``: indexes added to a collection made by someone
  else; a LandmarkStore refuses a foreign collection (``CorruptStoreError``). Indexes added to an existing
  lmk-rag store are tested in tests/integrations/test_constructor.py.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import qdrant_client
from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode
from llama_index.core.vector_stores.types import (
    BasePydanticVectorStore,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryMode,
)
from qdrant_client.http import models as qmodels

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
def vector_store(embed_model: LandmarkEmbedding) -> Iterator[LandmarkVectorStore]:
    client = qdrant_client.QdrantClient(":memory:")
    aclient = qdrant_client.AsyncQdrantClient(":memory:")
    with pytest.warns(UserWarning, match="never share"):
        vector_store = LandmarkVectorStore("test", client=client, aclient=aclient, embed_model=embed_model)
    nodes = _nodes(embed_model, [{"some_key": 1}, {"some_key": 2}, {"some_key": "3"}])
    with vector_store:
        yield _filled(vector_store, nodes)


@pytest.fixture
def hybrid_vector_store(embed_model: LandmarkEmbedding) -> Iterator[LandmarkVectorStore]:
    client = qdrant_client.QdrantClient(":memory:")
    aclient = qdrant_client.AsyncQdrantClient(":memory:")
    with pytest.warns(UserWarning):
        vector_store = LandmarkVectorStore(
            "test",
            client=client,
            aclient=aclient,
            enable_hybrid=True,
            fastembed_sparse_model="Qdrant/bm25",
            embed_model=embed_model,
        )
    with vector_store:
        yield _filled(vector_store, _nodes(embed_model))


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
    # store made with enable_hybrid=True), so only the mode changes
    query.mode = VectorStoreQueryMode.DEFAULT
    results = hybrid_vector_store.query(query)
    assert len(results.nodes) == 1


@pytest.mark.parametrize("backend", ["edge", "server"])
def test_payload_indexes_created(backend: str, tmp_path: Path, embed_model: LandmarkEmbedding) -> None:
    """Upstream's ``test_payload_indexes_created[_sync]`` with its fixture's construction: the declared indexes
    exist. Here they sit beside the store's own indexes, under the metadata's payload key; upstream needs a server,
    the Edge shard answers the same question locally."""
    if backend == "server" and not os.environ.get("QDRANT_URL"):
        pytest.skip("QDRANT_URL is not set: no Qdrant server to test against")
    where = (
        {"path": tmp_path / "indexed"}
        if backend == "edge"
        else {"client": qdrant_client.QdrantClient(os.environ["QDRANT_URL"], api_key=os.environ.get("QDRANT_API_KEY")),
              "collection_name": f"lmk_test_{uuid.uuid4().hex[:10]}"}
    )
    payload_indexes = [
        {"field_name": "tenant_id", "field_schema": qmodels.PayloadSchemaType.KEYWORD},
        {"field_name": "some_key", "field_schema": qmodels.PayloadSchemaType.INTEGER},
    ]
    with pytest.warns(UserWarning, match="index_doc_id"):
        store = LandmarkVectorStore(payload_indexes=payload_indexes, index_doc_id=False, embed_model=embed_model,
                                    **where)
    with store:
        _filled(store, _nodes(embed_model, [{"some_key": 1, "tenant_id": "A"}, {"some_key": 2, "tenant_id": "B"},
                                            {"some_key": "3", "tenant_id": "A"}]))
        backend_ = store.store.backend
        if backend == "edge":
            schema_keys = set(backend_.shard.info().payload_schema)
        else:
            schema_keys = set(store.client.get_collection(store.collection_name).payload_schema)
            store.client.delete_collection(store.collection_name)
        payload_keys = {key for key, _ in PAYLOAD_INDEXES} | {f"meta.{d['field_name']}" for d in payload_indexes}
        missing = schema_keys - payload_keys
        extra = payload_keys - schema_keys
        assert not missing and not extra, f"Missing: {missing}, Extra: {extra}"


def test_async_query_initializes_with_async_client_only(embed_model: LandmarkEmbedding) -> None:
    """When only an async client is provided, aquery works (upstream writes its point with the raw client into a
    collection it made; a LandmarkStore's collection is made by the store, so the point goes through it)."""
    collection_name = "async_init_test"
    aclient = qdrant_client.AsyncQdrantClient(":memory:")

    async def run() -> None:
        store = LandmarkVectorStore(collection_name=collection_name, aclient=aclient, embed_model=embed_model)
        (embedding,) = embed_model.get_text_embedding_batch(["hello"])
        await store.async_add([TextNode(text="hello", id_=IDS[0], embedding=embedding)])

        query = VectorStoreQuery(query_embedding=embed_model.get_query_embedding("hello"), similarity_top_k=1)
        result = await store.aquery(query)

        assert result is not None
        assert len(result.nodes) == 1
        assert getattr(result.nodes[0], "text", None) == "hello"

    asyncio.run(run())
