"""Metrics against values computed by hand on a 3-query run, and breakdowns by metadata."""

from __future__ import annotations

import math

import pytest

from lmk_rag.eval.metrics import METRIC_KEYS, breakdown, mean_metrics, per_query_metrics

QRELS = {"q1": {"a": 1}, "q2": {"b": 1, "c": 1}, "q3": {"d": 1}}
RUN = {"q1": ["x", "a", "y"], "q2": ["c", "z", "b"], "q3": ["e"] + [f"n{i}" for i in range(10)] + ["d"]}


def test_hand_computed_three_query_run() -> None:
    per_query = per_query_metrics(QRELS, RUN)
    # q1: the only relevant doc at rank 2.
    assert per_query["q1"] == pytest.approx(
        {"ndcg@10": 1 / math.log2(3), "recall@1": 0.0, "recall@10": 1.0, "recall@100": 1.0, "mrr@10": 0.5}
    )
    # q2: two relevant docs at ranks 1 and 3; ideal ranks 1 and 2.
    assert per_query["q2"] == pytest.approx(
        {"ndcg@10": (1 + 1 / math.log2(4)) / (1 + 1 / math.log2(3)), "recall@1": 0.5, "recall@10": 1.0,
         "recall@100": 1.0, "mrr@10": 1.0}
    )
    # q3: the relevant doc at rank 12: outside the top 10, inside the top 100.
    assert per_query["q3"] == pytest.approx(
        {"ndcg@10": 0.0, "recall@1": 0.0, "recall@10": 0.0, "recall@100": 1.0, "mrr@10": 0.0}
    )
    means = mean_metrics(list(per_query.values()))
    assert means["ndcg@10"] == pytest.approx((1 / math.log2(3) + (1.5 / (1 + 1 / math.log2(3)))) / 3)
    assert means["mrr@10"] == pytest.approx(0.5)
    assert means["recall@1"] == pytest.approx(0.5 / 3)
    assert means["recall@100"] == pytest.approx(1.0)


def test_missing_and_empty_results_score_zero() -> None:
    per_query = per_query_metrics(QRELS, {"q1": ["a"], "q2": []})
    assert per_query["q1"]["mrr@10"] == 1.0
    assert per_query["q2"] == dict.fromkeys(METRIC_KEYS, 0.0)
    assert per_query["q3"] == dict.fromkeys(METRIC_KEYS, 0.0)


def test_run_order_is_kept_even_against_id_order() -> None:
    # trec_eval breaks score ties by doc id; our ranks must win: "z" first, then relevant "a".
    assert per_query_metrics({"q": {"a": 1}}, {"q": ["z", "a"]})["q"]["mrr@10"] == 0.5


def test_breakdown_keys_are_float_strings() -> None:
    per_query = per_query_metrics(QRELS, RUN)
    metadata = [{"position": 0}, {"position": 0.25}, {"position": 0}]
    groups = breakdown(per_query, ["q1", "q2", "q3"], metadata, "position")
    assert list(groups) == ["0.0", "0.25"]
    assert groups["0.0"]["mrr@10"] == pytest.approx(0.25)
    assert groups["0.25"]["recall@1"] == pytest.approx(0.5)
    assert breakdown(per_query, ["q1", "q2", "q3"], metadata, "length") is None
