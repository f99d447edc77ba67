"""Pure parts: filter translation (both backends' builders) and the qdrant-client request builders
that carry the pass-through settings (shards, replication, gRPC, parallel upload)."""

from __future__ import annotations

import numpy as np
import pytest
import qdrant_edge as qe
from qdrant_client import models

from lmk_rag.errors import CorruptStoreError, InvalidInputError
from lmk_rag.store.edge import EdgeConditions, edge_config
from lmk_rag.store.edge import query_requests as edge_requests
from lmk_rag.store.filters import FieldCondition, Filter, as_filter, payload_key, translate
from lmk_rag.store.query import SearchDefaults, carry_payloads, fuse, penalised, plan_mmr, plan_search
from lmk_rag.store.server import (
    ServerConditions,
    client_kwargs,
    create_collection_request,
    query_requests,
    upload_request,
)
from lmk_rag.store.types import (
    Branch,
    CollectionSpec,
    PointData,
    Rerank,
    ScoredPointData,
    SearchOptions,
    ServerOptions,
    SparseVector,
    Storage,
)


def test_payload_keys_put_metadata_under_meta():
    assert payload_key("doc_id") == "doc_id"
    assert payload_key("lang") == 'meta."lang"'
    assert payload_key("a.b") == 'meta."a"."b"'
    assert payload_key("my key.items[].$id") == 'meta."my key"."items"[]."$id"'
    for bad in ("a..b", 'q"uote', "back\\slash", "a[x]", "[]"):
        with pytest.raises(InvalidInputError, match="cannot name a metadata field"):
            payload_key(bad)


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
        models.FieldCondition(key='meta."lang"', match=models.MatchValue(value="en")),
        models.FieldCondition(key='meta."year"', range=models.Range(gte=2020.0)),
    ]
    assert inner.should == [
        models.FieldCondition(key='meta."tag"', match=models.MatchAny(any=["a", "b"])),
        models.FieldCondition(key='meta."title"', match=models.MatchText(text="socket")),
    ]
    assert inner.must_not[0] == models.Filter(
        must_not=[models.FieldCondition(key="doc_id", match=models.MatchValue(value="x"))]
    )
    assert inner.must_not[1] == models.IsEmptyCondition(is_empty=models.PayloadField(key='meta."draft"'))


def test_translate_dict_and_edge_builder():
    assert as_filter({"lang": "en", "tag": ["a", "b"]}) == Filter(
        must=(FieldCondition("lang", "eq", "en"), FieldCondition("tag", "in", ["a", "b"]))
    )
    assert translate(None, EdgeConditions()) is None
    native = translate({"lang": "en"}, EdgeConditions())
    assert native.must[0].key == "meta.lang" and native.must[0].match.value == "en"


def test_floats_none_and_mixed_lists_become_ranges_emptiness_and_groups():
    b = ServerConditions()
    native = translate(Filter(must=[FieldCondition("w", "eq", 2.0), FieldCondition("w", "eq", None)],
                              must_not=[FieldCondition("w", "in", [1, 2, "x", 0.5, True])]), b)
    assert native.must == [
        models.FieldCondition(key='meta."w"', range=models.Range(gte=2.0, lte=2.0)),
        models.IsEmptyCondition(is_empty=models.PayloadField(key='meta."w"')),
    ]
    assert native.must_not[0].should == [
        models.FieldCondition(key='meta."w"', match=models.MatchAny(any=["x"])),
        models.FieldCondition(key='meta."w"', range=models.Range(gte=1.0, lte=1.0)),  # 1 and 1.0 alike
        models.FieldCondition(key='meta."w"', range=models.Range(gte=2.0, lte=2.0)),
        models.FieldCondition(key='meta."w"', range=models.Range(gte=0.5, lte=0.5)),
        models.FieldCondition(key='meta."w"', match=models.MatchValue(value=True)),
    ]
    assert translate({"w": []}, b).must[0] == models.FieldCondition(key='meta."w"', match=models.MatchAny(any=[]))


def test_edge_builder_matches_booleans_as_booleans():
    condition = EdgeConditions().match("meta.flag", True)
    assert type(condition.match.value).__name__ == "bool"  # the binding reads a Python bool as the integer 1


