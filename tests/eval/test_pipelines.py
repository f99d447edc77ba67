"""The registry, the harness's isolation of pipelines from ids and metadata, and the built-in pipelines."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from lmk_rag.errors import DatasetError, InvalidInputError
from lmk_rag.eval.beir import load_beir
from lmk_rag.eval.pipelines import IndexStats, PipelineOptions, Ranking, get_pipeline, pipeline_names, register_pipeline
from lmk_rag.eval.run import evaluate
from lmk_rag.eval.sample import subsample

RECORDED: list[tuple[str, object]] = []


@register_pipeline("test-recorder")
class RecordingPipeline:
    """Records every input it is given and ranks documents by word overlap."""

    def __init__(self, options: PipelineOptions) -> None:
        RECORDED.append(("options", options))
        self.docs: list[set[str]] = []

    def index(self, docs: Sequence[str]) -> IndexStats:
        RECORDED.append(("docs", docs))
        self.docs = [set(doc.lower().split()) for doc in docs]
        return IndexStats(encode_s=0.0)

    def search(self, queries: Sequence[str], k: int) -> list[Ranking]:
        RECORDED.append(("queries", queries))
        RECORDED.append(("k", k))
        rankings = []
        for query in queries:
            words = set(query.lower().split())
            scores = [(i, float(len(words & doc))) for i, doc in enumerate(self.docs)]
            rankings.append(sorted(scores, key=lambda item: -item[1])[:k])
        return rankings


def test_registry_lists_builtins_and_rejects_unknown_and_duplicates() -> None:
    names = pipeline_names()
    for name in ("bm25", "cls", "mean", "lmk", "maxsim-landmark", "maxsim-chunkmean", "maxsim-chunk", "lmk-rag",
                 "lmk-rag-alpha1", "static", "static-store"):
        assert name in names
    with pytest.raises(InvalidInputError, match=r"unknown pipeline 'nope'; known pipelines: .*bm25"):
        get_pipeline("nope", PipelineOptions())
    with pytest.raises(InvalidInputError, match="registered twice"):
        register_pipeline("bm25")(RecordingPipeline)


def test_options_take_json_values_only() -> None:
    options = PipelineOptions(encoder={"static_model": "folder", "granularity": 32, "mixer": None})
    assert options.encoder["granularity"] == 32
    with pytest.raises(InvalidInputError, match="JSON values"):
        PipelineOptions(encoder={"mixer": object()})
    with pytest.raises(InvalidInputError, match="JSON values"):
        PipelineOptions(encoder={"mixer": Path("folder")})


def test_pipeline_sees_only_texts(fixture_data: Path) -> None:
    dataset = subsample(load_beir(fixture_data / "manpages-needle" / "L512"), max_queries=10, max_docs=11)
    RECORDED.clear()
    report = evaluate(dataset, "test-recorder", PipelineOptions())
    recorded = dict(RECORDED)
    assert set(recorded) == {"options", "docs", "queries", "k"}
    assert recorded["docs"] == dataset.doc_texts and recorded["queries"] == dataset.query_texts
    for texts in (recorded["docs"], recorded["queries"]):
        assert type(texts) is list and all(type(text) is str for text in texts)
    options = recorded["options"]
    assert isinstance(options, PipelineOptions) and options.encoder == {}
    forbidden = set(dataset.doc_ids) | set(dataset.query_ids)
    assert not any(identifier in text for identifier in forbidden for text in recorded["queries"] + recorded["docs"])
    assert report["queries"] == 10 and report["docs"] == 11
    assert set(report["by_position"]) <= {"0.0", "0.25", "0.5", "0.75", "1.0"}


def test_texts_without_words_never_reach_a_pipeline(tmp_path: Path, make_beir) -> None:
    folder = make_beir(
        tmp_path / "gaps",
        {"d1": "the cat sat on the mat", "empty": "", "d2": "dogs bark at night", "blank": " \n\t"},
        [{"_id": "q1", "text": "barking dogs"}, {"_id": "q2", "text": "  "}, {"_id": "q3", "text": "a cat"}],
        [("q1", "d2", 1), ("q2", "d1", 1), ("q3", "d1", 1)],
    )
    RECORDED.clear()
    report = evaluate(load_beir(folder), "test-recorder", PipelineOptions(), keep_per_query=True)
    recorded = dict(RECORDED)
    assert recorded["docs"] == ["the cat sat on the mat", "dogs bark at night"]
    assert recorded["queries"] == ["barking dogs", "a cat"]
    assert {q: m["ndcg@10"] for q, m in report["per_query"].items()} == {"q1": 1.0, "q2": 0.0, "q3": 1.0}
    assert report["docs"] == 4 and report["queries"] == 3
    blank = make_beir(tmp_path / "blank", {"d1": " "}, [{"_id": "q1", "text": "x"}], [("q1", "d1", 1)])
    with pytest.raises(DatasetError, match="no document has any text"):
        evaluate(load_beir(blank), "test-recorder", PipelineOptions())


def test_bm25_finds_exact_words(tiny_beir: Path) -> None:
    pipeline = get_pipeline("bm25", PipelineOptions())
    pipeline.index(load_beir(tiny_beir).doc_texts)
    rankings = pipeline.search(["fish in the sea", "zebra"], 10)
    assert rankings[0][0][0] == 2 and rankings[1] == []


@pytest.mark.slow
@pytest.mark.parametrize(
    "name", ["cls", "mean", "lmk", "maxsim-landmark", "maxsim-chunkmean", "maxsim-chunk"]
)
def test_model_pipelines_rank_needles(fixture_data: Path, eval_cache: Path, name: str) -> None:
    dataset = subsample(load_beir(fixture_data / "manpages-needle" / "L512"), max_queries=5, max_docs=8)
    report = evaluate(dataset, name, PipelineOptions(cache_dir=eval_cache))
    pipeline = get_pipeline(name, PipelineOptions(cache_dir=eval_cache))
    pipeline.index(dataset.doc_texts)
    rankings = pipeline.search(dataset.query_texts, 3)
    for ranking in rankings:
        assert len(ranking) == 3 and len({doc for doc, _ in ranking}) == 3
        assert all(0 <= doc < len(dataset.doc_texts) for doc, _ in ranking)
        assert [score for _, score in ranking] == sorted((score for _, score in ranking), reverse=True)
    assert report["recall@100"] == 1.0  # 8 documents: all are ranked
    if name.startswith("maxsim"):  # best-chunk scoring finds the needles among 8 haystacks
        assert report["mrr@10"] >= 0.5
