"""``lmk-rag finetune``: fine-tune a transformer with landmark (LMK) pooling."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from lmk_rag.cli.root import app


@app.command()
def finetune(
    train: Path = typer.Option(..., "--train", help="Pairs JSONL ({query, positive, negatives?}) or a BEIR folder."),
    output: Path = typer.Option(..., "--output", help="Folder for the fine-tuned model (LandmarkEncoder loads it)."),
    model: str = typer.Option(None, help="Base model folder or Hugging Face id (default: all-MiniLM-L6-v2)."),
    max_steps: int = typer.Option(100, help="Optimiser steps."),
    max_seconds: float = typer.Option(None, help="Stop training after this many seconds (the model is still saved)."),
    batch_size: int = typer.Option(16, help="Pairs per step; the other pairs of a batch are its negatives."),
    batch_tokens: int = typer.Option(
        None, help="Most padded tokens whose activations are held at once: larger steps run in micro-batches "
        "(gradient caching: same loss, one more forward pass). Default: no bound. At least the model window."),
    learning_rate: float = typer.Option(1e-4, help="AdamW peak learning rate (linear warmup, then linear decay)."),
    warmup_ratio: float = typer.Option(0.1, help="Share of steps spent warming up."),
    temperature: float = typer.Option(0.02, help="InfoNCE temperature."),
    landmark_loss_weight: float = typer.Option(1.0, help="Weight of the haystack landmark-MaxSim loss (0: off)."),
    hard_negatives: int = typer.Option(0, help="Mined hard negatives per pair and step (0: in-batch only)."),
    eval_every: int = typer.Option(50, help="Evaluate on the held-out pairs every N steps (0: start and end only)."),
    checkpoint_every: int = typer.Option(50, help="Write a resumable checkpoint every N steps (0: never)."),
    keep_checkpoint: bool = typer.Option(False, help="Keep the checkpoint after the run (to continue it later)."),
    resume: bool = typer.Option(True, help="Continue from OUTPUT/checkpoint when it exists."),
    seed: int = typer.Option(0, help="Seeds batches, granularities, haystacks and dropout."),
    device: str = typer.Option(None, help="cpu or cuda (default: cuda when available)."),
    gradient_checkpointing: bool = typer.Option(None, help="Default: on for CUDA, off for CPU."),
    max_length: int = typer.Option(None, help="Model window in tokens (default: the model's max_seq_length)."),
) -> None:
    """Fine-tune with InfoNCE on LMK-pooled vectors plus a landmark MaxSim loss on haystacks."""
    from lmk_rag.errors import LmkRagError
    from lmk_rag.train import FinetuneConfig, Trainer

    try:
        config = FinetuneConfig(
            train=str(train),
            output=str(output),
            model=model,
            max_steps=max_steps,
            max_seconds=max_seconds,
            batch_size=batch_size,
            batch_tokens=batch_tokens,
            learning_rate=learning_rate,
            warmup_ratio=warmup_ratio,
            temperature=temperature,
            landmark_loss_weight=landmark_loss_weight,
            hard_negatives=hard_negatives,
            eval_every=eval_every,
            checkpoint_every=checkpoint_every,
            keep_checkpoint=keep_checkpoint,
            seed=seed,
            device=device,
            gradient_checkpointing=gradient_checkpointing,
            max_length=max_length,
        )
        summary = Trainer(config).run(resume=resume)
    except LmkRagError as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(code=1) from error
    keys = ("steps", "train_seconds", "device", "heldout_before", "heldout_after")
    typer.echo(json.dumps({key: summary[key] for key in keys}, indent=2))
    typer.echo(f"model written to {output}")
