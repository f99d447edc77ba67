"""One search plan (issue 62): :func:`plan_search` decides rerank, alpha (and why), the document weight, the length
penalty and the prefetch depth from the caller's arguments and the store's defaults; each backend translates the plan's
engine request, and the length penalty is one backend-neutral formula that both engines compute as Python does."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

from lmk_rag.errors import InvalidInputError, SettingsMismatchError
from lmk_rag.store import EncodedQuery, Rerank, SearchOptions, StoreMode
from lmk_rag.store.edge import query_requests as edge_requests
from lmk_rag.store.query import (
    DEFAULT_ALPHA,
    DOCUMENT_WEIGHT,
    LENGTH_PENALTY,
    QUESTION_SHARE,
    SearchDefaults,
    evaluate,
    length_penalty,
    penalised,
    plan_search,
)
from lmk_rag.store.server import query_requests as server_requests
from lmk_rag.store.types import Branch, SparseVector

QUESTION = "How do I compare two files?"
STATEMENT = "compare two files line by line"


def _defaults(bm25: bool = True, alpha: float | None = None, mode: StoreMode = StoreMode.TRANSFORMER,
              weight: float = DOCUMENT_WEIGHT, measured: list[int] | None = None) -> SearchDefaults:
    """A store's defaults: a record with or without BM25, this handle's ``alpha``, a document weight measured into
    ``measured`` (one entry per measure)."""
    def measure() -> float:
        (measured if measured is not None else []).append(1)
        return weight

    record = {"bm25": bm25, "alpha": DEFAULT_ALPHA if bm25 else 1.0}
    return SearchDefaults.of("test-store", record, mode, SearchOptions(), alpha, measure)


def test_the_plan_decides_alpha_and_says_why() -> None:
    defaults = _defaults()
    statement, question = plan_search(defaults, text=STATEMENT), plan_search(defaults, text=QUESTION)
    assert (statement.alpha, statement.alpha_source) == (DEFAULT_ALPHA, "store")
    assert question.alpha == pytest.approx(DEFAULT_ALPHA + (1 - DEFAULT_ALPHA) * QUESTION_SHARE)
    assert question.alpha_source == "question"
    given = plan_search(defaults, text=QUESTION, alpha=0.4)  # a given alpha is the caller's, question or not
    assert (given.alpha, given.alpha_source) == (0.4, "given")
    handle = plan_search(_defaults(alpha=0.5), text=STATEMENT)  # this handle's alpha over the recorded one
    assert (handle.alpha, handle.alpha_source) == (0.5, "store")
    assert plan_search(_defaults(alpha=1.0), text=QUESTION).alpha_source == "store"  # 1 stays 1
    assert plan_search(defaults).alpha_source == "store"  # no text: no question


def test_a_store_without_bm25_ranks_by_the_rerank_and_refuses_an_alpha_below_one() -> None:
    defaults = _defaults(bm25=False)
    plan = plan_search(defaults, text=QUESTION)
    assert (plan.alpha, plan.alpha_source) == (1.0, "store")
    with pytest.raises(SettingsMismatchError, match=r"without BM25 .*\(alpha=0.5 .*search with alpha=1"):
        plan_search(defaults, text=STATEMENT, alpha=0.5)


def test_the_plan_decides_rerank_document_weight_length_penalty_and_depth() -> None:
    measured: list[int] = []
    defaults = _defaults(weight=DOCUMENT_WEIGHT / 2, measured=measured)
    chunks = plan_search(defaults, k=50, text=STATEMENT)
    assert chunks.rerank == Rerank.CHUNKS and measured == [1]
    assert chunks.document_weight == DOCUMENT_WEIGHT / 2
    assert chunks.length_penalty == pytest.approx(LENGTH_PENALTY / 2)
    assert chunks.length_penalty == length_penalty(chunks.document_weight)
    assert chunks.prefetch_limit == 200 and plan_search(defaults, k=3).prefetch_limit == 100  # at least 4 * k
    assert plan_search(defaults, prefetch_limit=7).prefetch_limit == 7
    node = plan_search(defaults, rerank="node", text=STATEMENT)  # the node cosine: no document cosine, no penalty
    assert (node.rerank, node.document_weight, node.length_penalty) == (Rerank.NODE, 0.0, 0.0)
    assert measured == [1, 1, 1]  # measured for the three chunk reranks only
    static = plan_search(_defaults(mode=StoreMode.STATIC), text=STATEMENT)
    assert (static.rerank, static.document_weight) == (Rerank.STATIC, 0.0)
    with pytest.raises(InvalidInputError, match="rerank 'none' is now called 'node'"):
        plan_search(defaults, rerank="none")
    for bad in ({"k": 0}, {"alpha": 1.5}, {"prefetch_limit": "100"}, {"rerank": "landmarks"}):
        with pytest.raises(InvalidInputError):
            plan_search(defaults, **bad)


def _request(weight: float) -> Any:
    """The engine request of a fused chunk search (two query vectors) in a store of document weight ``weight``."""
    plan = plan_search(_defaults(weight=weight), text=STATEMENT)
    return plan.request([0.6, 0.8], Branch("chunks", [[0.6, 0.8], [0.8, 0.6]]), SparseVector([3], [1.0]), None,
                        ["doc_id"])


def test_both_backends_translate_one_request_and_the_penalty_is_written_once() -> None:
    request = _request(DOCUMENT_WEIGHT)
    assert request.formula == penalised(2 * LENGTH_PENALTY)  # times the two query vectors the MaxSim sums
    assert request.alpha == DEFAULT_ALPHA and [s.using for s in request.scorers] == ["chunks", "document"]
    server = server_requests(request)
    edge = edge_requests(request)
    assert [r.using for r in server] == [None, "document", "bm25"] and len(edge) == 2  # Edge runs BM25 first
    formula = server[0].query  # $score - penalty * ln(document.chunks), from the one tree
    assert formula.formula.sum[0] == "$score" and formula.formula.sum[1].mult[0] == -2 * LENGTH_PENALTY
    assert formula.formula.sum[1].mult[1].ln == "document.chunks" and formula.defaults == {"document.chunks": 1.0}
    assert type(edge[0].query).__name__ == "Formula"
    unpenalised = _request(0.0)
    assert unpenalised.formula is None and type(edge_requests(unpenalised)[0].query).__name__ != "Formula"
    assert evaluate(request.formula, 1.5, {"document": {"chunks": 8}}) == pytest.approx(
        1.5 - 2 * LENGTH_PENALTY * np.log(8))
    assert evaluate(request.formula, 1.5, {}) == 1.5  # a node without the count pays nothing


def test_each_engine_computes_the_penalty_formula_as_python_does(open_store, docs) -> None:
    """On each backend, a chunk scorer's results under the plan's formula are its plain results rescored by
    :func:`evaluate` of the same formula (over each node's own ``document.chunks``)."""
    store = open_store(search=SearchOptions(document_weight=DOCUMENT_WEIGHT))
    store.upsert_documents([(name, text) for name, text in sorted(docs.items())])
    reader = store._reader
    query = EncodedQuery.of(store.encoder.encode_queries(STATEMENT), STATEMENT)
    plan = plan_search(reader.defaults, k=5, alpha=1.0, text=STATEMENT)
    scorer = reader.queries.scorer(plan.rerank, query)
    request = plan.request(np.asarray(query.vector).tolist(), scorer, None, reader._search_filter(None),
                           ["document", "doc_id"])
    assert request.formula == penalised(LENGTH_PENALTY * len(scorer.query))
    with reader.access.reading():
        rescored = store.backend.query(request)[0]
        plain = store.backend.query(dataclasses.replace(request, formula=None))[0]
    raw = {point.id: point for point in plain}
    assert len({point.payload["document"]["chunks"] for point in rescored}) > 1  # documents of several lengths
    for point in rescored:
        expected = evaluate(request.formula, raw[point.id].score, raw[point.id].payload)
        assert point.score == pytest.approx(expected, abs=1e-4)
