"""Token-budget steps (``FinetuneConfig.batch_tokens``): micro-batches within the budget that give the whole batch's
loss and gradient, on the tiny random BERT (64-token windows)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import AutoTokenizer

from lmk_rag.errors import InvalidInputError
from lmk_rag.train import FinetuneConfig, Trainer
from lmk_rag.train.features import build_token_batch

SHORT = "How do I list the files of a folder?"
LONG = "The ls command lists directory contents, sorted by name unless an option sorts them by time. " * 12


def _config(pairs_file: Path, tiny_model: Path, output: Path, **overrides) -> FinetuneConfig:
    settings = {"train": str(pairs_file), "output": str(output), "model": str(tiny_model), "max_steps": 4,
                "batch_size": 4, "learning_rate": 1e-3, "warmup_ratio": 0.0, "heldout_fraction": 0.1,
                "eval_every": 0, "checkpoint_every": 0, "device": "cpu", "seed": 3, **overrides}
    return FinetuneConfig(**settings)


def _forward_sizes(trainer: Trainer) -> list[int]:
    """The padded tokens of every forward pass the trainer's model runs from now on (a list it appends to)."""
    sizes: list[int] = []
    trainer.model.register_forward_pre_hook(
        lambda module, args, kwargs: sizes.append(kwargs["input_ids"].numel()), with_kwargs=True)
    return sizes


def test_micro_batches_hold_every_window_once_within_the_budget(tiny_model: Path) -> None:
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    batch = build_token_batch(tokenizer, [SHORT, LONG, SHORT, LONG], [16, 16, 32, 8], 64)
    landmark_ids = batch.input_ids[batch.landmark_window, batch.landmark_position]
    counts = {}
    for budget in (64, 128, 300, batch.padded_tokens):
        micro_batches = batch.split(budget)
        counts[budget] = len(micro_batches)
        assert all(micro.tokens.padded_tokens <= budget for micro in micro_batches)
        assert sum(len(micro.tokens.input_ids) for micro in micro_batches) == len(batch.input_ids)
        order = torch.cat([micro.landmarks for micro in micro_batches])
        assert torch.equal(order.sort().values, torch.arange(len(landmark_ids)))
        for micro in micro_batches:  # each landmark keeps its token and its text
            tokens = micro.tokens
            assert torch.equal(tokens.input_ids[tokens.landmark_window, tokens.landmark_position],
                               landmark_ids[micro.landmarks])
            assert torch.equal(tokens.landmark_text, batch.landmark_text[micro.landmarks])
    assert counts[64] > counts[128] > counts[300] > counts[batch.padded_tokens] == 1
    short = build_token_batch(tokenizer, [SHORT] * 4, [16] * 4, 64)
    assert len(short.split(128)) == 1  # short texts: one micro-batch where long ones need several
    with pytest.raises(InvalidInputError, match="does not fit batch_tokens=32"):
        batch.split(32)


def test_every_forward_pass_of_a_step_stays_within_the_budget(
    pairs_file: Path, tiny_model: Path, tmp_path: Path
) -> None:
    bounded = Trainer(_config(pairs_file, tiny_model, tmp_path / "bounded", batch_tokens=128))
    unbounded = Trainer(_config(pairs_file, tiny_model, tmp_path / "unbounded"))
    bounded_sizes, unbounded_sizes = _forward_sizes(bounded), _forward_sizes(unbounded)
    for trainer in (bounded, unbounded):
        for _ in range(2):
            trainer.train_step()
    assert len(unbounded_sizes) == 2 * 3  # queries, passages, haystacks: one pass each per step
    assert max(unbounded_sizes) > 128  # four one-window haystacks, 4 x 64 tokens
    assert max(bounded_sizes) <= 128 and len(bounded_sizes) > 2 * 2 * 3  # micro-batches, each run twice
    assert all(value > 0 for value in bounded.train_step().values())


def test_a_step_within_the_budget_runs_its_passes_whole(pairs_file: Path, tiny_model: Path, tmp_path: Path) -> None:
    trainer = Trainer(_config(pairs_file, tiny_model, tmp_path / "out", batch_tokens=100_000))
    sizes = _forward_sizes(trainer)
    trainer.train_step()
    assert len(sizes) == 3


def test_micro_batches_give_the_whole_batch_loss_and_gradient(
    pairs_file: Path, tiny_model: Path, tmp_path: Path
) -> None:
    whole = Trainer(_config(pairs_file, tiny_model, tmp_path / "whole"))
    micro = Trainer(_config(pairs_file, tiny_model, tmp_path / "micro", batch_tokens=64))
    batch = whole.sampler.batch(0)
    losses = {}
    for name, trainer in (("whole", whole), ("micro", micro)):
        trainer.model.eval()  # no dropout: the two ways compute the same function
        losses[name] = trainer.backward(batch)
    assert losses["whole"].keys() == losses["micro"].keys() == {"loss", "nce", "landmark"}
    for key, value in losses["whole"].items():
        assert losses["micro"][key] == pytest.approx(value, rel=1e-4)
    gradients = dict(whole.model.named_parameters())
    checked = 0
    for name, parameter in micro.model.named_parameters():
        if parameter.grad is not None:
            torch.testing.assert_close(parameter.grad, gradients[name].grad, rtol=1e-3, atol=1e-6)
            checked += 1
    assert checked > 10


def test_token_budget_steps_are_deterministic_given_the_seed(
    pairs_file: Path, tiny_model: Path, tmp_path: Path
) -> None:
    runs = []
    for name in ("a", "b"):
        trainer = Trainer(_config(pairs_file, tiny_model, tmp_path / name, batch_tokens=128))
        runs.append([trainer.train_step()["loss"] for _ in range(2)])
        runs[-1].append(torch.cat([p.detach().flatten() for p in trainer.model.parameters()]))
    assert runs[0][:2] == pytest.approx(runs[1][:2], rel=1e-6)
    torch.testing.assert_close(runs[0][2], runs[1][2])


def test_a_budget_below_one_window_is_refused(pairs_file: Path, tiny_model: Path, tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="batch_tokens must be an integer"):
        _config(pairs_file, tiny_model, tmp_path / "out", batch_tokens=0)
    with pytest.raises(InvalidInputError, match="less than the model window of 64 tokens: give at least 64"):
        Trainer(_config(pairs_file, tiny_model, tmp_path / "out", batch_tokens=63))
