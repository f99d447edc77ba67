"""pairs_dataset: a retrieval set from (query, positive) pairs, as ``lmk-rag train-mixer`` selects checkpoints on."""

from __future__ import annotations

import pytest

from lmk_rag.errors import InvalidInputError
from lmk_rag.eval.pairset import pairs_dataset
from lmk_rag.eval.pipelines import PipelineOptions
from lmk_rag.eval.run import evaluate

PAIRS = [
    ("send signal to a process", "The kill() system call can be used to send any signal to any process."),
    ("map files into memory", "The mmap() function creates a new mapping in the virtual address space."),
    ("change file permissions", "The chmod() call changes the mode bits of a file: read, write, execute."),
    ("signal a process", "The kill() system call can be used to send any signal to any process."),
]


def test_each_query_has_its_positive_and_the_other_positives_are_distractors() -> None:
    dataset = pairs_dataset(PAIRS, name="held-out")
    assert dataset.name == "held-out" and dataset.doc_ids == ["d0", "d1", "d2"]  # a repeated passage is one document
    assert dataset.doc_texts == [PAIRS[0][1], PAIRS[1][1], PAIRS[2][1]]
    assert dataset.query_texts == [query for query, _ in PAIRS]
    assert dataset.qrels == {"q0": {"d0": 1}, "q1": {"d1": 1}, "q2": {"d2": 1}, "q3": {"d0": 1}}
    assert evaluate(dataset, "bm25", PipelineOptions())["recall@1"] > 0.5


def test_a_set_needs_two_passages() -> None:
    with pytest.raises(InvalidInputError, match="two distinct passages"):
        pairs_dataset(PAIRS[:1])
