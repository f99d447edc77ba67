"""The root ``lmk-rag`` Typer app that every command module adds its commands to."""

from __future__ import annotations

import typer

app = typer.Typer(
    name="lmk-rag",
    help="Landmark-pooling embeddings and two-stage Qdrant search for long documents.",
    no_args_is_help=True,
    add_completion=False,
)


@app.callback()
def main() -> None:
    """Landmark-pooling embeddings and two-stage Qdrant search for long documents."""
