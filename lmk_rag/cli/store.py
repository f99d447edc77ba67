"""``lmk-rag ingest``, ``lmk-rag query`` and ``lmk-rag info``: a landmark store from the command line."""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import typer

from lmk_rag.cli.root import app
from lmk_rag.cli.runtime import backend_option, dtype_option, runtime_settings
from lmk_rag.errors import LmkRagError

SUFFIXES = (".txt", ".md")
STORE_HELP = "The store folder (Qdrant Edge)."


def collect_files(paths: list[Path]) -> list[tuple[str, Path]]:
    """The ``.txt``/``.md`` files under the given paths, with their doc ids.

    A file inside a folder given gets its path relative to that folder as doc id; a file given
    directly gets its name.

    :param paths: files or folders.
    :return: ``(doc_id, file)`` pairs in a stable order.
    :raises typer.BadParameter: for a missing path or a file of another type.
    """
    found: list[tuple[str, Path]] = []
    for path in paths:
        if path.is_dir():
            files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in SUFFIXES)
            found.extend((p.relative_to(path).as_posix(), p) for p in files)
        elif path.is_file():
            if path.suffix.lower() not in SUFFIXES:
                raise typer.BadParameter(f"{path}: only {', '.join(SUFFIXES)} files can be ingested")
            found.append((path.name, path))
        else:
            raise typer.BadParameter(f"{path}: no such file or folder")
    return found


def parse_filters(values: list[str]) -> dict[str, Any] | None:
    """``key=value`` options as a filter dict (numbers parsed; repeated keys mean any of)."""
    if not values:
        return None
    out: dict[str, Any] = {}
    for item in values:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise typer.BadParameter(f"--filter {item!r}: expected key=value")
        value: Any = json.loads(raw) if raw.lstrip("-").replace(".", "", 1).isdigit() else raw
        if key in out:
            previous = out[key] if isinstance(out[key], list) else [out[key]]
            value = [*previous, value]
        out[key] = value
    return out


def _fail(error: Exception) -> None:
    """Print an lmk-rag error and exit 1."""
    typer.echo(f"error: {error}", err=True)
    raise typer.Exit(1)


@app.command()
def ingest(
    paths: list[Path] = typer.Argument(..., help="Files or folders of .txt/.md files."),
    store: Path = typer.Option(..., "--store", help=STORE_HELP),
    batch_size: int = typer.Option(8, help="Documents encoded and written per batch."),
    bm25: bool = typer.Option(None, "--bm25/--no-bm25", help="BM25 vectors, fused into the ranking (new stores only)."),
    backend: str = backend_option(),
    dtype: str = dtype_option(),
) -> None:
    """Encode documents and write their landmark nodes to a store (re-ingesting replaces a document).

    A new store records the encoder's settings, ``--backend`` and ``--dtype`` included; an existing store encodes
    with its recorded settings, and other ``--backend`` / ``--dtype`` values than it records are an error.
    """
    from lmk_rag.store import LandmarkStore

    files = collect_files(paths)
    documents = []
    for doc_id, file in files:
        text = file.read_text(encoding="utf-8", errors="replace")
        if text.strip():
            documents.append((doc_id, text, {"path": str(file.resolve())}))
        else:
            typer.echo(f"skipped {file}: empty", err=True)
    start = time.perf_counter()
    try:
        encoder = None
        if backend is not None or dtype is not None:
            from lmk_rag.encoder import LandmarkEncoder

            encoder = LandmarkEncoder(**runtime_settings(backend, dtype))
        with LandmarkStore(store, encoder=encoder, bm25=bm25) as target:
            nodes = target.add_documents(documents, batch_size=batch_size, show_progress_bar=True)
            target.optimize()
    except LmkRagError as error:
        _fail(error)
    seconds = time.perf_counter() - start
    typer.echo(f"ingested {len(documents)} documents ({nodes} nodes) into {store} in {seconds:.1f} s")


@app.command()
def query(
    text: str = typer.Argument(..., help="The query."),
    store: Path = typer.Option(..., "--store", help=STORE_HELP),
    k: int = typer.Option(10, "-k", help="Hits to return."),
    rerank: str = typer.Option("chunks", help="chunks | static | none (the old name 'landmarks' still works)."),
    alpha: float = typer.Option(
        None, min=0.0, max=1.0, help="Weight of the rerank score against BM25 (1 = rerank only, 0 = BM25 only; "
        "default: the store's)."
    ),
    filter: list[str] = typer.Option(None, "--filter", help="key=value on metadata (repeat; same key = any of)."),
    nodes: bool = typer.Option(False, "--nodes", help="Node-level hits (several per document)."),
    as_json: bool = typer.Option(False, "--json", help='Print {"query": ..., "hits": [...]} as JSON.'),
) -> None:
    """Search a store: dense and BM25 prefetch, MaxSim rerank fused with BM25; the best node per document."""
    from lmk_rag.store import LandmarkStore

    try:
        with LandmarkStore(store, create=False) as source:
            hits = source.search(
                text, k=k, rerank=rerank, filter=parse_filters(filter or []), doc_level=not nodes, alpha=alpha
            )
    except LmkRagError as error:
        _fail(error)
    if as_json:
        typer.echo(json.dumps({"query": text, "hits": [asdict(h) for h in hits]}, indent=2, ensure_ascii=False))
        return
    for rank, hit in enumerate(hits, 1):
        snippet = " ".join(hit.text.split())[:100]
        typer.echo(f"{rank:>2}. {hit.score:.4f}  {hit.doc_id} [{hit.span[0]}:{hit.span[1]}]  {snippet}")


@app.command()
def info(store: Path = typer.Option(..., "--store", help=STORE_HELP)) -> None:
    """Print a store's counts and recorded settings as JSON."""
    from lmk_rag.store import LandmarkStore

    try:
        with LandmarkStore(store, create=False) as source:
            typer.echo(json.dumps(source.info(), indent=2))
    except LmkRagError as error:
        _fail(error)
