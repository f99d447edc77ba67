"""Single-vector and best-chunk ranking against plain Python loops."""

from __future__ import annotations

import numpy as np

from lmk_rag.eval.scoring import rank_best_chunk, rank_single, top_k


def test_top_k_orders_by_score_then_index() -> None:
    scores = np.array([[0.1, 0.9, 0.5, 0.9, -1.0]])
    assert top_k(scores, 3) == [[(1, 0.9), (3, 0.9), (2, 0.5)]]
    assert [doc for doc, _ in top_k(scores, 10)[0]] == [1, 3, 2, 0, 4]


def test_rank_single_matches_loop() -> None:
    rng = np.random.default_rng(0)
    queries, docs = rng.normal(size=(70, 8)), rng.normal(size=(30, 8))
    rankings = rank_single(queries, docs, 5)
    for query, ranking in zip(queries, rankings):
        expected = sorted(range(len(docs)), key=lambda i: -float(query @ docs[i]))[:5]
        assert [doc for doc, _ in ranking] == expected


def test_rank_best_chunk_is_maxsim_sum() -> None:
    rng = np.random.default_rng(1)
    docs = [rng.normal(size=(int(n), 6)).astype(np.float32) for n in rng.integers(1, 6, size=12)]
    queries = [rng.normal(size=(int(n), 6)).astype(np.float32) for n in rng.integers(1, 3, size=80)]
    rankings = rank_best_chunk(queries, docs, 12)
    for query, ranking in zip(queries, rankings):
        expected = [sum(max(float(q @ c) for c in doc) for q in query) for doc in docs]
        assert [doc for doc, _ in ranking] == sorted(range(len(docs)), key=lambda i: -expected[i])
        assert np.allclose([score for _, score in ranking], sorted(expected, reverse=True), atol=1e-5)
