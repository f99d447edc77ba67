"""Seeded subsampling keeps the relevant documents and is reproducible."""

from __future__ import annotations

from pathlib import Path

import pytest

from lmk_rag.errors import InvalidInputError
from lmk_rag.eval.beir import load_beir
from lmk_rag.eval.sample import subsample


def test_subsample_is_seeded_and_keeps_relevant_docs(fixture_data: Path) -> None:
    full = load_beir(fixture_data / "manpages-short")
    first = subsample(full, max_queries=7, max_docs=30, seed=3)
    again = subsample(full, max_queries=7, max_docs=30, seed=3)
    other = subsample(full, max_queries=7, max_docs=30, seed=4)
    assert first == again
    assert first.query_ids != other.query_ids
    assert len(first.query_ids) == 7 and len(first.doc_ids) == 30
    assert first.query_ids == [query_id for query_id in full.query_ids if query_id in set(first.query_ids)]
    kept = set(first.doc_ids)
    assert all(doc_id in kept for judged in first.qrels.values() for doc_id in judged)
    assert set(first.qrels) == set(first.query_ids)


def test_relevant_docs_beyond_the_limit_are_kept(fixture_data: Path) -> None:
    sampled = subsample(load_beir(fixture_data / "manpages-short"), max_queries=5, max_docs=2)
    assert len(sampled.doc_ids) == 5


def test_no_limits_is_identity(tiny_beir: Path) -> None:
    dataset = load_beir(tiny_beir)
    assert subsample(dataset) == dataset


def test_bad_limit(tiny_beir: Path) -> None:
    with pytest.raises(InvalidInputError, match="max_docs must be at least 1"):
        subsample(load_beir(tiny_beir), max_docs=0)
