"""A BEIR-like set made of (query, positive) pairs: every query against its positive, the other pairs' positives
as distractors. ``lmk-rag train-mixer`` selects its checkpoint on one made of held-out training pairs, so that no
dev set judges its own selection."""

from __future__ import annotations

from collections.abc import Sequence

from lmk_rag.errors import InvalidInputError
from lmk_rag.eval.beir import BeirDataset


def pairs_dataset(pairs: Sequence[tuple[str, str]], name: str = "heldout-pairs") -> BeirDataset:
    """The retrieval set of some (query, positive) pairs.

    The corpus is the distinct positives (a passage given twice is one document, relevant to both queries), in
    first-seen order; each query's one relevant document is its positive.

    :param pairs: (query, positive) pairs.
    :param name: the name reports show.
    :return: the dataset (query ids ``q<i>``, document ids ``d<j>``).
    :raises InvalidInputError: for fewer than two distinct positives (nothing to rank).
    """
    doc_ids: dict[str, str] = {}
    for _, positive in pairs:
        doc_ids.setdefault(positive, f"d{len(doc_ids)}")
    if len(doc_ids) < 2:
        raise InvalidInputError(f"a retrieval set needs at least two distinct passages, got {len(doc_ids)}")
    query_ids = [f"q{i}" for i in range(len(pairs))]
    return BeirDataset(
        name=name,
        doc_ids=list(doc_ids.values()),
        doc_texts=list(doc_ids),
        query_ids=query_ids,
        query_texts=[query for query, _ in pairs],
        query_metadata=[{} for _ in pairs],
        qrels={query_id: {doc_ids[positive]: 1} for query_id, (_, positive) in zip(query_ids, pairs)},
    )
