"""Engine calls per search and per document write, counted on real backends (Qdrant Edge on disk, qdrant-client
local mode, a Qdrant server when ``QDRANT_URL`` is set) by a wrapper around each backend's engine object (issue 26,
item 4): a search is one Query API call on a server; where the process is the store's only writer, one more call
reads the final hits' payloads, and on Edge a fused search runs its BM25 search first, in a call of its own; a write
and a delete take the counts docs/store.md states."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import qdrant_edge as qe

from lmk_rag.store import EncodedQuery, LandmarkStore, NodeRecord
from lmk_rag.store.edge import EdgeBackend, _plain_search, _scored, query_requests
from lmk_rag.store.query import carry_payloads, fuse


class CountingEngine:
    """An engine object (an Edge shard, a qdrant-client client's transport) passing every call through, counted by
    method name in :attr:`calls`."""

    def __init__(self, target: Any) -> None:
        self._target = target
        self.calls: Counter[str] = Counter()

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._target, name)
        if not callable(method):
            return method

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            return method(*args, **kwargs)

        return counted

    def take(self) -> Counter[str]:
        """The calls counted since the last take."""
        calls, self.calls = self.calls, Counter()
        return calls


def count_engine_calls(store: LandmarkStore, monkeypatch: pytest.MonkeyPatch) -> tuple[CountingEngine, Counter[str]]:
    """Wrap the store's engine object in a :class:`CountingEngine` and count its settings rewrites (a file on Edge,
    a settings point, so an engine upsert too, on qdrant-client backends)."""
    backend = store.backend
    attribute = "_shard" if isinstance(backend, EdgeBackend) else "_api"
    engine = CountingEngine(getattr(backend, attribute))
    monkeypatch.setattr(backend, attribute, engine)
    rewrites: Counter[str] = Counter()
    write_settings = backend.write_settings

    def counted_write_meta(meta: dict[str, Any]) -> None:
        rewrites["write_settings"] += 1
        write_settings(meta)

    monkeypatch.setattr(backend, "write_settings", counted_write_meta)
    return engine, rewrites


def _renamed(records: list[NodeRecord], doc_id: str) -> list[NodeRecord]:
    return [dataclasses.replace(r, doc_id=doc_id, node_id=f"{doc_id}#{i}") for i, r in enumerate(records)]


@pytest.fixture
def filled(open_store: Callable[..., LandmarkStore], doc_records: dict[str, list[NodeRecord]]) -> LandmarkStore:
    """A store of the eight documents, searched once (a handle's first search samples the stored vectors)."""
    store = open_store()
    store.upsert_encoded_documents(list(doc_records.items()))
    store.search_vector(np.asarray(doc_records["page0.txt"][0].vector), k=1)
    return store


#: Searches that run a plain BM25 search beside the rerank (a query text and 0 < alpha < 1): Edge runs it first, in a
#: call of its own, so that the sparse search runs once (docs/decisions.md, issue 29).
FUSED_SEARCHES = {"fused", "fused, node level", "filtered", "node rerank"}


def test_every_search_is_one_query_api_call_and_the_hits_payloads(filled: LandmarkStore, minilm_encoder,
                                                                   monkeypatch) -> None:
    text = "compare two files line by line"
    encoded = minilm_encoder.encode_queries(text)
    query = EncodedQuery.of(encoded, text)
    assert filled.document_weight > 0  # measured on a sample once, not by each search
    engine, _ = count_engine_calls(filled, monkeypatch)
    searches = {
        "fused": lambda: filled.search_encoded(query, k=5),
        "fused, node level": lambda: filled.search_encoded(query, k=5, one_per_document=False),
        "filtered": lambda: filled.search_encoded(query, k=5, filter={"group": "even"}),
        "BM25 alone": lambda: filled.search_encoded(query, k=5, alpha=0.0),
        "dense alone": lambda: filled.search_encoded(encoded, k=5),
        "node rerank": lambda: filled.search_encoded(query, k=5, rerank="node"),
        "by vector": lambda: filled.search_vector(query.vector, k=5),
        "mmr": lambda: filled.search_mmr(query.vector, k=5),
    }
    edge = isinstance(filled.backend, EdgeBackend)
    only_writer = filled.backend.single_writer
    for name, search in searches.items():
        hits = search()
        calls = engine.take()
        assert hits and all(hit.text and hit.span[1] > 0 and hit.doc_id for hit in hits), name
        reads = calls.pop("retrieve", 0)  # the hits' payloads, by id: k points, 2k first for document-level hits
        assert sum(calls.values()) == 1 + (edge and name in FUSED_SEARCHES), (name, calls)
        if not only_writer or name == "mmr":
            assert reads == 0, name
        elif name == "fused, node level":
            assert reads == 1
        else:  # twice as many points each time until k documents: this store has 4 even documents, not 5
            assert 1 <= reads <= (4 if name == "filtered" else 2), (name, reads)


@pytest.mark.parametrize("backend", ["edge"])
def test_edge_scores_the_candidates_of_one_query_api_call(filled: LandmarkStore, minilm_encoder,
                                                          monkeypatch) -> None:
    """Edge's two calls (the BM25 search, then the rerank taking its points by id) give the final scores that the
    one Query API call as Qdrant documents it gives (a BM25 prefetch branch beside the dense one, and the plain BM25
    search in the same batch), with prefetches narrow enough that each branch brings candidates of its own."""
    backend = filled.backend
    plans = []
    query_plan = backend.query
    monkeypatch.setattr(backend, "query", lambda plan: plans.append(plan) or query_plan(plan))
    for text, prefetch_limit in [("compare two files line by line", 3), ("sort lines of text files", 2)]:
        query = EncodedQuery.of(minilm_encoder.encode_queries(text), text)
        for rerank in ("chunks", "node"):
            filled.search_encoded(query, k=1, rerank=rerank, prefetch_limit=prefetch_limit)
            plan = plans[-1]
            two_calls = query_plan(plan)
            one_call = [_scored(points) for points in backend.shard.query_batch(qe.QueryBatchRequest(
                [*query_requests(plan), _plain_search(plan)]))]
            reranked = {p.id for p in two_calls[0]}
            assert reranked - {p.id for p in two_calls[-1]}, "no candidate of the dense branch alone"
            assert {p.id for p in two_calls[-1]} <= reranked and len(reranked) > prefetch_limit
            assert fuse(plan, carry_payloads(plan, two_calls)) == fuse(plan, carry_payloads(plan, one_call))


#: Engine calls of rewriting one stored document of fewer than 64 nodes, by backend: Edge's are shard calls
#: (``update`` for upserts, set-payload and delete), qdrant-client's are client calls (a local-mode folder records
#: its committed counts in the settings point: the two extra upserts).
WRITE_CALLS = {
    "qdrant-edge": {"retrieve": 1, "update": 4, "flush": 1},
    "qdrant-local": {"retrieve": 1, "upsert": 5, "set_payload": 1, "delete": 1},
    "qdrant-server": {"retrieve": 1, "upsert": 3, "set_payload": 1, "delete": 1},
}
#: Engine calls of deleting one document.
DELETE_CALLS = {
    "qdrant-edge": {"retrieve": 1, "update": 1, "flush": 1},
    "qdrant-local": {"retrieve": 1, "delete": 1, "upsert": 2},
    "qdrant-server": {"retrieve": 1, "delete": 1},
}


def test_a_document_write_and_delete_take_the_stated_engine_calls(filled: LandmarkStore, doc_records,
                                                                  monkeypatch) -> None:
    engine, rewrites = count_engine_calls(filled, monkeypatch)
    records = doc_records["page1.txt"]
    assert 1 < len(records) < 63
    filled.upsert_encoded_document("page0.txt", _renamed(records, "page0.txt"))
    assert engine.take() == Counter(WRITE_CALLS[filled.backend.name])
    # the committed counts, before and after
    assert rewrites.pop("write_settings", 0) == (2 if filled.backend.single_writer else 0)
    assert filled.delete_document("page0.txt")
    assert engine.take() == Counter(DELETE_CALLS[filled.backend.name])
    assert rewrites.pop("write_settings", 0) == (2 if filled.backend.single_writer else 0)
    assert not filled.delete_document("page0.txt")
    assert engine.take() == Counter({"retrieve": 1}) and not rewrites  # nothing to delete: nothing recorded
    assert filled.count() == sum(len(r) for r in doc_records.values()) - len(doc_records["page0.txt"])
    assert filled.check() == []
