"""``lmk-rag train-projection``: train the linear projection of a model on (query, positive) pairs."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from lmk_rag.cli.root import app


@app.command("train-projection")
def train_projection_command(
    train: list[Path] = typer.Option(
        ..., "--train", help="Pairs JSONL ({query, positive}) or a BEIR folder (its train split); repeatable."
    ),
    output: Path = typer.Option(..., "--output", help="Folder LandmarkEncoder(projection=FOLDER) loads"),
    model: str = typer.Option(None, help="Model folder or Hugging Face id (default: all-MiniLM-L6-v2)."),
    epochs: int = typer.Option(8, help="Passes over the training pairs."),
    batch_size: int = typer.Option(128, help="Queries per step (each against every distinct positive)."),
    learning_rate: float = typer.Option(3e-4, help="Adam learning rate."),
    l2: float = typer.Option(1e-2, help="Penalty on the fit's distance from the identity."),
    mix: float = typer.Option(0.5, help="Share of the fit in the projection, I + mix * (fit - I) (1: the fit itself)."),
    heldout_fraction: float = typer.Option(0.1, help="Share of the pairs held out to choose the epoch."),
    seed: int = typer.Option(0, help="Seeds the held-out split and the batch order."),
) -> None:
    """Fit a linear projection on the encoder's chunk vectors; keep the epoch with the best held-out MRR, mixed with the
    identity."""
    from lmk_rag.encoder import LandmarkEncoder
    from lmk_rag.splits import split_heldout
    from lmk_rag.train.data import load_training_data
    from lmk_rag.train.projection import EncodedPairs, ProjectionConfig, train_projection

    config = ProjectionConfig(epochs=epochs, batch_size=batch_size, learning_rate=learning_rate, l2=l2, mix=mix,
                              seed=seed)
    pairs = [(pair.query, pair.positive) for source in train for pair in load_training_data(source)]
    encoder = LandmarkEncoder(model_name=model, projection=None)
    recorded = {"model_digest": encoder.model_digest, "chunk_vector": encoder.settings["chunk_vector"],
                "encoder": {**encoder.settings, "model_name": None}, "pairs": [str(source) for source in train]}
    typer.echo(f"encoding {len(pairs)} pairs with {encoder!r}")
    encoded = EncodedPairs(pairs, lambda texts: [text.chunk_vectors for text in encoder.encode_documents(texts)])
    train_rows, heldout_rows = split_heldout(list(range(len(pairs))), heldout_fraction, seed)
    result = train_projection(encoded, train_rows, heldout_rows, config, recorded, log=typer.echo)
    folder = result.projection.save(output)
    typer.echo(json.dumps({"folder": str(folder), "best_epoch": result.best_epoch,
                           "heldout_mrr": result.heldout_mrr,
                           "identity_heldout_mrr": result.history[0]["heldout_mrr"],
                           "seconds": round(result.seconds, 1)}))
