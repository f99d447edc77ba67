"""MaxSim against a hand-computed example, and the batched variants against the single one."""

from __future__ import annotations

import numpy as np
import pytest

from lmk_rag.errors import VectorSizeError
from lmk_rag.static import maxsim, maxsim_batch, maxsim_matrix

Q = np.array([[1.0, 0.0], [0.0, 1.0], [0.6, 0.8]], dtype=np.float32)
D = np.array([[0.8, 0.6], [0.0, -1.0], [1.0, 0.0]], dtype=np.float32)


def test_maxsim_hand_computed() -> None:
    # q0: best 1.0 (d2); q1: dots 0.6, -1, 0 -> 0.6; q2: dots 0.96, -0.8, 0.6 -> 0.96
    assert maxsim(Q, D) == pytest.approx(1.0 + 0.6 + 0.96)
    assert maxsim(Q[:1], D[1:2]) == pytest.approx(0.0)  # orthogonal
    assert maxsim(Q, D[:0]) == 0.0 and maxsim(Q[:0], D) == 0.0


def test_batched_variants_agree_with_single() -> None:
    rng = np.random.default_rng(1)
    docs = [rng.normal(size=(n, 8)).astype(np.float32) for n in (5, 1, 0, 12, 3)]
    queries = [rng.normal(size=(n, 8)).astype(np.float32) for n in (4, 1, 7)]
    expected = np.array([[maxsim(q, d) for d in docs] for q in queries])
    assert np.allclose(np.stack([maxsim_batch(q, docs) for q in queries]), expected, atol=1e-5)
    assert np.allclose(maxsim_matrix(queries, docs, token_block=6), expected, atol=1e-5)  # several blocks
    assert maxsim_matrix(queries, docs)[:, 2].tolist() == [0.0, 0.0, 0.0]  # empty document


def test_dimension_mismatch_is_named() -> None:
    with pytest.raises(VectorSizeError, match="dim"):
        maxsim(Q, np.ones((2, 3), dtype=np.float32))
    with pytest.raises(VectorSizeError):
        maxsim_batch(Q, [np.ones((2, 3), dtype=np.float32)])
