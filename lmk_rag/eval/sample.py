"""Seeded subsampling of a BEIR set, so that long corpora can be evaluated on a budget."""

from __future__ import annotations

import random
from dataclasses import replace

from lmk_rag.errors import InvalidInputError
from lmk_rag.eval.beir import BeirDataset


def subsample(dataset: BeirDataset, max_queries: int | None = None, max_docs: int | None = None,
              seed: int = 0) -> BeirDataset:
    """Keep a seeded random subset of the queries and of the corpus.

    Queries: ``max_queries`` drawn at random (file order kept). Documents: every document relevant
    to a kept query, plus documents drawn at random until ``max_docs`` are kept (corpus order kept).
    If the relevant documents alone exceed ``max_docs``, all of them are kept anyway.

    :param dataset: the full dataset.
    :param max_queries: how many queries to keep; ``None`` keeps all.
    :param max_docs: how many documents to keep; ``None`` keeps all.
    :param seed: the random seed; the same seed gives the same subset.
    :return: the subsampled dataset, with qrels restricted to the kept queries.
    :raises InvalidInputError: if a limit is below 1.
    """
    for label, value in (("max_queries", max_queries), ("max_docs", max_docs)):
        if value is not None and value < 1:
            raise InvalidInputError(f"{label} must be at least 1, got {value}")
    rng = random.Random(seed)
    query_keep = list(range(len(dataset.query_ids)))
    if max_queries is not None and max_queries < len(query_keep):
        query_keep = sorted(rng.sample(query_keep, max_queries))
    query_ids = [dataset.query_ids[i] for i in query_keep]
    qrels = {query_id: dataset.qrels[query_id] for query_id in query_ids}

    doc_keep = list(range(len(dataset.doc_ids)))
    if max_docs is not None and max_docs < len(doc_keep):
        relevant = {doc_id for judged in qrels.values() for doc_id, score in judged.items() if score > 0}
        chosen = {i for i, doc_id in enumerate(dataset.doc_ids) if doc_id in relevant}
        others = [i for i in doc_keep if i not in chosen]
        chosen.update(rng.sample(others, max(0, min(len(others), max_docs - len(chosen)))))
        doc_keep = sorted(chosen)
    doc_ids = [dataset.doc_ids[i] for i in doc_keep]
    kept_docs = set(doc_ids)
    return replace(
        dataset,
        doc_ids=doc_ids,
        doc_texts=[dataset.doc_texts[i] for i in doc_keep],
        query_ids=query_ids,
        query_texts=[dataset.query_texts[i] for i in query_keep],
        query_metadata=[dataset.query_metadata[i] for i in query_keep],
        qrels={query_id: {d: s for d, s in judged.items() if d in kept_docs} for query_id, judged in qrels.items()},
    )
