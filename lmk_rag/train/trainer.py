"""The LMK fine-tuning loop: losses, optimiser, checkpoints, periodic evaluation and the saved model folder."""

from __future__ import annotations

import json
import logging
import pickle
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm
from transformers import get_linear_schedule_with_warmup

from lmk_rag.checks import check_count, check_positive
from lmk_rag.encoder import LMK_CONFIG_FILE, LandmarkEncoder
from lmk_rag.errors import InvalidInputError
from lmk_rag.splits import split_heldout
from lmk_rag.train.data import GRANULARITIES, Batch, BatchSampler, HaystackBuilder, load_training_data
from lmk_rag.train.evaluation import HeldoutSet, evaluate_heldout
from lmk_rag.train.features import TokenBatch, build_token_batch
from lmk_rag.train.forward import hidden_states, landmark_matrix, landmark_states, lmk_vectors
from lmk_rag.train.losses import info_nce, landmark_maxsim_nce
from lmk_rag.train.mining import mine_hard_negatives

LMK_MARKER = {"lmk_trained": True, "granularity": "variable", "pooling": "lmk", "chunk_vector": "landmark"}
"""Written to ``lmk_model.json`` in the output folder: ``LandmarkEncoder`` then picks LMK pooling and the
marker's chunk vectors (see :func:`lmk_marker`)."""

CHECKPOINT_DIR = "checkpoint"
LOG_FILE = "train_log.jsonl"

logger = logging.getLogger(__name__)


@dataclass
class FinetuneConfig:
    """Settings of one fine-tuning run (all JSON-able; saved with every checkpoint).

    :param train: a pairs JSONL file or a BEIR folder (its train split).
    :param output: the folder the fine-tuned model is written to (checkpoints go to ``output/checkpoint``).
    :param model: the base model folder or hub id; None is all-MiniLM-L6-v2.
    :param max_steps: optimiser steps.
    :param max_seconds: stop training (and save) after this many seconds even before ``max_steps``; None: no limit.
    :param batch_size: pairs per step (in-batch negatives: ``batch_size - 1`` per query).
    :param batch_tokens: the most padded tokens whose activations are held at once; None: no bound (each step runs
        its queries, passages and haystacks as one forward pass each, and backpropagates them together). Set, a
        step whose passes hold more padded tokens in all runs them in micro-batches of at most this many tokens,
        twice (gradient caching, see :meth:`Trainer.backward`): the same batch and loss, one more forward pass,
        rather than fewer pairs, which would cut the in-batch negatives of long texts. At least ``max_length`` (a
        window must fit one micro-batch).
    :param learning_rate: AdamW peak learning rate.
    :param warmup_ratio: share of steps with linear warmup; the rate then decays linearly to 0.
    :param weight_decay: AdamW weight decay.
    :param temperature: InfoNCE temperature for both losses.
    :param landmark_loss_weight: weight of the haystack MaxSim loss (0 turns it off).
    :param haystack_tokens: content tokens of a haystack; default: one window less its landmarks.
    :param hard_negatives: mined negatives per pair per step (0: in-batch negatives only).
    :param mine_skip: mined candidates start below this many top hits (they are often unlabelled positives).
    :param mine_range: mined negatives are drawn from the next this many hits.
    :param heldout_fraction: share of pairs held out for periodic evaluation (at most 200 pairs).
    :param eval_every: evaluate every this many steps (0: only before and after training).
    :param checkpoint_every: write a checkpoint every this many steps (0: never).
    :param keep_checkpoint: keep the last checkpoint after a finished run (to continue it later).
    :param seed: seeds the data order, granularities, haystacks and dropout.
    :param device: ``"cpu"``, ``"cuda"``; default: cuda when available.
    :param bf16: train in bfloat16 autocast; default: on CUDA only.
    :param gradient_checkpointing: trade compute for memory; default: on CUDA only.
    :param freeze_embeddings: keep the input token embeddings fixed (a third of MiniLM's weights; much faster on CPU).
    :param max_grad_norm: gradients are clipped to this norm.
    :param max_length: the model window; default: the model's sentence-transformers ``max_seq_length``.
    :param granularities: chunk sizes drawn per text.
    """

    train: str
    output: str
    model: str | None = None
    max_steps: int = 100
    max_seconds: float | None = None
    batch_size: int = 16
    batch_tokens: int | None = None
    learning_rate: float = 1e-4
    warmup_ratio: float = 0.1
    weight_decay: float = 0.01
    temperature: float = 0.02
    landmark_loss_weight: float = 1.0
    haystack_tokens: int | None = None
    hard_negatives: int = 0
    mine_skip: int = 3
    mine_range: int = 30
    heldout_fraction: float = 0.05
    eval_every: int = 50
    checkpoint_every: int = 50
    keep_checkpoint: bool = False
    seed: int = 0
    device: str | None = None
    bf16: bool | None = None
    gradient_checkpointing: bool | None = None
    freeze_embeddings: bool = True
    max_grad_norm: float = 1.0
    max_length: int | None = None
    granularities: tuple[int, ...] = GRANULARITIES

    def __post_init__(self) -> None:
        """Check the numbers a run cannot start with."""
        check_count("max_steps", self.max_steps)
        if self.batch_tokens is not None:
            check_count("batch_tokens", self.batch_tokens)
        check_positive("learning_rate", self.learning_rate)
        check_positive("temperature", self.temperature)
        if Path(self.output).is_file():
            raise InvalidInputError(f"output {self.output} is a file; give a folder for the fine-tuned model")
        if not 0 <= self.heldout_fraction < 1:
            raise InvalidInputError(f"heldout_fraction must be in [0, 1), got {self.heldout_fraction}")
        if not self.granularities or min(self.granularities) < 1:
            raise InvalidInputError(f"granularities must be positive token counts, got {self.granularities}")
        self.granularities = tuple(int(g) for g in self.granularities)