def test_mmr_plan_is_one_nearest_query_with_mmr():
    plan = plan_mmr([0.1, 0.2], 0.25, candidates=50, k=5, filter=None, payload_keys=["doc_id"])
    (request,) = query_requests(plan)
    assert request.using == "node" and request.prefetch is None and request.limit == 5
    assert request.query == models.NearestQuery(
        nearest=[0.1, 0.2], mmr=models.Mmr(diversity=0.75, candidates_limit=50)
    )
    (edge,) = edge_requests(plan)
    assert (edge.limit, edge.query.lambda_, edge.query.candidates_limit) == (5, 0.25, 50)


@pytest.mark.parametrize(
    "bad", [lambda: FieldCondition("a", "like", 1), lambda: FieldCondition("a", "in", "abc"),
            lambda: FieldCondition("a", "gt", "3"), lambda: as_filter([("a", 1)])]
)
def test_bad_filters_are_refused(bad):
    with pytest.raises(InvalidInputError):
        bad()


def test_client_kwargs_put_the_store_arguments_over_client_kwargs():
    options = ServerOptions(prefer_grpc=True, timeout=30, client_kwargs={"https": True, "grpc_port": 6334})
    assert client_kwargs("http://q:6333", "k", None, options) == {
        "url": "http://q:6333", "api_key": "k", "prefer_grpc": True, "timeout": 30, "https": True, "grpc_port": 6334,
        "check_compatibility": False}  # the backend checks the server's version itself, on opening
    assert client_kwargs(None, None, ":memory:", ServerOptions()) == {"location": ":memory:"}
    assert client_kwargs(None, None, "/tmp/x", ServerOptions(client_kwargs={"force_disable_check_same_thread": True})
                         ) == {"path": "/tmp/x", "force_disable_check_same_thread": True}


def test_create_collection_request_passes_cluster_settings():
    spec = CollectionSpec(dim=384, static_dim=64, bm25=True, storage=Storage(quantization="int8"))
    request = create_collection_request("c", spec, shard_number=6, replication_factor=2, write_consistency_factor=2)
    assert (request["shard_number"], request["replication_factor"], request["write_consistency_factor"]) == (6, 2, 2)
    vectors = request["vectors_config"]
    assert vectors["node"].hnsw_config.m == 16 and vectors["node"].multivector_config is None
    assert vectors["document"].hnsw_config.m == 0 and vectors["document"].multivector_config is None
    for name, size in (("chunks", 384), ("static", 64)):
        assert vectors[name].size == size
        assert vectors[name].multivector_config.comparator == models.MultiVectorComparator.MAX_SIM
        assert vectors[name].hnsw_config.m == 0
        assert vectors[name].quantization_config.scalar.type == models.ScalarType.INT8
    assert request["sparse_vectors_config"]["bm25"].modifier == models.Modifier.IDF
    plain = create_collection_request("c", CollectionSpec(dim=8))
    assert "shard_number" not in plain and "sparse_vectors_config" not in plain
    assert set(plain["vectors_config"]) == {"node", "chunks", "document"}
    assert all(v.memory is None and v.quantization_config is None for v in plain["vectors_config"].values())
    assert plain["payload"].memory == models.Memory.CACHED  # warmed when the collection loads, as its vectors


def test_create_collection_request_places_and_compresses_each_vector():
    storage = Storage(quantization="binary", node_quantization="turbo4", on_disk=True, hnsw_on_disk=True)
    vectors = create_collection_request("c", CollectionSpec(dim=8, static_dim=4, storage=storage))["vectors_config"]
    assert {name: v.memory for name, v in vectors.items()} == dict.fromkeys(("node", "chunks", "document", "static"),
                                                                            models.Memory.COLD)
    assert vectors["node"].hnsw_config.memory == models.Memory.COLD
    assert create_collection_request("c", CollectionSpec(dim=8, storage=storage))["payload"].memory == \
        models.Memory.COLD
    assert vectors["node"].quantization_config.turbo.bits == models.TurboQuantBitSize.BITS4
    assert vectors["node"].quantization_config.turbo.memory == models.Memory.PINNED
    assert vectors["chunks"].quantization_config.binary.memory == models.Memory.PINNED


