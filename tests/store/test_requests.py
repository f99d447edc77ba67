"""Pure parts: filter translation (both backends' builders) and the qdrant-client request builders
that carry the pass-through settings (shards, replication, gRPC, parallel upload)."""

from __future__ import annotations

import pytest
from qdrant_client import models

from lmk_rag.errors import InvalidInputError
from lmk_rag.store.edge import EdgeConditions, edge_config
from lmk_rag.store.filters import FieldCondition, Filter, as_filter, payload_key, translate
from lmk_rag.store.server import (
    ServerConditions,
    client_kwargs,
    create_collection_request,
    query_request,
    upload_request,
)
from lmk_rag.store.types import CollectionSpec, PointData, QueryPlan, SparseVector


def test_payload_keys_put_metadata_under_meta():
    assert payload_key("doc_id") == "doc_id"
    assert payload_key("lang") == "meta.lang"
    assert payload_key("a.b") == "meta.a.b"


def test_translate_to_qdrant_client_filter():
    flt = Filter(
        must=[FieldCondition("lang", "eq", "en"), FieldCondition("year", "gte", 2020)],
        should=[FieldCondition("tag", "in", ["a", "b"]), FieldCondition("title", "text", "socket")],
        must_not=[FieldCondition("doc_id", "ne", "x"), FieldCondition("draft", "is_empty")],
    )
    native = translate(flt, ServerConditions(), [ServerConditions().match("kind", "node")])
    assert native.must[0] == models.FieldCondition(key="kind", match=models.MatchValue(value="node"))
    inner = native.must[1]
    assert inner.must == [
        models.FieldCondition(key="meta.lang", match=models.MatchValue(value="en")),
        models.FieldCondition(key="meta.year", range=models.Range(gte=2020.0)),
    ]
    assert inner.should == [
        models.FieldCondition(key="meta.tag", match=models.MatchAny(any=["a", "b"])),
        models.FieldCondition(key="meta.title", match=models.MatchText(text="socket")),
    ]
    assert inner.must_not[0] == models.Filter(
        must_not=[models.FieldCondition(key="doc_id", match=models.MatchValue(value="x"))]
    )
    assert inner.must_not[1] == models.IsEmptyCondition(is_empty=models.PayloadField(key="meta.draft"))


def test_translate_dict_and_edge_builder():
    assert as_filter({"lang": "en", "tag": ["a", "b"]}) == Filter(
        must=(FieldCondition("lang", "eq", "en"), FieldCondition("tag", "in", ["a", "b"]))
    )
    assert translate(None, EdgeConditions()) is None
    native = translate({"lang": "en"}, EdgeConditions())
    assert native.must[0].key == "meta.lang" and native.must[0].match.value == "en"


@pytest.mark.parametrize(
    "bad", [lambda: FieldCondition("a", "like", 1), lambda: FieldCondition("a", "in", "abc"),
            lambda: FieldCondition("a", "gt", "3"), lambda: as_filter([("a", 1)])]
)
def test_bad_filters_are_refused(bad):
    with pytest.raises(InvalidInputError):
        bad()


def test_client_kwargs():
    assert client_kwargs("http://q:6333", "k", None, True, 30) == {
        "url": "http://q:6333", "api_key": "k", "prefer_grpc": True, "timeout": 30}
    assert client_kwargs(None, None, ":memory:", True, None) == {"location": ":memory:"}
    assert client_kwargs(None, None, "/tmp/x", False, None) == {"path": "/tmp/x"}


def test_create_collection_request_passes_cluster_settings():
    spec = CollectionSpec(dim=384, static_dim=64, bm25=True, quantization="int8")
    request = create_collection_request("c", spec, shard_number=6, replication_factor=2, write_consistency_factor=2)
    assert (request["shard_number"], request["replication_factor"], request["write_consistency_factor"]) == (6, 2, 2)
    vectors = request["vectors_config"]
    assert vectors["node"].hnsw_config.m == 16 and vectors["node"].multivector_config is None
    for name, size in (("chunks", 384), ("static", 64)):
        assert vectors[name].size == size
        assert vectors[name].multivector_config.comparator == models.MultiVectorComparator.MAX_SIM
        assert vectors[name].hnsw_config.m == 0
        assert vectors[name].quantization_config.scalar.type == models.ScalarType.INT8
    assert request["sparse_vectors_config"]["bm25"].modifier == models.Modifier.IDF
    plain = create_collection_request("c", CollectionSpec(dim=8))
    assert "shard_number" not in plain and "sparse_vectors_config" not in plain
    assert "static" not in plain["vectors_config"] and "document" not in plain["vectors_config"]
    document = create_collection_request("c", CollectionSpec(dim=8, document_vector=True))["vectors_config"]["document"]
    assert document.size == 8 and document.hnsw_config.m == 16 and document.multivector_config is None


def test_upload_request_is_batched_and_parallel():
    vectors = {"node": [0.1, 0.2], "bm25": SparseVector([1], [0.5])}
    points = [PointData("6f1d3c52-7f4e-4a55-9a38-5b1f0c2d9e10", vectors, {"a": 1})]
    request = upload_request("c", points, parallel=4, batch_size=128)
    assert (request["parallel"], request["batch_size"], request["wait"]) == (4, 128, True)
    assert request["points"][0].vector["bm25"] == models.SparseVector(indices=[1], values=[0.5])


def _plan(**overrides):
    base = dict(dense=[0.1, 0.2], sparse=None, rerank_vector="chunks", rerank_query=[[0.1, 0.2]],
                prefetch_limit=100, limit=50, filter=None, payload_keys=["doc_id"])
    return QueryPlan(**{**base, **overrides})


def test_query_request_two_stages_in_one_call():
    request = query_request("c", _plan())
    assert request["using"] == "chunks" and request["query"] == [[0.1, 0.2]]
    assert [(p.using, p.limit) for p in request["prefetch"]] == [("node", 100)]
    hybrid = query_request("c", _plan(sparse=SparseVector([3], [1.0])))
    fused = hybrid["prefetch"][0]
    assert fused.query == models.RrfQuery(rrf=models.Rrf(k=60))
    assert [p.using for p in fused.prefetch] == ["node", "bm25"]
    plain = query_request("c", _plan(rerank_vector=None, rerank_query=None, hnsw_ef=64))
    assert plain["using"] == "node" and "prefetch" not in plain and plain["search_params"].hnsw_ef == 64
    with_document = query_request("c", _plan(sparse=SparseVector([3], [1.0]), dense_using=("node", "document")))
    assert [p.using for p in with_document["prefetch"][0].prefetch] == ["node", "document", "bm25"]
    assert with_document["using"] == "chunks"  # still one call: fused prefetch, then the rerank


def test_edge_config_vectors():
    config = edge_config(CollectionSpec(dim=384, static_dim=32, bm25=True))
    assert set(config.vectors) == {"node", "chunks", "static"} and set(config.sparse_vectors) == {"bm25"}
    with_document = edge_config(CollectionSpec(dim=384, document_vector=True))
    assert set(with_document.vectors) == {"node", "chunks", "document"}
    assert with_document.vectors["document"].hnsw_config.m == 16
    assert config.vectors["chunks"].hnsw_config.m == 0 and config.vectors["node"].hnsw_config.m == 16
    assert config.vectors["chunks"].multivector_config is not None
