"""Train a ConvMixer on (query, passage) pairs: cosine distillation to transformer token states and/or
an in-batch contrastive MaxSim loss. Checkpoints are chosen by a score the caller passes in (``select``;
``lmk-rag train-mixer`` passes nDCG@10 of ``static-mixer`` on a dev set), not by loss. This module never
imports the eval harness.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from torch import nn

from lmk_rag.checks import check_count, check_positive
from lmk_rag.errors import InvalidInputError
from lmk_rag.static.mixer_torch import ConvMixer
from lmk_rag.static.teacher import teacher_targets
from lmk_rag.static.token_encoder import StaticTokenEncoder
from lmk_rag.train.data import load_training_data
from lmk_rag.train.losses import maxsim_scores

Objective = Literal["distill", "contrastive", "both"]


@dataclass(frozen=True)
class TrainConfig:
    """Mixer training settings.

    :param objective: ``"distill"`` (cosine to teacher token states), ``"contrastive"`` (in-batch MaxSim
        cross-entropy) or ``"both"`` (their sum, distillation weighted by ``distill_loss_weight``).
    :param max_steps: optimiser steps.
    :param batch_size: pairs per step (the other passages of the batch are the negatives).
    :param learning_rate: AdamW learning rate.
    :param temperature: softmax temperature of the contrastive loss (scores are mean cosines).
    :param distill_loss_weight: weight of the distillation loss in ``"both"``.
    :param max_tokens: static tokens kept per passage.
    :param kernel_size: the mixer's conv width.
    :param eval_every: steps between checkpoint evaluations (0: only before and after training).
    :param seed: random seed (batches, init).
    """

    objective: Objective = "both"
    max_steps: int = 300
    batch_size: int = 32
    learning_rate: float = 2e-3
    temperature: float = 0.05
    distill_loss_weight: float = 1.0
    max_tokens: int = 128
    kernel_size: int = 7
    eval_every: int = 100
    seed: int = 0

    def __post_init__(self) -> None:
        """Check the numbers a run cannot start with."""
        if self.objective not in ("distill", "contrastive", "both"):
            raise InvalidInputError(f"unknown objective {self.objective!r}: use distill, contrastive or both")
        check_count("max_steps", self.max_steps)
        check_count("batch_size", self.batch_size, minimum=2)  # in-batch negatives need a second pair
        check_count("max_tokens", self.max_tokens)
        check_count("kernel_size", self.kernel_size)
        check_count("eval_every", self.eval_every, minimum=0)
        check_positive("learning_rate", self.learning_rate)
        check_positive("temperature", self.temperature)
        if self.objective == "both":
            check_positive("distill_loss_weight", self.distill_loss_weight)


@dataclass(frozen=True)
class TrainResult:
    """What training produced.

    :param mixer: the selected mixer (best checkpoint by the selection score, or the last one).
    :param history: one row per evaluation (step 0 is the untrained mixer): ``step``, ``val_loss`` and,
        with a selector, ``score``.
    :param best_step: the step of the selected checkpoint.
    :param seconds: wall time.
    """

    mixer: ConvMixer
    history: list[dict[str, float]]
    best_step: int
    seconds: float


def load_pairs(source: str | Path) -> list[tuple[str, str]]:
    """Read (query, positive) pairs as ``lmk-rag finetune`` reads them (negatives are not used here).

    :param source: a pairs JSONL file (``{"query", "positive"}`` per line) or a BEIR folder (its train split).
    :return: (query, positive) pairs in file order.
    :raises DatasetError: if the source is missing or a line is malformed (naming file and line).
    """
    return [(pair.query, pair.positive) for pair in load_training_data(source)]


class _Batches:
    """Static token vectors and teacher targets of the pairs, padded into tensors on demand."""

    def __init__(self, pairs: Sequence[tuple[str, str]], static: StaticTokenEncoder, config: TrainConfig,
                 with_teacher: bool) -> None:
        texts = [q for q, _ in pairs] + [p for _, p in pairs]
        self.n = len(pairs)
        self.tokens = []
        for text in texts:
            ids, _ = static.tokenize(text)
            self.tokens.append(static.vectors.unit_table[ids[: config.max_tokens]])
        self.targets = teacher_targets(texts, static, config.max_tokens) if with_teacher else None

    def get(self, rows: Sequence[int], passages: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        index = [r + self.n if passages else r for r in rows]
        length = max(1, max(len(self.tokens[i]) for i in index))
        dim = self.tokens[index[0]].shape[1]
        x = torch.zeros(len(index), length, dim)
        mask = torch.zeros(len(index), length)
        target = None
        if self.targets is not None:
            target = torch.full((len(index), length, self.targets[0].shape[1]), float("nan"))
        for row, i in enumerate(index):
            n = len(self.tokens[i])
            x[row, :n] = torch.from_numpy(self.tokens[i])
            mask[row, :n] = 1
            if target is not None:
                target[row, :n] = torch.from_numpy(self.targets[i].astype(np.float32))
        return x, mask, target


def _distill_loss(out: torch.Tensor, target: torch.Tensor, head: nn.Linear) -> torch.Tensor:
    valid = ~torch.isnan(target[..., 0])
    if not valid.any():
        return out.sum() * 0
    return (1 - nn.functional.cosine_similarity(head(out[valid]), target[valid], dim=-1)).mean()


def _loss(mixer: ConvMixer, head: nn.Linear, data: _Batches, rows: Sequence[int], config: TrainConfig
          ) -> torch.Tensor:
    q, q_mask, q_target = data.get(rows, passages=False)
    p, p_mask, p_target = data.get(rows, passages=True)
    q_out, p_out = mixer(q, q_mask), mixer(p, p_mask)
    loss = q_out.new_zeros(())
    if config.objective in ("contrastive", "both"):
        scores = maxsim_scores(q_out, q_mask, p_out, p_mask, mean=True) / config.temperature
        loss = loss + nn.functional.cross_entropy(scores, torch.arange(len(rows)))
    if config.objective in ("distill", "both"):
        assert q_target is not None and p_target is not None
        weight = config.distill_loss_weight if config.objective == "both" else 1.0
        distill = (_distill_loss(q_out, q_target, head) + _distill_loss(p_out, p_target, head)) / 2
        loss = loss + weight * distill
    return loss


def validation_loss(mixer: ConvMixer, head: nn.Linear, data: _Batches, config: TrainConfig) -> float:
    """The mean training loss over the held-out pairs, in batches of ``config.batch_size``.

    :param mixer: the mixer.
    :param head: the distillation head (static dim -> teacher dim).
    :param data: the held-out pairs' batches.
    :param config: the training settings.
    :return: the loss.
    """
    with torch.no_grad():
        losses = [_loss(mixer, head, data, range(s, min(s + config.batch_size, data.n)), config).item()
                  for s in range(0, data.n, config.batch_size) if min(s + config.batch_size, data.n) - s > 1]
    return float(np.mean(losses))


def train_mixer(
    train: Sequence[tuple[str, str]],
    val: Sequence[tuple[str, str]],
    static: StaticTokenEncoder,
    config: TrainConfig = TrainConfig(),
    select: Callable[[ConvMixer], float] | None = None,
    log: Callable[[str], None] | None = None,
) -> TrainResult:
    """Train a ConvMixer on top of a (frozen) static model.

    :param train: training (query, passage) pairs.
    :param val: held-out pairs for the validation loss.
    :param static: the static encoder (its mixer, if any, is ignored).
    :param config: the training settings.
    :param select: scores a checkpoint (higher is better, e.g. nDCG@10 on a dev set) before training,
        every ``eval_every`` steps and at the end; None keeps the last checkpoint.
    :param log: receives one line per evaluation.
    :return: the selected mixer, the history and timing.
    :raises InvalidInputError: for fewer than two training pairs.
    """
    if len(train) < 2:
        raise InvalidInputError("training needs at least two pairs (in-batch negatives)")
    start = time.perf_counter()
    torch.manual_seed(config.seed)
    rng = random.Random(config.seed)
    with_teacher = config.objective != "contrastive"
    train_data = _Batches(train, static, config, with_teacher)
    val_data = _Batches(val, static, config, with_teacher)
    mixer = ConvMixer(static.dim, kernel_size=config.kernel_size)
    teacher_dim = train_data.targets[0].shape[1] if train_data.targets is not None else static.dim
    head = nn.Linear(static.dim, teacher_dim)
    optimiser = torch.optim.AdamW([*mixer.parameters(), *head.parameters()], lr=config.learning_rate)
    history: list[dict[str, float]] = []
    best = _evaluate(0, mixer, head, val_data, config, select, history, None, log)
    order: list[int] = []
    for step in range(1, config.max_steps + 1):
        if len(order) < config.batch_size:
            order = list(range(train_data.n))
            rng.shuffle(order)
        rows, order = order[: config.batch_size], order[config.batch_size :]
        mixer.train()
        loss = _loss(mixer, head, train_data, rows, config)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        if (config.eval_every and step % config.eval_every == 0) or step == config.max_steps:
            best = _evaluate(step, mixer, head, val_data, config, select, history, best, log)
    best_step = config.max_steps
    if best is not None:
        best_step = best[1]
        mixer.load_state_dict(best[2])
    mixer.eval()
    return TrainResult(mixer, history, best_step, time.perf_counter() - start)


_Best = tuple[float, int, dict[str, torch.Tensor]]


def _evaluate(step: int, mixer: ConvMixer, head: nn.Linear, val_data: _Batches, config: TrainConfig,
              select: Callable[[ConvMixer], float] | None, history: list[dict[str, float]], best: _Best | None,
              log: Callable[[str], None] | None) -> _Best | None:
    """Append one history row (validation loss, selection score); return the best checkpoint so far."""
    mixer.eval()
    row: dict[str, float] = {"step": step, "val_loss": validation_loss(mixer, head, val_data, config)}
    if select is not None:
        row["score"] = select(mixer)
        if best is None or row["score"] > best[0]:
            best = (row["score"], step, {k: v.clone() for k, v in mixer.state_dict().items()})
    history.append(row)
    if log is not None:
        log(" ".join(f"{k}={v:.4f}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()))
    return best


def save_training_record(folder: Path, config: TrainConfig, result: TrainResult, static: StaticTokenEncoder,
                         selection: dict[str, Any]) -> None:
    """Write ``training.json`` (settings, selection set, history, selected step, static model) beside the mixer.

    :param folder: the mixer folder.
    :param config: the training settings.
    :param result: the training result.
    :param static: the static encoder the mixer was trained on.
    :param selection: what the selection score was measured on (set name, queries, documents, seed).
    """
    record = {"config": asdict(config), "selection": selection, "history": result.history,
              "best_step": result.best_step, "seconds": round(result.seconds, 1), "static_model": static.vectors.source,
              "static_fingerprint": static.fingerprint,
              "parameters": result.mixer.parameter_count}
    (folder / "training.json").write_text(json.dumps(record, indent=2))

