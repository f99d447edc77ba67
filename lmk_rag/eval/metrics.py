"""Retrieval metrics from ``pytrec_eval``: nDCG@10, recall@1/10/100 and MRR@10, overall and by group.

MRR@10 is the mean over queries of ``1 / rank`` of the first relevant document when it is ranked
in the top 10, and 0 when none of the top 10 is relevant. A document is relevant when its qrels
score is at least 1. Every query in the qrels counts: a query the run has no result for scores 0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

METRIC_KEYS = ("ndcg@10", "recall@1", "recall@10", "recall@100", "mrr@10")

_TREC_MEASURES = {"ndcg_cut.10", "recall.1,10,100"}
_TREC_TO_KEY = {"ndcg_cut_10": "ndcg@10", "recall_1": "recall@1", "recall_10": "recall@10",
                "recall_100": "recall@100"}

Run = Mapping[str, Sequence[str]]
"""``{query_id: [doc_id, ...]}``: each query's ranked documents, best first."""


def per_query_metrics(qrels: Mapping[str, Mapping[str, int]], run: Run) -> dict[str, dict[str, float]]:
    """Score each query of ``qrels``.

    The run's order is taken as given: documents are handed to trec_eval with strictly decreasing
    scores, so ties in the pipeline's scores never reorder them (trec_eval would break ties by id).

    :param qrels: ``{query_id: {doc_id: relevance}}``.
    :param run: each query's ranked document ids.
    :return: ``{query_id: {metric_key: value}}`` for every query of ``qrels``, keys :data:`METRIC_KEYS`.
    """
    import pytrec_eval

    scored = {query_id: _rank_scores(run.get(query_id, ())) for query_id in qrels}
    top10 = {query_id: _rank_scores(run.get(query_id, ())[:10]) for query_id in qrels}
    judged = {query_id: dict(docs) for query_id, docs in qrels.items()}
    main = pytrec_eval.RelevanceEvaluator(judged, _TREC_MEASURES).evaluate(_non_empty(scored))
    reciprocal = pytrec_eval.RelevanceEvaluator(judged, {"recip_rank"}).evaluate(_non_empty(top10))
    results: dict[str, dict[str, float]] = {}
    for query_id in qrels:
        values = main.get(query_id, {})
        row = {key: float(values.get(name, 0.0)) for name, key in _TREC_TO_KEY.items()}
        row["mrr@10"] = float(reciprocal.get(query_id, {}).get("recip_rank", 0.0))
        results[query_id] = row
    return results


def mean_metrics(rows: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Average per-query metric rows.

    :param rows: one ``{metric_key: value}`` per query.
    :return: ``{metric_key: mean}``; zeros when ``rows`` is empty.
    """
    if not rows:
        return dict.fromkeys(METRIC_KEYS, 0.0)
    return {key: sum(row[key] for row in rows) / len(rows) for key in METRIC_KEYS}


def breakdown(per_query: Mapping[str, Mapping[str, float]], query_ids: Sequence[str],
              metadata: Sequence[Mapping[str, Any]], field: str) -> dict[str, dict[str, float]] | None:
    """Average the metrics per value of one query metadata field.

    :param per_query: the output of :func:`per_query_metrics`.
    :param query_ids: the query ids, parallel to ``metadata``.
    :param metadata: each query's metadata.
    :param field: the metadata field to group by (e.g. ``"position"``).
    :return: ``{str(float(value)): {metric_key: mean}}`` sorted by value, or ``None`` when no query
        carries the field.
    """
    groups: dict[float, list[Mapping[str, float]]] = {}
    for query_id, meta in zip(query_ids, metadata):
        if field in meta:
            groups.setdefault(float(meta[field]), []).append(per_query[query_id])
    if not groups:
        return None
    return {str(value): mean_metrics(groups[value]) for value in sorted(groups)}


def _rank_scores(doc_ids: Sequence[str]) -> dict[str, float]:
    return {doc_id: float(len(doc_ids) - rank) for rank, doc_id in enumerate(doc_ids)}


def _non_empty(run: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    return {query_id: docs for query_id, docs in run.items() if docs}
