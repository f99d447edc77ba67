"""The training loop on a tiny random model: a step learns, checkpoints resume exactly, the output loads."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from lmk_rag.encoder import LandmarkEncoder
from lmk_rag.train import LMK_MARKER, FinetuneConfig, Trainer
from lmk_rag.train.trainer import lmk_marker


def _config(pairs_file: Path, tiny_model: Path, output: Path, **overrides) -> FinetuneConfig:
    settings = {
        "train": str(pairs_file),
        "output": str(output),
        "model": str(tiny_model),
        "max_steps": 4,
        "batch_size": 4,
        "learning_rate": 1e-3,
        "warmup_ratio": 0.0,
        "heldout_fraction": 0.1,
        "eval_every": 0,
        "checkpoint_every": 0,
        "device": "cpu",
        "seed": 3,
    }
    settings.update(overrides)
    return FinetuneConfig(**settings)


def test_training_step_lowers_the_loss_on_its_batch(pairs_file: Path, tiny_model: Path, tmp_path: Path) -> None:
    trainer = Trainer(_config(pairs_file, tiny_model, tmp_path / "out"))
    batch = trainer.sampler.batch(0)
    assert batch.haystacks and len(batch.queries) == 4

    def batch_losses() -> dict[str, float]:
        trainer.model.eval()
        with torch.no_grad():
            return {name: float(value) for name, value in trainer.losses(batch).items()}

    before = batch_losses()
    trainer.train_step()
    after = batch_losses()
    assert trainer.step == 1
    assert after["loss"] < before["loss"]
    assert after["nce"] < before["nce"] and after["landmark"] < before["landmark"]


def _parameters(trainer: Trainer) -> dict[str, torch.Tensor]:
    return {name: value.detach().clone() for name, value in trainer.model.state_dict().items()}


def test_checkpoint_resumes_to_identical_state(pairs_file: Path, tiny_model: Path, tmp_path: Path) -> None:
    first = Trainer(_config(pairs_file, tiny_model, tmp_path / "a"))
    for _ in range(2):
        first.train_step()
    saved = tmp_path / "state.pt"
    shutil.copy(first.save_checkpoint(), saved)
    for _ in range(2):
        first.train_step()

    second = Trainer(_config(pairs_file, tiny_model, tmp_path / "b"))
    assert second.load_checkpoint(saved) and second.step == 2
    for _ in range(2):
        second.train_step()

    assert second.step == first.step == 4
    expected = _parameters(first)
    for name, value in _parameters(second).items():
        assert torch.equal(value, expected[name]), name
    assert second.scheduler.get_last_lr() == first.scheduler.get_last_lr()
    moments = [state["exp_avg"] for state in first.optimizer.state_dict()["state"].values()]
    resumed = [state["exp_avg"] for state in second.optimizer.state_dict()["state"].values()]
    assert all(torch.equal(a, b) for a, b in zip(moments, resumed))


@pytest.mark.slow
def test_run_writes_a_folder_the_encoder_loads_as_lmk_trained(
    pairs_file: Path, tiny_model: Path, tmp_path: Path
) -> None:
    output = tmp_path / "model"
    summary = Trainer(_config(pairs_file, tiny_model, output, max_steps=3, eval_every=2, checkpoint_every=2)).run(
        show_progress_bar=False
    )
    assert summary["steps"] == 3
    assert set(summary["heldout_after"]) == {"lmk_r1", "lmk_mrr", "needle_landmark_r1", "needle_mean_r1"}
    marker = json.loads((output / "lmk_model.json").read_text())
    after = summary["heldout_after"]
    landmarks_win = after["needle_landmark_r1"] >= after["needle_mean_r1"]
    assert marker == lmk_marker(after) and marker["lmk_trained"] is True
    assert marker["chunk_vector"] == ("landmark" if landmarks_win else "mean")
    assert json.loads((output / "sentence_bert_config.json").read_text())["max_seq_length"] == 64
    assert not (output / "checkpoint").exists()
    log = [json.loads(line) for line in (output / "train_log.jsonl").read_text().splitlines()]
    assert [record["step"] for record in log if "loss" in record] == [1, 2, 3]
    assert "eval" in log[0] and "eval" in log[2] and "eval" in log[-1]

    encoder = LandmarkEncoder(model_name=output, granularity=16, device="cpu")
    assert encoder.lmk_trained and encoder.pooling == "lmk" and encoder.chunk_vector == marker["chunk_vector"]
    text = "The ls command lists directory contents. " * 12
    encoded = encoder.encode_documents(text)
    states = encoder.encode_states([text])[0]
    assert encoded.n_chunks > 2 and encoded.vector.shape == (32,)
    chunks = states.landmark_states if landmarks_win else states.chunk_sums / states.chunk_sizes[:, None]
    np.testing.assert_allclose(encoded.chunk_vectors, chunks / np.linalg.norm(chunks, axis=1, keepdims=True), atol=1e-5)


def test_marker_names_the_chunk_vectors_that_measured_best() -> None:
    assert lmk_marker({}) == LMK_MARKER
    tie = lmk_marker({"needle_landmark_r1": 0.5, "needle_mean_r1": 0.5, "lmk_r1": 0.9})
    assert tie["chunk_vector"] == "landmark" and tie["chunk_vector_heldout"] == {"needle_landmark_r1": 0.5,
                                                                                 "needle_mean_r1": 0.5}
    assert lmk_marker({"needle_landmark_r1": 0.5, "needle_mean_r1": 0.6})["chunk_vector"] == "mean"


@pytest.mark.slow
def test_resume_continues_an_interrupted_run(pairs_file: Path, tiny_model: Path, tmp_path: Path) -> None:
    output = tmp_path / "model"
    interrupted = Trainer(_config(pairs_file, tiny_model, output, max_steps=4, checkpoint_every=2))
    for _ in range(3):  # dies after step 3: the checkpoint holds step 2
        interrupted.train_step()
        if interrupted.step % 2 == 0:
            interrupted.save_checkpoint()
    resumed = Trainer(_config(pairs_file, tiny_model, output, max_steps=4, checkpoint_every=2))
    summary = resumed.run(show_progress_bar=False)
    straight = Trainer(_config(pairs_file, tiny_model, tmp_path / "straight", max_steps=4))
    straight.run(resume=False, show_progress_bar=False)
    assert summary["steps"] == 4
    expected = _parameters(straight)
    assert all(torch.equal(value, expected[name]) for name, value in _parameters(resumed).items())


def test_config_rejects_bad_settings(pairs_file: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="temperature"):
        FinetuneConfig(train=str(pairs_file), output=str(tmp_path), temperature=0)
    with pytest.raises(ValueError, match="max_steps"):
        FinetuneConfig(train=str(pairs_file), output=str(tmp_path), max_steps=0)
    for rate in (0, -1e-4, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="learning_rate"):
            FinetuneConfig(train=str(pairs_file), output=str(tmp_path), learning_rate=rate)
    with pytest.raises(ValueError, match="is a file"):
        FinetuneConfig(train=str(pairs_file), output=str(pairs_file))
