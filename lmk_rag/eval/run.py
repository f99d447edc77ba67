"""Run one pipeline on one BEIR set and report the metrics as one JSON-able dict."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from lmk_rag.errors import needs_extra
from lmk_rag.eval.beir import BeirDataset, DatasetError
from lmk_rag.eval.metrics import breakdown, mean_metrics, per_query_metrics
from lmk_rag.eval.pipelines import PipelineOptions, Ranking, get_pipeline

DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
#: Depth of each query's ranking (enough for recall@100).
RANK_DEPTH = 100
#: Query metadata fields reported as breakdowns, and the JSON key of each.
BREAKDOWNS = {"position": "by_position", "length": "by_length"}


def evaluate(
    dataset: BeirDataset,
    pipeline: str,
    options: PipelineOptions,
    run_file: Path | None = None,
    keep_per_query: bool = False,
) -> dict[str, Any]:
    """Index the corpus with a pipeline, run the queries and score the rankings.

    The pipeline sees ``dataset.doc_texts`` and ``dataset.query_texts`` only, less those without text (empty or
    whitespace: no pipeline can rank such a document, and such a query finds nothing and scores 0); the ids,
    qrels and query metadata stay here.

    :param dataset: the (possibly subsampled) dataset.
    :param pipeline: a registered pipeline name.
    :param options: the pipeline options.
    :param run_file: where to write the rankings as a TREC run file (:func:`write_run`), or None.
    :param keep_per_query: also report ``per_query``: ``{query_id: {metric_key: value}}`` (for intervals).
    :return: the report: ``dataset``, ``pipeline``, ``model``, ``queries``, ``docs``, the metrics of
        :data:`lmk_rag.eval.metrics.METRIC_KEYS`, ``encode_s``, ``cached``, ``query_ms`` (mean
        search time per query, query encoding included), ``encoder`` (the pipeline's effective encoder settings
        when it has a ``settings`` attribute, else the overrides), and ``by_position``/``by_length`` when the
        queries carry that metadata.
    :raises lmk_rag.errors.InvalidInputError: for an unknown pipeline name.
    :raises lmk_rag.errors.MissingExtraError: when the pipeline or the metrics need a package that is not installed.
    :raises DatasetError: when no document has any text.
    """
    docs = [index for index, text in enumerate(dataset.doc_texts) if text.strip()]
    queries = [index for index, text in enumerate(dataset.query_texts) if text.strip()]
    if not docs:
        raise DatasetError(f"{dataset.name}: no document has any text")
    with needs_extra(f"pipeline {pipeline!r}"):
        runner = get_pipeline(pipeline, options)
        stats = runner.index([dataset.doc_texts[index] for index in docs])
        start = time.perf_counter()
        found = runner.search([dataset.query_texts[index] for index in queries], RANK_DEPTH)
        query_s = time.perf_counter() - start
    rankings: list[Ranking] = [[] for _ in dataset.query_ids]  # a query without text finds nothing
    for query_index, ranking in zip(queries, found):
        rankings[query_index] = [(docs[doc_index], score) for doc_index, score in ranking]
    if run_file is not None:
        write_run(run_file, dataset, rankings, pipeline)
    run = {
        query_id: [dataset.doc_ids[doc_index] for doc_index, _ in ranking[:RANK_DEPTH]]
        for query_id, ranking in zip(dataset.query_ids, rankings)
    }
    with needs_extra("lmk-rag eval's metrics (trec_eval)"):
        per_query = per_query_metrics(dataset.qrels, run)
    report: dict[str, Any] = {
        "dataset": dataset.name,
        "pipeline": pipeline,
        "model": options.model or DEFAULT_MODEL,
        "queries": len(dataset.query_ids),
        "docs": len(dataset.doc_ids),
        **mean_metrics([per_query[query_id] for query_id in dataset.query_ids]),
        "encode_s": round(stats.encode_s, 3),
        "cached": stats.cached,
        "query_ms": round(1000 * query_s / max(1, len(dataset.query_ids)), 3),
        "encoder": getattr(runner, "settings", None) or dict(options.encoder),
    }
    if keep_per_query:
        report["per_query"] = {query_id: per_query[query_id] for query_id in dataset.query_ids}
    for field, key in BREAKDOWNS.items():
        groups = breakdown(per_query, dataset.query_ids, dataset.query_metadata, field)
        if groups is not None:
            report[key] = groups
    return report


def write_run(path: Path, dataset: BeirDataset, rankings: list[Ranking], tag: str) -> None:
    """Write rankings as a TREC run file: ``query_id Q0 doc_id rank score tag``, one line per ranked document.

    Two runs that rank the same documents in the same order with the same scores give identical files.

    :param path: the file to write.
    :param dataset: the dataset the rankings index into.
    :param rankings: one ``[(doc_index, score), ...]`` per query, best first, in ``dataset.query_ids`` order.
    :param tag: the run's name (last column).
    """
    with Path(path).open("w") as handle:
        handle.writelines(
            f"{query_id} Q0 {dataset.doc_ids[doc_index]} {rank} {float(score):.9g} {tag}\n"
            for query_id, ranking in zip(dataset.query_ids, rankings)
            for rank, (doc_index, score) in enumerate(ranking[:RANK_DEPTH], 1)
        )
