"""The disk cache: computed once per key and texts, cold time kept; chunk states round-trip."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from lmk_rag.encoder import ChunkStates
from lmk_rag.eval.cache import cached_arrays, texts_digest
from lmk_rag.eval.states import pack_states, unpack_states


def test_computed_once_and_cold_time_kept(tmp_path: Path) -> None:
    calls = []

    def compute() -> dict[str, np.ndarray]:
        calls.append(1)
        time.sleep(0.05)
        return {"x": np.arange(6, dtype=np.float32).reshape(2, 3)}

    cold = cached_arrays(tmp_path, {"model": "m", "granularity": 32}, ["a", "b"], compute)
    warm = cached_arrays(tmp_path, {"granularity": 32, "model": "m"}, ["a", "b"], compute)
    assert (cold.cached, warm.cached) == (False, True)
    assert len(calls) == 1
    assert warm.encode_s == cold.encode_s >= 0.05
    np.testing.assert_array_equal(warm.arrays["x"], cold.arrays["x"])
    assert not cached_arrays(tmp_path, {"model": "m", "granularity": 64}, ["a", "b"], compute).cached
    assert not cached_arrays(tmp_path, {"model": "m", "granularity": 32}, ["ab"], compute).cached
    assert len(calls) == 3


def test_texts_digest_sees_boundaries() -> None:
    assert texts_digest(["ab", "c"]) != texts_digest(["a", "bc"])


def test_states_round_trip() -> None:
    rng = np.random.default_rng(0)
    states = [
        ChunkStates(
            landmark_states=rng.normal(size=(n, 4)).astype(np.float32),
            chunk_sums=rng.normal(size=(n, 4)).astype(np.float32),
            chunk_sizes=np.arange(1, n + 1, dtype=np.float32),
            cls_states=rng.normal(size=(w, 4)).astype(np.float32),
            spans=[(i, i + 1) for i in range(n)],
            token_counts=[3] * n,
            prompt_sum=rng.normal(size=4).astype(np.float32) if prompt else None,
            prompt_size=float(prompt),
            token_max=rng.normal(size=4).astype(np.float32),
            weighted_sum=rng.normal(size=4).astype(np.float32),
            weight_total=float(n * w),
        )
        for n, w, prompt in ((3, 1, 2), (1, 1, 0), (5, 2, 4))
    ]
    for original, restored in zip(states, unpack_states(pack_states(states))):
        for name in ("landmark_states", "chunk_sums", "chunk_sizes", "cls_states", "token_max", "weighted_sum"):
            np.testing.assert_array_equal(getattr(original, name), getattr(restored, name))
        assert original.spans == restored.spans and original.token_counts == restored.token_counts
        assert (original.prompt_size, original.weight_total) == (restored.prompt_size, restored.weight_total)
        if original.prompt_sum is None:
            assert restored.prompt_sum is None
        else:
            np.testing.assert_array_equal(original.prompt_sum, restored.prompt_sum)
