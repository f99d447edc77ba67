"""MaxSim against a hand-computed example; the one numpy MaxSim (lmk_rag.vector_math.maxsim_scores) against the formulas
it replaced (static maxsim/maxsim_batch, eval's rank_best_chunk, the fine-tuning evaluation and the fusion study), on
real static token vectors."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from lmk_rag.errors import VectorSizeError
from lmk_rag.eval.scoring import rank_best_chunk
from lmk_rag.static import StaticTokenEncoder, maxsim, maxsim_matrix
from lmk_rag.vector_math import maxsim_scores, pack_rows

Q = np.array([[1.0, 0.0], [0.0, 1.0], [0.6, 0.8]], dtype=np.float32)
D = np.array([[0.8, 0.6], [0.0, -1.0], [1.0, 0.0]], dtype=np.float32)

DOCS = [
    "The kill() system call can be used to send any signal to any process group or process.",
    "The mmap() function creates a new mapping in the virtual address space of the calling process.",
    "The chmod() system call changes a file's mode bits: permissions for owner, group and others.",
    "The setrlimit() call sets resource limits; each resource has a soft and a hard limit.",
    "ls lists directory contents.",
]
QUERIES = ["send signal to a process", "map files or devices into memory", "change permissions of a file", "ls"]


def test_maxsim_hand_computed() -> None:
    # q0: best 1.0 (d2); q1: dots 0.6, -1, 0 -> 0.6; q2: dots 0.96, -0.8, 0.6 -> 0.96
    assert maxsim(Q, D) == pytest.approx(1.0 + 0.6 + 0.96)
    assert maxsim(Q[:1], D[1:2]) == pytest.approx(0.0)  # orthogonal
    assert maxsim(Q, D[:0]) == 0.0 and maxsim(Q[:0], D) == 0.0
    matrix, starts = pack_rows([D[:2], D[2:]])
    assert starts.tolist() == [0, 2]
    assert np.allclose(maxsim_scores([Q], matrix, starts), [[2.36, 1.6]])  # 0.8+0.6+0.96 and 1.0+0.0+0.6
    assert np.allclose(maxsim_scores([Q], matrix, starts, mean=True), [[2.36 / 3, 1.6 / 3]])


def test_the_matrix_agrees_with_single_pairs() -> None:
    rng = np.random.default_rng(1)
    docs = [rng.normal(size=(n, 8)).astype(np.float32) for n in (5, 1, 0, 12, 3)]
    queries = [rng.normal(size=(n, 8)).astype(np.float32) for n in (4, 1, 7)]
    expected = np.array([[maxsim(q, d) for d in docs] for q in queries])
    assert np.allclose(maxsim_matrix(queries, docs, token_block=6), expected, atol=1e-5)  # several blocks
    assert maxsim_matrix(queries, docs)[:, 2].tolist() == [0.0, 0.0, 0.0]  # empty document


def test_dimension_mismatch_is_named() -> None:
    with pytest.raises(VectorSizeError, match="dim"):
        maxsim(Q, np.ones((2, 3), dtype=np.float32))
    with pytest.raises(VectorSizeError, match="dim"):
        maxsim_scores([Q], np.ones((2, 3), dtype=np.float32), [0])


# The formulas the shared MaxSim replaced, as they were written.

def _old_maxsim(query_tokens: np.ndarray, doc_tokens: np.ndarray) -> float:  # static/maxsim.py
    return float((query_tokens @ doc_tokens.T).max(axis=1).sum())


def _old_maxsim_batch(query_tokens: np.ndarray, docs: Sequence[np.ndarray]) -> np.ndarray:  # static/maxsim.py
    scores = np.zeros(len(docs), dtype=np.float32)
    sizes = np.array([len(doc) for doc in docs], dtype=np.int64)
    filled = np.flatnonzero(sizes)
    stacked = np.concatenate([docs[i] for i in filled], axis=0)
    starts = np.concatenate([[0], np.cumsum(sizes[filled])[:-1]])
    scores[filled] = np.maximum.reduceat(query_tokens @ stacked.T, starts, axis=1).sum(axis=0)
    return scores


def _old_best_chunk(batch: Sequence[np.ndarray], doc_chunks: Sequence[np.ndarray]) -> np.ndarray:  # eval/scoring.py
    matrix = np.concatenate(doc_chunks)
    starts = np.cumsum([0] + [len(chunks) for chunks in doc_chunks[:-1]])
    owners = np.repeat(np.arange(len(batch)), [len(chunks) for chunks in batch])
    best = np.maximum.reduceat(np.concatenate(batch) @ matrix.T, starts, axis=1)
    scores = np.zeros((len(batch), len(doc_chunks)), np.float32)
    np.add.at(scores, owners, best)
    return scores


def _old_heldout_maxsim(queries: np.ndarray, chunk_sets: Sequence[np.ndarray]) -> np.ndarray:  # train/evaluation.py
    return np.stack([(queries @ chunks.T).max(axis=1) for chunks in chunk_sets], axis=1)


def _old_fusion_maxsim(chunk_vectors: np.ndarray, chunk_starts: np.ndarray, query: np.ndarray
                       ) -> np.ndarray:  # benchmarks/studies/fusion_study.py
    best = np.maximum.reduceat(chunk_vectors @ query.T, chunk_starts, axis=0)
    return best.mean(axis=1)


@pytest.mark.parametrize("mixer", [None, "shipped"], ids=["raw", "shipped-mixer"])
def test_the_shared_maxsim_gives_the_old_formulas_numbers(static_vectors, mixer) -> None:
    static = StaticTokenEncoder(static_vectors, mixer=mixer)
    queries = [static.encode_query_tokens(q) for q in QUERIES]
    docs = [static.encode_document_tokens(d) for d in DOCS]
    matrix, starts = pack_rows(docs)
    shared = maxsim_scores(queries, matrix, starts)
    old_pairs = np.array([[_old_maxsim(q, d) for d in docs] for q in queries])
    assert np.allclose(shared, old_pairs, atol=1e-5)
    assert np.allclose([[maxsim(q, d) for d in docs] for q in queries], old_pairs, atol=1e-5)
    assert np.allclose(np.stack([_old_maxsim_batch(q, docs) for q in queries]), shared, atol=1e-5)
    assert np.allclose(maxsim_matrix(queries, docs, token_block=20), old_pairs, atol=1e-5)
    # rank_best_chunk runs the same operations as before: the same numbers to the bit
    assert np.array_equal(shared, _old_best_chunk(queries, docs))
    assert [[doc for doc, _ in ranking] for ranking in rank_best_chunk(queries, docs, len(docs))] == [
        sorted(range(len(docs)), key=lambda j: (-row[j], j)) for row in _old_best_chunk(queries, docs)]
    # single-vector queries (the fine-tuning evaluation) and the mean over query vectors (the fusion study)
    pooled = static.encode(QUERIES)
    assert np.allclose(maxsim_scores(pooled[:, None], matrix, starts), _old_heldout_maxsim(pooled, docs), atol=1e-6)
    for query in queries:
        assert np.allclose(maxsim_scores([query], matrix, starts, mean=True)[0],
                           _old_fusion_maxsim(matrix, starts, query), atol=1e-6)
