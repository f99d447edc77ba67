"""benchmarks/evidence_questions.py: the answer spans it reads off the committed perlfaq sets, its seeded sample and
its measures (no encoding: the search itself is the product's, tested with the store)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from lmk_rag.eval.beir import BeirDataset, load_beir
from lmk_rag.store.types import Evidence, Hit

SETS = Path(__file__).resolve().parents[2] / "benchmarks" / "data"


@pytest.fixture(scope="module")
def script(benchmark_script: Callable[[str], ModuleType]) -> ModuleType:
    """The script, imported."""
    return benchmark_script("evidence_questions")


def test_answer_spans_hold_each_answer_in_its_section(script: ModuleType) -> None:
    longdoc, answers = load_beir(SETS / "perlfaq-longdoc"), load_beir(SETS / "perlfaq-answers")
    spans = script.answer_spans(longdoc, answers)
    texts = dict(zip(longdoc.doc_ids, longdoc.doc_texts))
    answer_texts = dict(zip(answers.doc_ids, answers.doc_texts))
    answer_of = {question: answer_texts[script.answer_document(answers, query_id)]
                 for query_id, question in zip(answers.query_ids, answers.query_texts)}
    assert set(spans) == set(longdoc.query_ids)
    for query_id, question in zip(longdoc.query_ids, longdoc.query_texts):
        span = spans[query_id]
        if question not in answer_of:
            assert span is None
            continue
        assert span is not None, question
        section = texts[script.answer_document(longdoc, query_id)]
        assert section[span[0]:span[1]] == answer_of[question].strip()
        assert span[1] - span[0] < len(section)  # a part of the section, not all of it


def _found(script: ModuleType, index: int, answered: bool) -> object:
    hit = Hit(str(index), f"{index}#0", 0.5, "text", (0, 4), evidence=(Evidence(0, 4, 0.5, "chunk"),))
    return script.Found(f"q{index}", "why?", f"d{index}", 1 if answered else None, hit if answered else None)


def test_the_sample_is_seeded_answered_and_in_set_order(script: ModuleType) -> None:
    found = [_found(script, index, answered=index % 3 != 0) for index in range(60)]
    sample = script.draw_sample(found, 10, seed=64)
    assert len(sample) == 10
    assert all(item.hit is not None for item in sample)
    assert [item.query_id for item in sample] == [item.query_id for item in found if item in sample]
    assert sample == script.draw_sample(found, 10, seed=64)
    assert sample != script.draw_sample(found, 10, seed=65)
    assert script.draw_sample(found[:6], 10) == [item for item in found[:6] if item.hit is not None]


def test_inside_share_counts_the_evidence_characters_in_the_answer(script: ModuleType) -> None:
    assert script.inside_share(Evidence(10, 20, 0.4, "chunk"), (0, 100)) == 1.0
    assert script.inside_share(Evidence(90, 110, 0.4, "chunk"), (0, 100)) == 0.5
    assert script.inside_share(Evidence(100, 110, 0.4, "chunk"), (0, 100)) == 0.0
    assert script.inside_share(Evidence(5, 5, 0.4, "chunk"), (0, 100)) == 0.0


def test_wilson_interval_holds_the_share_and_stays_in_zero_to_one(script: ModuleType) -> None:
    for successes, total in ((0, 10), (5, 10), (10, 10), (57, 60)):
        low, high = script.wilson(successes, total)
        assert 0.0 <= low <= successes / total <= high <= 1.0
    low, high = script.wilson(5, 10)
    assert low == pytest.approx(0.2366, abs=1e-3) and high == pytest.approx(0.7634, abs=1e-3)
    assert script.wilson(0, 0) == (0.0, 1.0)


def test_longdoc_stats_count_best_evidence_inside_the_answer(script: ModuleType) -> None:
    text = "x" * 1000
    dataset = BeirDataset(
        name="t", doc_ids=["d"], doc_texts=[text], query_ids=["q1", "q2", "q3"], query_texts=["a?", "b?", "c?"],
        query_metadata=[{}, {}, {}], qrels={"q1": {"d": 1}, "q2": {"d": 1}, "q3": {"d": 1}})

    def found(query_id: str, rank: int, node: tuple[int, int], evidence: tuple[int, int]) -> object:
        hit = Hit("0", "0#0", 0.5, text[node[0]:node[1]], node, evidence=(Evidence(*evidence, 0.5, "chunk"),))
        return script.Found(query_id, "?", "d", rank, hit)

    items = [found("q1", 1, (0, 400), (100, 200)),  # wholly inside the answer (50, 300)
             found("q2", 2, (0, 400), (250, 350)),  # half inside
             found("q3", 1, (500, 900), (600, 700))]  # node and evidence outside
    chunks = {"d": [(start, start + 100) for start in range(0, 1000, 100)]}
    stats = script.longdoc_stats(dataset, items, {"q1": (50, 300), "q2": (50, 300), "q3": (50, 300)}, chunks)
    assert stats["measured"] == 3
    assert stats["best_evidence_majority_inside_answer"]["count"] == 2
    assert stats["best_evidence_wholly_inside_answer"]["count"] == 1
    assert stats["ranked_first_majority_inside_answer"]["of"] == 2
    assert stats["ranked_first_majority_inside_answer"]["count"] == 1
    assert stats["hit_node_overlaps_answer"]["count"] == 2
    assert stats["node_overlapping_majority_inside_answer"]["share"] == 1.0
    assert stats["chance_random_passage_of_document"] == 0.25
    # first chunks of the nodes: (0, 100) is 50% inside (50, 300) for q1 and q2, (500, 600) is outside
    assert stats["node_first_chunk_majority_inside_answer"]["count"] == 2
