"""The studies of benchmarks/studies/ run: each imports and answers ``--help``; and ``common.store_ranking`` ranks by
the store's own fusion: the documents that ``alpha * chunk MaxSim + (1 - alpha) * BM25 / best BM25`` ranks, best
node per document, ties by node."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

import numpy as np
import pytest

STUDIES = Path(__file__).resolve().parents[2] / "benchmarks" / "studies"
SCRIPTS = sorted(path.name for path in STUDIES.glob("*.py") if path.name != "common.py")


@pytest.mark.parametrize("script", SCRIPTS)
def test_every_study_imports_and_shows_its_help(study_module, script: str, monkeypatch, capsys) -> None:
    monkeypatch.setattr(sys, "argv", [script, "--help"])
    with pytest.raises(SystemExit) as exit_info:
        runpy.run_path(str(STUDIES / script), run_name="__main__")
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: {script}")


@pytest.mark.parametrize("alpha", [0.3, 0.7, 0.9])
def test_store_ranking_is_the_store_fusion_of_the_engine_scores(study_module, alpha: float) -> None:
    common = study_module("common")
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
    assert common.store_ranking(candidates, dense, lexical, query_chunks, alpha, node_doc, k=10) == expected


def test_the_combiner_starts_at_the_product_fusion(study_module) -> None:
    """combiner_study's starting weights score every candidate as the store does: the question gate's alpha, the
    store's document weight on the document cosine, the node cosine unused."""
    from lmk_rag.store.query import DOCUMENT_WEIGHT, query_alpha

    study = study_module("combiner_study")
    rng = np.random.default_rng(3)
    rows = []
    expected = []
    contexts = []
    for asked, scaled in ((0.0, 0.0), (1.0, 0.0), (0.0, 1.0), (1.0, 0.4)):
        scores = np.column_stack([rng.uniform(0, 1, (5, 3)), rng.uniform(0, 1, 5), rng.uniform(0, 1, (5, 3))])
        alpha, weight = query_alpha(0.7, "why?" if asked else "why"), DOCUMENT_WEIGHT * scaled
        expected.append(alpha * ((1 - weight) * scores[:, 0] + weight * scores[:, 1]) + (1 - alpha) * scores[:, 3])
        contexts.append([1.0, asked, scaled, asked * scaled, rng.uniform(), rng.uniform(), rng.uniform()])
        rows.append(scores)
    query_set = study.QuerySet(name="toy", data=None, nodes=[np.arange(5)] * 4, node_doc=np.arange(5),
                               scores=np.concatenate(rows), context=np.asarray(contexts),
                               starts=np.arange(0, 25, 5), relevant=np.zeros(20, dtype=bool))
    combined = study.candidate_scores(query_set, study.product_weights(), (0, 1, 2, 3))
    assert np.allclose(combined, np.concatenate(expected))


def test_against_stock_pairs_every_variant_with_the_tuned_stock_row(study_module) -> None:
    """A variant's row holds its mean, its paired difference to the study's reference (``store`` where the study
    has it) and to the tuned stock row; a lead of +0.03 whose interval lies above 0 is bold, a smaller one is not."""
    against = study_module("against_stock")
    queries = [f"q{i}" for i in range(40)]
    stock = dict.fromkeys(queries, 0.5)
    rows = [{"dataset": "toy", "label": label, "per_query": {q: {"ndcg@10": value} for q, value in values.items()}}
            for label, values in (("llamaindex-fused-tuned", stock), ("lmk-rag", dict.fromkeys(queries, 0.52)))]
    variants = {"store": dict.fromkeys(queries, 0.52), "far": dict.fromkeys(queries, 0.6),
                "near": dict.fromkeys(queries, 0.51)}
    lines = against.table("toy", {"granularity": {"toy": variants}, "other": {}}, rows)
    assert lines[2] == "Tuned stock row 0.500; lmk-rag (the report's run) 0.520, +0.020 [+0.020, +0.020] over it."
    assert "| granularity | store (reference) | 0.520 | +0.000 [+0.000, +0.000] | +0.020 [+0.020, +0.020] |" in lines
    assert "| granularity | far | 0.600 | +0.080 [+0.080, +0.080] | **+0.100 [+0.100, +0.100]** |" in lines
    assert "| granularity | near | 0.510 | -0.010 [-0.010, -0.010] | +0.010 [+0.010, +0.010] |" in lines