def test_search_tuning_becomes_the_dense_searches_params():
    oversampled = query_requests(_plan(options=SearchOptions(hnsw_ef=32, oversampling=3.0)))
    (prefetch_node, prefetch_bm25), rerank = oversampled[0].prefetch, oversampled[0]
    assert prefetch_node.params.hnsw_ef == 32 and prefetch_node.params.quantization.oversampling == 3.0
    assert prefetch_node.params.quantization.rescore is True
    assert prefetch_bm25.params is None and rerank.params.quantization.rescore is True  # TurboQuant needs it said
    exact = query_requests(_plan(options=SearchOptions(exact=True)))
    assert exact[0].prefetch[0].params.exact is True and exact[0].prefetch[0].params.quantization.ignore is True
    assert exact[0].params.exact is True  # the rerank skips the quantized copies too
    assert [r.params for r in query_requests(_plan())][1] is None  # the plain BM25 search
    assert [r.params for r in query_requests(_plan(options=SearchOptions(hnsw_ef=8)), local=True)] == [None, None]


def test_upload_request_is_batched_and_parallel():
    vectors = {"node": [0.1, 0.2], "bm25": SparseVector([1], [0.5])}
    points = [PointData("6f1d3c52-7f4e-4a55-9a38-5b1f0c2d9e10", vectors, {"a": 1})]
    request = upload_request("c", points, parallel=4, batch_size=128, max_retries=5)
    assert (request["parallel"], request["batch_size"], request["max_retries"], request["wait"]) == (4, 128, 5, True)
    assert request["points"][0].vector["bm25"] == models.SparseVector(indices=[1], values=[0.5])


def _plan(alpha: float = 0.7, sparse: SparseVector | None = SparseVector([3], [1.0]),
          scorer: Branch = Branch("chunks", [[0.1, 0.2]]), document_weight: float = 0.0,
          options: SearchOptions = SearchOptions()):
    """The engine request of a search planned by the store's rule (:func:`plan_search`) for a query vector
    ``[0.1, 0.2]``, a ``scorer`` and a BM25 vector, in a store whose document weight is ``document_weight``."""
    defaults = SearchDefaults("test", True, 0.7, Rerank.CHUNKS, options, lambda: document_weight)
    plan = plan_search(defaults, k=10, rerank=scorer.using, alpha=alpha, prefetch_limit=100)
    return plan.request([0.1, 0.2], scorer, sparse, None, ["doc_id"])


def test_fused_plan_is_one_batch_of_the_rerank_and_a_plain_bm25_search():
    fused = query_requests(_plan())
    assert [(r.using, r.query) for r in fused] == [("chunks", [[0.1, 0.2]]), ("bm25", models.SparseVector(
        indices=[3], values=[1.0]))]
    rerank, lexical = fused  # the rerank scores the union of the dense and BM25 branches
    assert [(p.using, p.limit) for p in rerank.prefetch] == [("node", 100), ("bm25", 100)] and rerank.limit == 200
    assert lexical.prefetch is None and lexical.limit == 100  # BM25 of its own top nodes
    assert rerank.with_payload == ["doc_id"] and lexical.with_payload is False  # the rerank carries the payloads
    alone = query_requests(_plan(alpha=1.0))  # BM25 widens the prefetch, MaxSim alone ranks
    assert [r.using for r in alone] == ["chunks"] and [p.using for p in alone[0].prefetch] == ["node", "bm25"]
    lexical = query_requests(_plan(alpha=0.0))  # BM25 alone over the whole collection
    assert [(r.using, r.prefetch) for r in lexical] == [("bm25", None)]
    plain = query_requests(_plan(sparse=None, scorer=Branch("node", [0.1, 0.2]),
                                      options=SearchOptions(hnsw_ef=64)))
    assert [(r.using, r.prefetch, r.params.hnsw_ef) for r in plain] == [("node", None, 64)]
    stop_words = query_requests(_plan(sparse=SparseVector([], [])))  # a query of stop words only: dense alone
    assert [r.using for r in stop_words] == ["chunks"] and [p.using for p in stop_words[0].prefetch] == ["node"]


def test_the_plain_search_takes_its_payloads_from_the_rerank():
    plan = _plan()
    rerank = [ScoredPointData("a", 0.9, {"doc_id": "x"}), ScoredPointData("b", 0.5, {"doc_id": "y"})]
    searched = [ScoredPointData("b", 7.0, {}), ScoredPointData("c", 3.0, {})]  # c: a tie the prefetch broke otherwise
    carried = carry_payloads(plan, [rerank, searched])
    assert carried[0] == rerank and carried[1] == [ScoredPointData("b", 7.0, {"doc_id": "y"})]
    alone = _plan(alpha=1.0)  # no plain search: nothing to carry
    assert carry_payloads(alone, [rerank]) == [rerank]


