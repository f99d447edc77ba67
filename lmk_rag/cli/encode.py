"""``lmk-rag encode``: show how a text is cut into landmark chunks (handy to pick a granularity)."""

from __future__ import annotations

import json

import typer

from lmk_rag.cli.root import app
from lmk_rag.cli.runtime import backend_option, dtype_option, parse_granularity, runtime_settings


@app.command()
def encode(
    text: str = typer.Argument(..., help="The text to encode."),
    model: str = typer.Option(None, help="Model folder or Hugging Face id (default: all-MiniLM-L6-v2)."),
    granularity: str = typer.Option(
        None, help="Chunk size in tokens, 'sentence', 'variable' or 'none' (default: the library's, 64)."
    ),
    backend: str = backend_option(),
    dtype: str = dtype_option(),
) -> None:
    """Encode one text and print its chunks as JSON: span, token count, text."""
    from lmk_rag.checks import check_text

    check_text(text)  # before torch and the model load (seconds): an empty text fails at once
    from lmk_rag.encoder import LandmarkEncoder

    settings = {} if granularity is None else {"granularity": parse_granularity(granularity)}
    encoded = LandmarkEncoder(model_name=model, **settings, **runtime_settings(backend, dtype)).encode_documents(text)
    chunks = [
        {"span": list(span), "tokens": count, "text": text[span[0] : span[1]]}
        for span, count in zip(encoded.spans, encoded.token_counts)
    ]
    typer.echo(json.dumps({"dim": int(encoded.vector.shape[0]), "chunks": chunks}, indent=2))


@app.command("export-onnx")
def export_onnx(
    model: str = typer.Option(None, help="Model folder or Hugging Face id (default: all-MiniLM-L6-v2)."),
    dtype: str = typer.Option("float32", help="float32 (the queries of a torch float32 store) or int8."),
) -> None:
    """Export a model to ONNX into this machine's cache (needs torch), so its queries need no torch; print the file."""
    from lmk_rag.encoder.onnx_export import exported_model
    from lmk_rag.encoder.resolve import resolve_model_path

    typer.echo(str(exported_model(resolve_model_path(model), dtype)))
