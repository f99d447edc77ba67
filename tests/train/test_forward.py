"""Training forward pass: same sequences and vectors as the inference encoder, and the losses."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from lmk_rag.encoder import LandmarkEncoder
from lmk_rag.train.features import build_token_batch
from lmk_rag.train.forward import hidden_states, landmark_matrix, landmark_states, lmk_vectors
from lmk_rag.train.losses import info_nce, landmark_maxsim_nce, maxsim_scores
from lmk_rag.vector_math import maxsim_scores as numpy_maxsim_scores
from lmk_rag.vector_math import pack_rows

TEXTS = [
    "The ls command lists the files of a directory, sorted by name unless told otherwise. " * 5,
    "copy files",
]


def test_training_vectors_equal_the_inference_encoder(tiny_model: Path) -> None:
    encoder = LandmarkEncoder(model_name=tiny_model, granularity=16, pooling="lmk", chunk_vector="landmark",
                              device="cpu")
    batch = build_token_batch(encoder.tokenizer, TEXTS, [16, 16], encoder.max_length)
    assert batch.input_ids.shape[0] >= 3  # the long text needs several 64-token windows
    landmark_ids = batch.input_ids[batch.landmark_window, batch.landmark_position]
    assert torch.all(landmark_ids == encoder.tokenizer.sep_token_id)
    with torch.no_grad():
        hidden = hidden_states(encoder.model, batch)
        states = landmark_states(hidden, batch)
        vectors = lmk_vectors(states, batch).numpy()
        landmarks, mask = landmark_matrix(states, batch)
    expected = encoder.encode_documents(TEXTS)
    np.testing.assert_allclose(vectors, np.stack([e.vector for e in expected]), atol=1e-5)
    for row, encoded in enumerate(expected):
        assert int(mask[row].sum()) == encoded.n_chunks
        np.testing.assert_allclose(landmarks[row, : encoded.n_chunks].numpy(), encoded.chunk_vectors, atol=1e-5)
    assert not mask[1, 1:].any()


def test_training_pads_windows_as_the_old_loop_did(tiny_model: Path) -> None:
    encoder = LandmarkEncoder(model_name=tiny_model, device="cpu")
    batch = build_token_batch(encoder.tokenizer, TEXTS, [16, 32], encoder.max_length)
    sequences = [row[mask.bool()].tolist() for row, mask in zip(batch.input_ids, batch.attention_mask)]
    longest = max(len(sequence) for sequence in sequences)  # lmk_rag/train/features.py's loop, as it was written
    input_ids = torch.full((len(sequences), longest), encoder.special.pad_id, dtype=torch.long)
    attention_mask = torch.zeros((len(sequences), longest), dtype=torch.long)
    for row, sequence in enumerate(sequences):
        input_ids[row, : len(sequence)] = torch.tensor(sequence, dtype=torch.long)
        attention_mask[row, : len(sequence)] = 1
    assert batch.input_ids.dtype == torch.long and batch.attention_mask.dtype == torch.long
    assert torch.equal(batch.input_ids, input_ids) and torch.equal(batch.attention_mask, attention_mask)
    assert len({len(sequence) for sequence in sequences}) > 1  # windows of several lengths: padding happened


def test_granularity_is_per_text(tiny_model: Path) -> None:
    encoder = LandmarkEncoder(model_name=tiny_model, device="cpu")
    batch = build_token_batch(encoder.tokenizer, [TEXTS[0], TEXTS[0]], [8, 32], encoder.max_length)
    counts = torch.bincount(batch.landmark_text).tolist()
    n_tokens = len(encoder.tokenizer(TEXTS[0], add_special_tokens=False)["input_ids"])
    assert counts == [math.ceil(n_tokens / 8), math.ceil(n_tokens / 32)]


def test_maxsim_scores_take_the_best_real_landmark() -> None:
    queries = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    landmarks = torch.tensor([[[0.6, 0.8], [0.0, 0.0]], [[0.8, 0.6], [0.0, 1.0]]])
    mask = torch.tensor([[True, False], [True, True]])
    scores = maxsim_scores(queries[:, None], None, landmarks, mask)
    torch.testing.assert_close(scores, torch.tensor([[0.6, 0.8], [0.8, 1.0]]))
    expected = -torch.log_softmax(scores / 0.5, dim=1).diagonal().mean()
    torch.testing.assert_close(landmark_maxsim_nce(queries, landmarks, mask, 0.5), expected)


def _old_static_maxsim(q: torch.Tensor, q_mask: torch.Tensor, p: torch.Tensor, p_mask: torch.Tensor) -> torch.Tensor:
    """lmk_rag/static/train.py's MaxSim as it was written (mean over real query tokens)."""
    sims = torch.einsum("aqd,bpd->abqp", q, p)
    sims = sims.masked_fill(p_mask[None, :, None, :] == 0, -1e4)
    best = sims.max(dim=-1).values * q_mask[:, None, :]
    return best.sum(-1) / q_mask.sum(-1, keepdim=True).clamp(min=1)


def _old_landmark_maxsim(queries: torch.Tensor, landmarks: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """lmk_rag/train/losses.py's MaxSim as it was written (one query vector, best landmark)."""
    similarities = torch.einsum("qd,tnd->qtn", queries, landmarks)
    return similarities.masked_fill(~mask[None], float("-inf")).amax(dim=-1)


def _padded(arrays: list[np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
    """Token vectors padded into (n, longest, dim) with a float 0/1 mask, as the mixer trainer pads them."""
    longest = max(len(a) for a in arrays)
    x, mask = torch.zeros(len(arrays), longest, arrays[0].shape[1]), torch.zeros(len(arrays), longest)
    for row, a in enumerate(arrays):
        x[row, : len(a)], mask[row, : len(a)] = torch.from_numpy(a), 1
    return x, mask


def test_the_torch_maxsim_gives_the_old_formulas_and_the_numpy_maxsims_numbers() -> None:
    from lmk_rag.static import StaticTokenEncoder

    static = StaticTokenEncoder(mixer="shipped")  # real static token vectors, mixed
    queries = [static.encode_query_tokens(q) for q in ["send signal to a process", "ls", "change file permissions"]]
    docs = [static.encode_document_tokens(d) for d in [*TEXTS, "chmod changes the mode bits of a file"]]
    q, q_mask = _padded(queries)
    p, p_mask = _padded(docs)
    shared = maxsim_scores(q, q_mask, p, p_mask, mean=True)
    torch.testing.assert_close(shared, _old_static_maxsim(q, q_mask, p, p_mask), rtol=0, atol=0)
    np.testing.assert_allclose(shared.numpy(), numpy_maxsim_scores(queries, *pack_rows(docs), mean=True), atol=1e-5)
    np.testing.assert_allclose(maxsim_scores(q, q_mask, p, p_mask).numpy(),
                               numpy_maxsim_scores(queries, *pack_rows(docs)), atol=1e-5)
    single = torch.from_numpy(static.encode(["send signal to a process", "ls", "copy files"]))
    landmark = maxsim_scores(single[:, None], None, p, p_mask.bool())
    torch.testing.assert_close(landmark, _old_landmark_maxsim(single, p, p_mask.bool()), rtol=1e-6, atol=1e-6)


def test_info_nce_counts_extra_passages_as_negatives() -> None:
    queries = torch.eye(2)
    passages = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.0, 1.0]])
    with_hard = info_nce(queries, passages, temperature=1.0)
    assert with_hard > info_nce(queries, passages[:2], temperature=1.0)
    assert float(info_nce(queries, passages[:2], temperature=0.01)) == pytest.approx(0.0, abs=1e-6)