def test_fusion_normalises_both_sides():
    plan = _plan(0.5, scorer=Branch("chunks", [[0.1, 0.2]] * 4))  # a 4-vector query: MaxSim sums 4 cosines
    dense = [ScoredPointData("a", 3.2, {}), ScoredPointData("b", 2.0, {}), ScoredPointData("c", 1.0, {})]
    lexical = [ScoredPointData("b", 10.0, {}), ScoredPointData("d", 5.0, {})]
    fused = {p.id: p.score for p in fuse(plan, [dense, lexical])}
    assert fused == pytest.approx({"a": 0.4, "b": 0.75, "c": 0.125, "d": 0.125 + 0.25})
    assert [p.id for p in fuse(plan, [dense, lexical])] == ["b", "a", "d", "c"]  # ties by point id


def test_the_document_cosine_is_a_second_scorer_blended_into_the_dense_side():
    plan = _plan(0.5, scorer=Branch("chunks", [[0.1, 0.2]] * 2), document_weight=0.25)
    rerank, scored, lexical = query_requests(plan)  # the document cosine scores the same candidates
    (maxsim,) = rerank.prefetch  # the rerank: chunk MaxSim of the candidates, less the length penalty
    assert (scored.using, scored.query) == ("document", [0.1, 0.2]) and scored.prefetch == maxsim.prefetch
    assert lexical.using == "bm25" and plan.document_weight == 0.25
    dense = [ScoredPointData("a", 1.6, {}), ScoredPointData("b", 1.0, {})]  # MaxSim of 2 query vectors: 0.8, 0.5
    cosines = [ScoredPointData("b", 0.9, {}), ScoredPointData("a", 0.2, {})]
    lexical_scores = [ScoredPointData("b", 4.0, {})]
    fused = {p.id: p.score for p in fuse(plan, [dense, cosines, lexical_scores])}
    assert fused == pytest.approx({"a": 0.5 * (0.75 * 0.8 + 0.25 * 0.2), "b": 0.5 * (0.75 * 0.5 + 0.25 * 0.9) + 0.5})
    for unblended in (_plan(), _plan(document_weight=0.25, alpha=0.0)):
        assert unblended.document_weight == 0.0 and "document" not in [s.using for s in unblended.scorers]
        assert unblended.formula is None


def test_a_store_of_documents_takes_a_length_penalty_off_chunk_maxsim_in_the_engine():
    from lmk_rag.store.query import DOCUMENT_WEIGHT, LENGTH_PENALTY, length_penalty

    assert length_penalty(0.0) == 0.0 and length_penalty(DOCUMENT_WEIGHT) == LENGTH_PENALTY
    assert length_penalty(DOCUMENT_WEIGHT / 2) == pytest.approx(LENGTH_PENALTY / 2) and length_penalty(1.0) == \
        LENGTH_PENALTY  # scaled like the document cosine below the full weight, no further
    chunks = Branch("chunks", [[0.1, 0.2]] * 3)  # MaxSim sums 3 cosines: so does the penalty
    plan = _plan(scorer=chunks, document_weight=0.125)
    penalty = 3 * LENGTH_PENALTY / 2
    assert plan.formula.terms[1].factors[0].value == pytest.approx(-penalty)
    assert plan.formula == penalised(-plan.formula.terms[1].factors[0].value)  # written once, in query.py
    rerank = query_requests(plan)[0]
    (maxsim,) = rerank.prefetch
    assert (maxsim.using, maxsim.query, maxsim.limit) == ("chunks", chunks.query, rerank.limit)
    formula = rerank.query.formula  # $score - penalty * ln(document.chunks)
    assert formula.sum[0] == "$score" and formula.sum[1].mult[0] == pytest.approx(-penalty)
    assert formula.sum[1].mult[1].ln == "document.chunks" and rerank.query.defaults == {"document.chunks": 1}
    static = _plan(scorer=Branch("static", [[0.1, 0.2]]), document_weight=0.25)  # chunk MaxSim's: static pays none
    assert static.formula is None
    # a penalised MaxSim may lie below -1; a damaged vector's score is still refused
    lowest = ScoredPointData("a", 3 * -1.0 - penalty * np.log(10**6), {"node_id": "n"})
    assert fuse(plan, [[lowest], [ScoredPointData("a", 0.1, {})], []])[0].id == "a"
    with pytest.raises(CorruptStoreError):
        fuse(plan, [[ScoredPointData("a", 3 * -9.0, {"node_id": "n"})], [], []])


