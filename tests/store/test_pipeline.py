"""The ``lmk-rag`` eval pipeline: the product (encoder defaults, this store, two-stage search) on real pages."""

from __future__ import annotations

import pytest


@pytest.mark.slow
def test_lmk_rag_pipeline_ranks_documents_by_their_best_node(tmp_path, docs):
    from lmk_rag.eval.pipelines import PipelineOptions, get_pipeline, pipeline_names

    assert {"lmk-rag", "lmk-rag-dense"} <= set(pipeline_names())
    texts = list(docs.values())[:4]
    pipeline = get_pipeline("lmk-rag", PipelineOptions(cache_dir=tmp_path))
    stats = pipeline.index(texts)
    assert stats.encode_s > 0 and not stats.cached
    rankings = pipeline.search([text.split(". ")[0][:200] for text in texts], k=3)
    assert [ranking[0][0] for ranking in rankings] == [0, 1, 2, 3]
    assert all(len({doc for doc, _ in ranking}) == len(ranking) <= 3 for ranking in rankings)
    assert pipeline.settings["bm25"] is True and pipeline.settings["rerank"] == "chunks"
