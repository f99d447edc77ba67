"""Fixtures for the eval tests: tiny BEIR folders written to tmp_path, and a shared encoding cache."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


def write_beir(folder: Path, docs: dict[str, str], queries: list[dict], qrels: list[tuple[str, str, int]]) -> Path:
    """Write a BEIR folder (plain ``corpus.jsonl``) and return it."""
    (folder / "qrels").mkdir(parents=True)
    with (folder / "corpus.jsonl").open("w") as handle:
        for doc_id, text in docs.items():
            handle.write(json.dumps({"_id": doc_id, "title": "", "text": text}) + "\n")
    with (folder / "queries.jsonl").open("w") as handle:
        for query in queries:
            handle.write(json.dumps(query) + "\n")
    lines = ["query-id\tcorpus-id\tscore"] + [f"{q}\t{d}\t{s}" for q, d, s in qrels]
    (folder / "qrels" / "test.tsv").write_text("\n".join(lines) + "\n")
    return folder


@pytest.fixture
def make_beir():
    """The :func:`write_beir` helper, for tests that build their own folders."""
    return write_beir


@pytest.fixture
def tiny_beir(tmp_path: Path) -> Path:
    """A valid 3-document, 2-query BEIR folder with needle-style metadata."""
    return write_beir(
        tmp_path / "tiny",
        {"d1": "the cat sat on the mat", "d2": "dogs bark at night", "d3": "fish swim in the sea"},
        [
            {"_id": "q1", "text": "cat on a mat", "metadata": {"position": 0.25, "length": 512}},
            {"_id": "q2", "text": "barking dogs", "metadata": {"position": 1, "length": 512}},
        ],
        [("q1", "d1", 1), ("q2", "d2", 1)],
    )


@pytest.fixture(scope="session")
def eval_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One encoding cache for the whole session, so each subset is encoded once."""
    return tmp_path_factory.mktemp("eval_cache")
