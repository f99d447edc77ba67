"""benchmarks/fusion_study.py ranks by the store's own fusion: its ``store_ranking`` gives the documents that
``alpha * chunk MaxSim + (1 - alpha) * BM25 / best BM25`` ranks, best node per document, ties by node."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture(scope="module")
def fusion_study(benchmark_script):
    return benchmark_script("fusion_study")


@pytest.mark.parametrize("alpha", [0.3, 0.7, 0.9])
def test_store_ranking_is_the_store_fusion_of_the_engine_scores(fusion_study, alpha: float) -> None:
    rng = np.random.default_rng(7)
    candidates = np.array([3, 5, 8, 11, 14, 20, 21, 30])
    node_doc = np.arange(40) // 3  # three nodes per document
    dense = rng.uniform(-0.2, 0.9, len(candidates))
    lexical = np.where(rng.uniform(size=len(candidates)) < 0.6, rng.uniform(0, 12, len(candidates)), 0.0)
    query_chunks = rng.normal(size=(4, 8)).astype(np.float32)
    expected_scores = alpha * dense + (1 - alpha) * lexical / lexical.max()
    expected: list[int] = []
    for index in sorted(range(len(candidates)), key=lambda i: (-round(expected_scores[i], 6), candidates[i])):
        doc = int(node_doc[candidates[index]])
        if doc not in expected:
            expected.append(doc)
    assert fusion_study.store_ranking(candidates, dense, lexical, query_chunks, alpha, node_doc, k=10) == expected