def _documents(rng: np.random.Generator, topics: int, chunks: int, glued: bool, shift: float) -> tuple:
    """Sampled documents as :func:`document_weight` takes them: each one's mean unit chunk vector and its chunk
    count. A chunk is its document's topic (glued: a topic of its own) plus noise, plus ``shift`` along one common
    direction (a model whose unrelated texts have a positive cosine), made unit."""
    centres = rng.normal(size=(topics * chunks + topics, 48))
    common = np.eye(48)[0] * shift
    means = []
    for doc in range(topics):
        picked = centres[topics + doc * chunks + np.arange(chunks)] if glued else np.repeat(centres[[doc]], chunks, 0)
        vectors = picked + 0.8 * rng.normal(size=(chunks, 48)) + common * np.sqrt(48)
        means.append((vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).mean(axis=0))
    return np.asarray(means), np.full(topics, chunks)


@pytest.mark.parametrize("shift", [0.0, 1.0, 3.0])
def test_the_document_weight_tells_whole_documents_from_glued_texts_whatever_the_model(shift):
    from lmk_rag.store.query import DOCUMENT_WEIGHT, document_weight

    rng = np.random.default_rng(0)
    assert document_weight(*_documents(rng, 40, 30, glued=False, shift=shift)) == DOCUMENT_WEIGHT
    assert document_weight(*_documents(rng, 40, 30, glued=True, shift=shift)) == 0.0
    means, chunks = _documents(rng, 40, 1, glued=False, shift=shift)  # one chunk each: a document agrees with itself
    assert document_weight(means, chunks) == DOCUMENT_WEIGHT
    assert document_weight(means[:1], chunks[:1]) == 0.0  # one document: nothing to compare


def test_edge_config_vectors():
    config = edge_config(CollectionSpec(dim=384, static_dim=32, bm25=True))
    assert set(config.vectors) == {"node", "chunks", "document", "static"} and set(config.sparse_vectors) == {"bm25"}
    plain = edge_config(CollectionSpec(dim=384))
    assert set(plain.vectors) == {"node", "chunks", "document"} and not plain.sparse_vectors
    assert config.vectors["chunks"].hnsw_config.m == 0 and config.vectors["node"].hnsw_config.m == 16
    assert config.vectors["document"].hnsw_config.m == 0  # scored on candidates only: no graph
    assert config.vectors["chunks"].multivector_config is not None
    assert all(v.memory is None and v.quantization_config is None for v in config.vectors.values())
    assert config.payload_memory == qe.Memory.Cached
    storage = Storage(quantization="int8", node_quantization="binary", on_disk=True, hnsw_on_disk=True)
    placed = edge_config(CollectionSpec(dim=384, static_dim=32, storage=storage))
    assert all(v.memory == qe.Memory.Cold for v in placed.vectors.values())
    assert placed.vectors["node"].hnsw_config.memory == qe.Memory.Cold and placed.payload_memory == qe.Memory.Cold
    assert placed.vectors["chunks"].quantization_config.memory == qe.Memory.Pinned
    assert placed.vectors["node"].quantization_config.memory == qe.Memory.Pinned


def test_rerank_modes_are_the_enum_values_only():
    from lmk_rag.store.query import check_rerank
    from lmk_rag.store.types import Rerank

    assert [check_rerank(mode.value) for mode in Rerank] == list(Rerank)
    with pytest.raises(InvalidInputError, match="rerank must be one of 'chunks', 'static', 'node', got 'landmarks'"):
        check_rerank("landmarks")  # the old name of "chunks", removed in 0.x
    with pytest.raises(InvalidInputError, match="rerank 'none' is now called 'node'"):
        check_rerank("none")  # the old name of "node" (it still ranks: by the node vector), in a record or a script
