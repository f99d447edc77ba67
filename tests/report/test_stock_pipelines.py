"""The stock LlamaIndex pipelines of ``benchmarks/stock_pipelines.py`` (what lmk-rag is measured against): they
register in the eval harness when imported, never with the package, and each runs the real LlamaIndex classes."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from lmk_rag.errors import InvalidInputError
from lmk_rag.eval import PipelineOptions, evaluate, get_pipeline, load_beir, pipeline_names, subsample

STOCK = ["llamaindex-default", "llamaindex-chunked", "llamaindex-chunked-bm25", "llamaindex-hybrid-relative",
         "llamaindex-hybrid-rrf", "llamaindex-fused"]


@pytest.fixture(scope="module", autouse=True)
def stock(benchmark_script: Callable[[str], ModuleType]) -> ModuleType:
    """benchmarks/stock_pipelines.py imported as a module (which registers its pipelines)."""
    return benchmark_script("stock_pipelines")


def test_importing_the_module_registers_the_stock_pipelines_and_the_package_never_does() -> None:
    assert set(STOCK) <= set(pipeline_names())
    code = "import lmk_rag.eval, lmk_rag.cli; print(*lmk_rag.eval.pipeline_names())"
    alone = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert "bm25" in alone and not [name for name in alone if name.startswith("llamaindex")], alone


@pytest.mark.slow
def test_llamaindex_default_ranks_every_document_of_a_small_set(fixture_data: Path, eval_cache: Path) -> None:
    dataset = subsample(load_beir(fixture_data / "manpages-needle" / "L512"), max_queries=5, max_docs=8)
    report = evaluate(dataset, "llamaindex-default", PipelineOptions(cache_dir=eval_cache))
    pipeline = get_pipeline("llamaindex-default", PipelineOptions(cache_dir=eval_cache))
    pipeline.index(dataset.doc_texts)
    for ranking in pipeline.search(dataset.query_texts, 3):
        assert len(ranking) == 3 and len({doc for doc, _ in ranking}) == 3
        assert all(0 <= doc < len(dataset.doc_texts) for doc, _ in ranking)
        assert [score for _, score in ranking] == sorted((score for _, score in ranking), reverse=True)
    assert report["recall@100"] == 1.0  # 8 documents: all are ranked


CHUNKED = ["llamaindex-chunked", "llamaindex-chunked-bm25", "llamaindex-hybrid-relative", "llamaindex-hybrid-rrf",
           "llamaindex-fused"]


def test_fused_scores_match_a_hand_computation(stock: ModuleType) -> None:
    dense = {0: 0.9, 1: 0.5, 2: 0.7}  # min 0.5, max 0.9: 0 -> 1, 1 -> 0, 2 -> 0.5, 3 (missing) -> 0
    lexical = {1: 10.0, 3: 4.0, 0: 6.0}  # min 4, max 10: 1 -> 1, 3 -> 0, 0 -> 1/3, 2 (missing) -> 0
    fused = stock.fuse_scores(dense, lexical, 0.5)
    assert set(fused) == {0, 1, 2, 3}
    for doc, expected in {0: 0.5 * 1 + 0.5 / 3, 1: 0.5, 2: 0.25, 3: 0.0}.items():
        assert fused[doc] == pytest.approx(expected)
    assert stock.fuse_scores(dense, lexical) == pytest.approx(fused)  # 0.5 is the default weight
    assert stock.fuse_scores(dense, {}, 0.5) == pytest.approx({0: 0.5, 1: 0.0, 2: 0.25})  # a side that found nothing
    assert stock.min_max({4: 2.0}, {4, 5}) == {4: 1.0, 5: 0.0}  # one document: it is the side's best
    assert stock.fuse_scores({}, {}) == {}


def test_chunked_nodes_fit_the_model_untruncated(stock: ModuleType, fixture_data: Path, minilm_path: Path) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(minilm_path))
    splitter = stock.make_splitter(minilm_path)
    for name in ("manpages-needle/L8192", "manpages-longdoc", "manpages-short"):
        docs = load_beir(fixture_data / name).doc_texts
        nodes = stock.split_documents(docs, splitter)
        assert {int(node.ref_doc_id) for node in nodes} == set(range(len(docs)))
        sizes = [len(tokenizer(node.get_content(), verbose=False)["input_ids"]) for node in nodes]
        assert max(sizes) <= stock.CHUNK_SIZE + 2 <= stock.MAX_LENGTH, name  # + [CLS] and [SEP]
        assert max(sizes) > stock.CHUNK_SIZE // 2, name  # nodes are filled, not cut at every sentence


@pytest.mark.slow
@pytest.mark.parametrize("name", CHUNKED)
def test_chunked_pipelines_rank_the_obvious_document(fixture_data: Path, eval_cache: Path, name: str) -> None:
    import json

    dataset = load_beir(fixture_data / "manpages-short")
    pipeline = get_pipeline(name, PipelineOptions(cache_dir=eval_cache))
    stats = pipeline.index(dataset.doc_texts)
    assert stats.encode_s >= 0.0
    queries = ["report a bug in bash", "compress executable files in place"]
    expected = []
    for text in queries:
        (query_id,) = [qid for qid, qtext in zip(dataset.query_ids, dataset.query_texts) if qtext == text]
        (doc_id,) = dataset.qrels[query_id]
        expected.append(dataset.doc_ids.index(doc_id))
    rankings = pipeline.search([*queries, "the of and", "zzzqx"], 3)
    assert [ranking[0][0] for ranking in rankings[:2]] == expected
    wide = pipeline.search(queries, 100)  # 40 documents in 53 nodes: fewer than k documents come back
    for ranking in rankings + wide:
        docs = [doc for doc, _ in ranking]
        assert len(docs) == len(set(docs)) and all(0 <= doc < len(dataset.doc_texts) for doc in docs)
        assert [score for _, score in ranking] == sorted((score for _, score in ranking), reverse=True)
    assert all(len(ranking) <= 3 for ranking in rankings) and all(len(ranking) <= 40 for ranking in wide)
    top = [[doc for doc, _ in ranking] for ranking in rankings[:2]]
    assert [[doc for doc, _ in ranking[:3]] for ranking in wide] == top  # the same top at any k
    if name == "llamaindex-chunked-bm25":
        assert rankings[2] == [] and rankings[3] == []  # stop words only / unknown word: no BM25 hit
    else:
        assert len(rankings[2]) == 3 and len(wide[0]) > 3
    settings = pipeline.settings
    assert json.loads(json.dumps(settings)) == settings
    assert settings["chunk_size"] == 250 and settings["chunk_overlap"] == 25
    assert ("max_length" in settings) == (name != "llamaindex-chunked-bm25")


def test_chunked_sides_share_nodes_and_cached_embeddings(tiny_beir: Path, tmp_path: Path) -> None:
    docs = load_beir(tiny_beir).doc_texts
    options = PipelineOptions(cache_dir=tmp_path / "cache")
    dense = get_pipeline("llamaindex-chunked", options)
    assert dense.index(docs).cached is False
    lexical = get_pipeline("llamaindex-chunked-bm25", options)
    assert lexical.index(docs).cached is False and not list((tmp_path / "cache").glob("*.npz"))[1:]  # embeds nothing
    for name in ("llamaindex-fused", "llamaindex-hybrid-rrf"):
        both = get_pipeline(name, options)
        assert both.index(docs).cached is True  # the dense pipeline's node embeddings, from the cache
        dense_ids = {hit.node.node_id for hit in both._dense_retriever.retrieve("fish")}
        assert dense_ids == {node["node_id"] for node in both._bm25_retriever.corpus}  # one set of nodes
        assert len(dense_ids) == 3
        assert [ranking[0][0] for ranking in both.search(["fish in the sea", "barking dogs"], 10)] == [2, 1]
        assert all(len(ranking) <= 3 for ranking in both.search(["cat", "the"], 10))


@pytest.mark.parametrize("setting", [{"weight": 1.5}, {"weight": "0.5"}, {"weight": True}, {"alpha": 0.5}])
def test_llamaindex_fused_refuses_a_setting_it_has_not(setting) -> None:
    with pytest.raises(InvalidInputError, match="weight=W"):
        get_pipeline("llamaindex-fused", PipelineOptions(encoder=setting))
