"""``lmk-rag distill-static`` and ``lmk-rag train-mixer``: build the static model and train its ConvMixer.

This layer joins the mixer trainer and the eval harness: it hands the trainer an nDCG@10 scorer
(:func:`ndcg_selector`), so that :mod:`lmk_rag.static.train` never imports :mod:`lmk_rag.eval`.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from lmk_rag.cli.root import app

if TYPE_CHECKING:  # pragma: no cover
    from lmk_rag.eval.beir import BeirDataset
    from lmk_rag.static import StaticTokenEncoder
    from lmk_rag.static.mixer_torch import ConvMixer


@app.command("distill-static")
def distill_static_command(
    source: str = typer.Option(None, help="Transformer folder or hub id (default: the local all-MiniLM-L6-v2)."),
    output: Path = typer.Option(None, help="Where to save (default: the user cache dir)."),
    dims: int = typer.Option(256, help="Dimensions kept by PCA (MiniLM has 384)."),
    force: bool = typer.Option(False, help="Distil again even if the folder exists."),
) -> None:
    """Distil a model2vec static model (offline for local folders) and print where it was saved."""
    from lmk_rag.static.model import SOURCE_FILE, distill_static

    folder = distill_static(source, output, pca_dims=dims, force=force)
    typer.echo(json.dumps({"folder": str(folder), **json.loads((folder / SOURCE_FILE).read_text())}, indent=2))


@app.command("train-mixer")
def train_mixer_command(
    train: Path = typer.Option(
        ..., "--train", help="Pairs JSONL ({query, positive}) or a BEIR folder (its train split)."
    ),
    select_on: Path = typer.Option(
        None, help="BEIR folder whose nDCG@10 (static-mixer) picks the checkpoint (default: the held-out pairs, "
        "each query against its positive and the other held-out positives)."
    ),
    output: Path = typer.Option(None, help="Mixer folder (default: the user cache folder static-mixer loads)."),
    static_model: str = typer.Option(None, help="model2vec folder or hub id (default: the shipped model)."),
    objective: str = typer.Option("both", help="distill, contrastive or both."),
    max_steps: int = typer.Option(300, help="Optimiser steps."),
    batch_size: int = typer.Option(32, help="Pairs per step (in-batch negatives)."),
    learning_rate: float = typer.Option(2e-3, help="AdamW learning rate."),
    eval_every: int = typer.Option(100, help="Steps between checkpoint evaluations (0: start and end only)."),
    select_queries: int = typer.Option(200, help="Queries of --select-on used for selection (0: all)."),
    select_docs: int = typer.Option(800, help="Documents of --select-on used for selection (0: all)."),
    heldout_fraction: float = typer.Option(
        0.1, help="Share of the pairs held out (validation loss; checkpoint selection without --select-on)."
    ),
    seed: int = typer.Option(0, help="Random seed (split, batches, subsampling)."),
) -> None:
    """Train a ConvMixer on the pairs; keep the checkpoint with the best nDCG@10 on the held-out pairs (or
    --select-on)."""
    from lmk_rag.eval.beir import load_beir
    from lmk_rag.eval.pairset import pairs_dataset
    from lmk_rag.eval.sample import subsample
    from lmk_rag.splits import split_heldout
    from lmk_rag.static import StaticTokenEncoder
    from lmk_rag.static.mixer import user_mixer_dir
    from lmk_rag.static.train import TrainConfig, load_pairs, save_training_record, train_mixer

    config = TrainConfig(
        objective=objective,  # type: ignore[arg-type]
        max_steps=max_steps,
        batch_size=batch_size,
        learning_rate=learning_rate,
        eval_every=eval_every,
        seed=seed,
    )
    train_pairs, heldout_pairs = split_heldout(load_pairs(train), heldout_fraction, seed)  # before the model loads
    if select_on is None:
        dataset = pairs_dataset(heldout_pairs, name=f"held-out pairs of {train}")
    else:
        dataset = subsample(load_beir(select_on), select_queries or None, select_docs or None, seed)
    static = StaticTokenEncoder(static_model)
    selection = {"set": dataset.name, "queries": len(dataset.query_ids), "docs": len(dataset.doc_ids), "seed": seed}
    typer.echo(f"selection: nDCG@10 on {selection['set']} ({selection['queries']} queries, {selection['docs']} docs)")
    with tempfile.TemporaryDirectory(prefix="lmk-rag-mixer-") as checkpoint:
        select = ndcg_selector(dataset, static, Path(checkpoint))
        result = train_mixer(train_pairs, heldout_pairs, static, config, select=select, log=typer.echo)
    folder = result.mixer.save(output or user_mixer_dir())
    save_training_record(folder, config, result, static, selection)
    typer.echo(json.dumps({"folder": str(folder), "best_step": result.best_step,
                           "parameters": result.mixer.parameter_count, "seconds": round(result.seconds, 1)}))


def ndcg_selector(dataset: BeirDataset, static: StaticTokenEncoder, checkpoint: Path) -> Callable[[ConvMixer], float]:
    """A checkpoint scorer: nDCG@10 of the ``static-mixer`` pipeline on a retrieval set.

    The pipeline takes folders, not live objects: each checkpoint is saved to ``checkpoint`` and evaluated
    from there, over the static model ``static`` was loaded from.

    :param dataset: the selection set (held-out training pairs, or a subsampled BEIR folder).
    :param static: the static encoder whose vectors the mixer runs on.
    :param checkpoint: a scratch folder each scored mixer is saved to (overwritten every call).
    :return: a function mapping a mixer to its nDCG@10.
    """
    from lmk_rag.eval.pipelines import PipelineOptions
    from lmk_rag.eval.run import evaluate

    options = PipelineOptions(encoder={"static_model": static.vectors.source, "mixer": str(checkpoint)})

    def score(mixer: ConvMixer) -> float:
        mixer.save(checkpoint)
        return float(evaluate(dataset, "static-mixer", options)["ndcg@10"])

    return score