class Trainer:
    """Fine-tunes a transformer so that its landmark tokens become good text and chunk vectors.

    Loss per step: InfoNCE (in-batch and optional mined negatives) on LMK-pooled queries and
    passages, plus ``landmark_loss_weight`` x InfoNCE over haystacks scored by landmark MaxSim.

    :param config: the run's settings.
    :raises ModelNotFoundError: when the base model cannot be found.
    :raises DatasetError: when the training data is missing or malformed.
    """

    def __init__(self, config: FinetuneConfig) -> None:
        self.config = config
        self.output = Path(config.output)
        pairs = load_training_data(config.train)  # before the model loads (seconds): a bad --train fails at once
        self.encoder = _training_encoder(config)
        self.model = self.encoder.model
        self.tokenizer = self.encoder.tokenizer
        self.device = self.encoder.device
        self.max_length = self.encoder.max_length
        if config.batch_tokens is not None and config.batch_tokens < self.max_length:
            raise InvalidInputError(
                f"batch_tokens {config.batch_tokens} is less than the model window of {self.max_length} tokens: "
                f"give at least {self.max_length} (or a smaller max_length)"
            )
        on_cuda = self.device.type == "cuda"
        self.bf16 = on_cuda if config.bf16 is None else config.bf16
        if config.gradient_checkpointing if config.gradient_checkpointing is not None else on_cuda:
            _enable_checkpointing(self.model)

        self.train_pairs, heldout = split_heldout(pairs, config.heldout_fraction, config.seed, max_heldout=200)
        haystack_tokens = config.haystack_tokens or _window_content(self.max_length, min(config.granularities))
        filler = [pair.positive for pair in self.train_pairs]
        self.haystacks = HaystackBuilder(self.tokenizer, filler, haystack_tokens)
        self.heldout = HeldoutSet.build(heldout, self.haystacks, config.seed) if heldout else None
        self.mined: list[list[int]] | None = None
        self.step = 0

        if config.freeze_embeddings:
            self.model.get_input_embeddings().weight.requires_grad_(False)
        decay, no_decay = [], []
        for name, parameter in self.model.named_parameters():
            if not parameter.requires_grad:
                continue
            (no_decay if parameter.ndim < 2 or "LayerNorm" in name else decay).append(parameter)
        self.optimizer = torch.optim.AdamW(
            [{"params": decay, "weight_decay": config.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
            lr=config.learning_rate,
        )
        self.scheduler = get_linear_schedule_with_warmup(
            self.optimizer, int(config.max_steps * config.warmup_ratio), config.max_steps
        )
        self.sampler = self._make_sampler()

    def _make_sampler(self) -> BatchSampler:
        """The batch sampler over the training pairs, with mined negatives when there are any."""
        pairs = self.train_pairs
        if self.mined is not None:
            pairs = [
                type(pair)(pair.query, pair.positive, (*pair.negatives, *(self.train_pairs[i].positive for i in mined)))
                for pair, mined in zip(self.train_pairs, self.mined)
            ]
        return BatchSampler(
            pairs,
            self.config.batch_size,
            self.config.seed,
            haystacks=self.haystacks if self.config.landmark_loss_weight > 0 else None,
            granularities=self.config.granularities,
            hard_negatives=self.config.hard_negatives,
        )

    # ---- one step -------------------------------------------------------------------------------

    def _token_batches(self, batch: Batch) -> list[TokenBatch]:
        """The model input of a step's passes, on the device: queries, passages, and haystacks when there are any."""
        passes = [(batch.queries, batch.query_granularity), (batch.passages, batch.passage_granularity)]
        if batch.haystacks:
            passes.append((batch.haystacks, batch.haystack_granularity))
        return [
            build_token_batch(self.tokenizer, texts, granularities, self.max_length).to(self.device)
            for texts, granularities in passes
        ]

    def _landmark_states(self, tokens: TokenBatch) -> torch.Tensor:
        """The landmark states of a token batch (with grad unless disabled), shape (n_landmarks, dim)."""
        with torch.autocast(device_type=self.device.type, dtype=torch.bfloat16, enabled=self.bf16):
            hidden = hidden_states(self.model, tokens)
        return landmark_states(hidden, tokens)

    def _losses(self, states: list[torch.Tensor], tokens: list[TokenBatch]) -> dict[str, torch.Tensor]:
        """The losses of a step from the landmark states of its passes (:meth:`_token_batches`' order)."""
        config = self.config
        queries = lmk_vectors(states[0], tokens[0])
        result = {"nce": info_nce(queries, lmk_vectors(states[1], tokens[1]), config.temperature)}
        total = result["nce"]
        if len(tokens) == 3:
            landmarks, mask = landmark_matrix(states[2], tokens[2])
            result["landmark"] = landmark_maxsim_nce(queries, landmarks, mask, config.temperature)
            total = total + config.landmark_loss_weight * result["landmark"]
        result["loss"] = total
        return result

    def losses(self, batch: Batch) -> dict[str, torch.Tensor]:
        """The losses of one batch (with grad), each pass run whole.

        :param batch: the texts and granularities of the step.
        :return: ``{"loss", "nce"}``, plus ``"landmark"`` with haystacks.
        """
        tokens = self._token_batches(batch)
        return self._losses([self._landmark_states(pass_tokens) for pass_tokens in tokens], tokens)

    def backward(self, batch: Batch) -> dict[str, float]:
        """Compute the losses of a batch and add their gradients to the model's.

        Within ``batch_tokens`` (or without it) the passes run whole and backpropagate together, so the
        activations of all of them are held at once. A step whose passes hold more padded tokens than
        ``batch_tokens`` uses gradient caching instead (Gao et al. 2021): every pass runs without grad in
        micro-batches of at most ``batch_tokens`` padded tokens (:meth:`TokenBatch.split`), the losses are
        backpropagated to the landmark states alone, and then each micro-batch runs again, with grad, and
        backpropagates its share of those gradients before the next one runs. The activations held at once are
        those of one micro-batch, yet the gradient is the whole batch's, in-batch negatives included. Dropout is
        seeded per micro-batch from ``(seed, step)``, so both runs of a micro-batch draw the same masks.

        :param batch: the texts and granularities of the step.
        :return: the losses as floats.
        """
        tokens = self._token_batches(batch)
        budget = self.config.batch_tokens
        if budget is None or sum(pass_tokens.padded_tokens for pass_tokens in tokens) <= budget:
            losses = self._losses([self._landmark_states(pass_tokens) for pass_tokens in tokens], tokens)
            losses["loss"].backward()
            return {name: float(value.detach()) for name, value in losses.items()}
        micro_batches = [pass_tokens.split(budget) for pass_tokens in tokens]
        states = []
        number = 0
        with torch.no_grad():
            for pass_micro in micro_batches:
                pieces = []
                for micro in pass_micro:
                    self._seed_micro_batch(number)
                    pieces.append(self._landmark_states(micro.tokens))
                    number += 1
                order = torch.cat([micro.landmarks for micro in pass_micro])
                stacked = torch.cat(pieces)  # in micro-batch order: put back in the pass's landmark order
                states.append(torch.empty_like(stacked).index_copy_(0, order, stacked))
        for pass_states in states:
            pass_states.requires_grad_()
        losses = self._losses(states, tokens)
        losses["loss"].backward()  # to the landmark states only: they were computed without grad
        number = 0
        for pass_micro, pass_states in zip(micro_batches, states):
            for micro in pass_micro:
                self._seed_micro_batch(number)
                self._landmark_states(micro.tokens).backward(pass_states.grad[micro.landmarks])
                number += 1
        return {name: float(value.detach()) for name, value in losses.items()}

    def _seed_micro_batch(self, number: int) -> None:
        """Seed dropout for micro-batch ``number`` of this step (the same for its run without and with grad)."""
        torch.manual_seed(int(np.random.SeedSequence([self.config.seed, self.step, number]).generate_state(1)[0]))

    def train_step(self) -> dict[str, float]:
        """Run one optimiser step on the batch of ``self.step`` and advance the step.

        Dropout is seeded from ``(seed, step)``, so a resumed run repeats the interrupted one exactly.

        :return: the step's losses as floats.
        """
        self.model.train()
        torch.manual_seed(self.config.seed * 1_000_003 + self.step)
        batch = self.sampler.batch(self.step)
        self.optimizer.zero_grad(set_to_none=True)
        losses = self.backward(batch)
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.max_grad_norm)
        self.optimizer.step()
        self.scheduler.step()
        self.step += 1
        return losses

    # ---- evaluation, mining ----------------------------------------------------------------------

    def evaluate(self) -> dict[str, float]:
        """Held-out metrics with the inference encoder (variable granularity, as the saved model will run).

        :return: R@1 and MRR of LMK vectors, and needle R@1 of landmark and chunk-mean MaxSim; ``{}`` without
            held-out pairs.
        """
        if self.heldout is None:
            return {}
        self.model.eval()
        return evaluate_heldout(self.encoder, self.heldout)

    def mine(self) -> None:
        """Mine hard negatives for every training pair with the current model (once per run)."""
        self.model.eval()
        self.mined = mine_hard_negatives(
            self.encoder, self.train_pairs, skip=self.config.mine_skip, depth=self.config.mine_range
        )
        self.sampler = self._make_sampler()

    # ---- checkpoints ---------------------------------------------------------------------------

    @property
    def checkpoint_path(self) -> Path:
        """Where the run's checkpoint lives."""
        return self.output / CHECKPOINT_DIR / "state.pt"

    def save_checkpoint(self) -> Path:
        """Write model, optimiser, scheduler, step, mined negatives and config (atomically replaced).

        :return: the checkpoint file.
        """
        path = self.checkpoint_path
        path.parent.mkdir(parents=True, exist_ok=True)
        state = {
            "step": self.step,
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "mined": self.mined,
            "config": json.loads(json.dumps(asdict(self.config), default=str)),  # plain values: loads safely
            "rng": {"seed": self.config.seed, "torch": torch.get_rng_state()},
        }
        partial = path.with_suffix(".tmp")
        torch.save(state, partial)
        partial.replace(path)
        return path

    def load_checkpoint(self, path: Path | None = None) -> bool:
        """Restore a checkpoint written by :meth:`save_checkpoint`.

        :param path: the checkpoint file; default: this run's.
        :return: False when there is none.
        """
        path = path or self.checkpoint_path
        if not path.is_file():
            return False
        try:  # tensors, numbers, strings and containers only: a checkpoint file cannot run code
            state = torch.load(path, map_location=self.device, weights_only=True)
        except pickle.UnpicklingError as error:
            raise InvalidInputError(f"{path}: not a checkpoint this trainer wrote ({error})") from None
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.step = int(state["step"])
        torch.set_rng_state(state["rng"]["torch"])
        if state["mined"] is not None:
            self.mined = state["mined"]
            self.sampler = self._make_sampler()
        return True

    # ---- the run -------------------------------------------------------------------------------

    def save_model(self, folder: Path | None = None, heldout: dict[str, float] | None = None) -> Path:
        """Write the model folder ``LandmarkEncoder(model_name=folder)`` loads as LMK-trained.

        :param folder: where to write; default: the run's output folder.
        :param heldout: the final held-out metrics, which choose the marker's chunk vectors (:func:`lmk_marker`).
        :return: the folder.
        """
        folder = Path(folder or self.output)
        folder.mkdir(parents=True, exist_ok=True)
        self.model.save_pretrained(folder)
        self.tokenizer.save_pretrained(folder)
        (folder / "sentence_bert_config.json").write_text(
            json.dumps({"max_seq_length": self.max_length, "do_lower_case": False}, indent=2)
        )
        (folder / LMK_CONFIG_FILE).write_text(json.dumps(lmk_marker(heldout or {}), indent=2))
        return folder

    def _log(self, record: dict[str, Any]) -> None:
        self.output.mkdir(parents=True, exist_ok=True)
        with open(self.output / LOG_FILE, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\n")

    def run(self, resume: bool = True, show_progress_bar: bool = True) -> dict[str, Any]:
        """Train to ``max_steps`` (continuing from the checkpoint when ``resume``), then save the model.

        :param resume: continue from ``output/checkpoint`` when it exists.
        :param show_progress_bar: show a tqdm bar with the running loss.
        :return: a summary: steps, seconds, device and the held-out metrics before and after.
        """
        config = self.config
        resumed = resume and self.load_checkpoint()
        started = time.perf_counter()
        before: dict[str, float] = {}
        if not resumed:
            before = self.evaluate()
            self._log({"step": 0, "eval": before})
            if config.hard_negatives > 0:
                self.mine()
        bar = tqdm(total=config.max_steps, initial=self.step, desc="Fine-tuning", unit="step",
                   disable=not show_progress_bar)
        recent: list[float] = []
        while self.step < config.max_steps:
            if config.max_seconds is not None and time.perf_counter() - started > config.max_seconds:
                logger.warning("stopping at step %d: the %.0f s time budget is spent", self.step, config.max_seconds)
                break
            losses = self.train_step()
            recent = [*recent[-19:], losses["loss"]]
            record: dict[str, Any] = {"step": self.step, **losses, "lr": self.scheduler.get_last_lr()[0]}
            if config.eval_every and self.step % config.eval_every == 0 and self.step < config.max_steps:
                record["eval"] = self.evaluate()
            if config.checkpoint_every and self.step % config.checkpoint_every == 0:
                self.save_checkpoint()
            self._log(record)
            bar.set_postfix(loss=f"{np.mean(recent):.3f}", **{k: f"{v:.3f}" for k, v in losses.items() if k != "loss"})
            bar.update(1)
        bar.close()
        seconds = time.perf_counter() - started
        after = self.evaluate()
        self._log({"step": self.step, "eval": after, "seconds": seconds})
        self.save_model(heldout=after)
        if not config.keep_checkpoint:
            shutil.rmtree(self.output / CHECKPOINT_DIR, ignore_errors=True)
        summary = {
            "steps": self.step,
            "train_seconds": round(seconds, 1),
            "device": str(self.device),
            "heldout_before": before,
            "heldout_after": after,
            "config": asdict(config),
        }
        (self.output / "finetune_summary.json").write_text(json.dumps(summary, indent=2))
        return summary


def lmk_marker(heldout: dict[str, float]) -> dict[str, Any]:
    """The ``lmk_model.json`` of a fine-tuned model: LMK-trained, with the chunk vectors that measured best.

    Landmark states are the chunk vectors unless the held-out needle task found chunk means better
    (a short run can leave landmarks behind the means of the same model); the numbers are recorded.

    :param heldout: the final held-out metrics (``needle_landmark_r1``, ``needle_mean_r1``); empty without a
        held-out split, which keeps landmark states.
    :return: the marker.
    """
    if not {"needle_landmark_r1", "needle_mean_r1"} <= set(heldout):
        return dict(LMK_MARKER)
    means_win = heldout["needle_mean_r1"] > heldout["needle_landmark_r1"]
    choice = {key: heldout[key] for key in ("needle_landmark_r1", "needle_mean_r1")}
    return {**LMK_MARKER, "chunk_vector": "mean" if means_win else "landmark", "chunk_vector_heldout": choice}


def _enable_checkpointing(model: torch.nn.Module) -> None:
    """Turn on activation (gradient) checkpointing (renamed in transformers 5.2x; not saved with the model)."""
    if hasattr(model, "activation_checkpointing_enable"):
        model.activation_checkpointing_enable({"use_reentrant": False})
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})


def _window_content(max_length: int, smallest_granularity: int) -> int:
    """Content tokens that fit one window with a landmark every ``smallest_granularity`` tokens and a CLS."""
    return (max_length - 1) * smallest_granularity // (smallest_granularity + 1) - 1


def _training_encoder(config: FinetuneConfig) -> LandmarkEncoder:
    """The encoder whose model is trained: float32 weights, LMK pooling, landmark chunk vectors, no prompts (the
    training batches carry none, and the saved model declares none)."""
    return LandmarkEncoder(
        model_name=config.model,
        granularity="variable",
        pooling="lmk",
        chunk_vector="landmark",
        query_prompt="",
        document_prompt="",
        max_length=config.max_length,
        device=config.device,
        dtype="float32",
        show_progress_bar=False,
    )
