"""``lmk-rag ingest``, ``lmk-rag query`` and ``lmk-rag info``: a landmark store from the command line (errors go
through the root's one error path, :mod:`lmk_rag.cli.root`).

Every command opens one store: ``--store DIR`` (embedded Qdrant Edge), ``--url URL`` (a Qdrant server; the API
key comes from ``QDRANT_API_KEY`` and is never printed) or ``--location DIR`` (qdrant-client local mode).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import time
from collections.abc import Iterable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import typer

from lmk_rag.cli.files import DEFAULT_GLOBS, SourceFile, collect_files, read_text
from lmk_rag.cli.root import app
from lmk_rag.cli.runtime import backend_option, dtype_option, runtime_settings
from lmk_rag.errors import CorruptStoreError, InvalidInputError, StoreNotFoundError
from lmk_rag.store.types import DEFAULT_COLLECTION, Hit, StorageOptions

EVERYDAY = "Everyday commands"
#: ``--filter`` values read as numbers (see :func:`filter_value`).
INTEGER = re.compile(r"[+-]?[0-9]+")
DECIMAL = re.compile(r"[+-]?([0-9]+\.[0-9]*|\.[0-9]+|[0-9]+)([eE][+-]?[0-9]+)?")


def store_option() -> Any:
    """``--store DIR``: the store folder."""
    return typer.Option(None, "--store", help="The store folder (embedded Qdrant Edge).")


def url_option() -> Any:
    """``--url URL``: a Qdrant server instead of a folder."""
    return typer.Option(
        None, "--url", help="A Qdrant server or cluster instead of a folder (API key from $QDRANT_API_KEY)."
    )


def location_option() -> Any:
    """``--location DIR``: qdrant-client local mode instead of a folder."""
    return typer.Option(
        None, "--location", help="qdrant-client local mode instead: a folder, or :memory: (small data and tests)."
    )


def collection_option() -> Any:
    """``--collection-name NAME`` on a server or in local mode."""
    return typer.Option(
        None, "--collection-name", help=f"The collection on --url / --location (default: {DEFAULT_COLLECTION})."
    )


def open_store(
    store: Path | None, url: str | None, location: str | None, collection_name: str | None, **options: Any
) -> Any:
    """The store that exactly one of ``--store``, ``--url``, ``--location`` names.

    :raises InvalidInputError: when none or several are given, or ``--collection-name`` with ``--store``.
    """
    from lmk_rag.store import LandmarkStore

    given = [name for name, value in (("--store", store), ("--url", url), ("--location", location)) if value]
    if len(given) != 1:
        raise InvalidInputError(f"give exactly one of --store, --url, --location (got {', '.join(given) or 'none'})")
    if store is not None:
        if collection_name is not None:
            raise InvalidInputError("--collection-name names a collection on --url or --location; --store holds one")
        return LandmarkStore(store, **options)
    if url is not None:
        return LandmarkStore(url=url, api_key=os.environ.get("QDRANT_API_KEY"), collection_name=collection_name,
                             **options)
    return LandmarkStore(location=location, collection_name=collection_name, **options)


def parse_filters(values: list[str]) -> dict[str, Any] | None:
    """``key=value`` options as a filter dict (values read by :func:`filter_value`; repeated keys mean any of)."""
    if not values:
        return None
    out: dict[str, Any] = {}
    for item in values:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise typer.BadParameter(f"--filter {item!r}: expected key=value")
        value = filter_value(raw)
        if key in out:
            previous = out[key] if isinstance(out[key], list) else [out[key]]
            value = [*previous, value]
        out[key] = value
    return out


def filter_value(raw: str) -> Any:
    """A ``--filter`` value as a user means it: ``true``/``false`` are booleans, ``null`` is None, a decimal
    integer (``7``, ``-5``, ``007``) is an integer, a decimal number (``.5``, ``5.``, ``1e5``) a float; anything
    else (``--5``, ``nan``, ``0x10``, words) is the string itself. Numbers match stored integers and floats alike
    (``2`` finds a stored ``2.0``). A value in double quotes is the string between them, as written
    (``code="007"`` finds the string ``'007'``, ``flag="true"`` the string ``'true'``)."""
    if len(raw) >= 2 and raw[0] == raw[-1] == '"':
        return raw[1:-1]
    if raw in ("true", "false"):
        return raw == "true"
    if raw == "null":
        return None
    if INTEGER.fullmatch(raw):
        return int(raw)
    if DECIMAL.fullmatch(raw):
        return float(raw)
    return raw


def _read(
    files: list[SourceFile], encoding: str | None
) -> tuple[list[tuple[str, str, dict[str, Any]]], list[str]]:
    """The documents of the files that decode to text, and one line per skipped file with the reason."""
    documents, skipped = [], []
    for source in files:
        try:
            decoded = read_text(source.path, encoding)
        except OSError as error:
            skipped.append(f"{source.path}: cannot be read ({error.strerror or error})")
            continue
        if decoded.text is None:
            skipped.append(f"{source.path}: {decoded.skipped}")
        elif not decoded.text.strip():
            skipped.append(f"{source.path}: empty")
        else:
            documents.append((source.doc_id, decoded.text, {"path": str(source.path.absolute())}))
            if decoded.encoding != "utf-8":
                typer.echo(f"note: {source.path} decoded as {decoded.encoding}", err=True)
    return documents, skipped


def _gone(target: Any, roots: list[Path]) -> list[str]:
    """Stored documents that an ingest read from a file under one of ``roots`` (their recorded source, never their
    metadata, which API writers fill as they like) and whose file no longer exists (a removed or dangling link
    counts as gone)."""
    folders = [root.absolute() for root in roots]
    return sorted(doc_id for doc_id, source in target.sources().items()
                  if any(Path(source).is_relative_to(f) for f in folders) and not Path(source).exists())


@app.command(rich_help_panel=EVERYDAY)
def ingest(
    paths: list[Path] = typer.Argument(..., help="Files or folders (folders: files matching --glob, recursively)."),
    store: Path = store_option(),
    url: str = url_option(),
    location: str = location_option(),
    collection_name: str | None = collection_option(),
    glob: list[str] = typer.Option(
        None, "--glob", help="File name pattern in folders (repeatable; default *.txt, *.md)."
    ),
    folder_prefix: bool = typer.Option(False, "--folder-prefix", help="Doc ids start with the folder's name."),
    encoding: str = typer.Option(None, "--encoding", help="Encoding of files that are not UTF-8 (default: skip them)."),
    sync: bool = typer.Option(False, "--sync", help="Also delete documents whose file under these folders is gone."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print what would happen; change nothing."),
    document_batch_size: int = typer.Option(
        8, "--document-batch-size", min=1, help="Documents encoded and written per batch."
    ),
    bm25: bool = typer.Option(None, "--bm25/--no-bm25", help="BM25 vectors, fused into the ranking (new stores only)."),
    static: bool = typer.Option(
        False, "--static", help="A new store without a transformer: static node vectors and token multivectors, "
        "BM25 (fast CPU ingest; docs/static.md). An existing store keeps its own mode."
    ),
    backend: str = backend_option(),
    dtype: str = dtype_option(),
    quantization: str = typer.Option(
        None, help="int8 | binary | turbo4: a compressed copy of the chunk vectors in RAM (new stores only)."
    ),
    node_quantization: str = typer.Option(
        None, help="int8 | binary | turbo4: a compressed copy of the node vectors in RAM (new stores only)."
    ),
    on_disk: bool = typer.Option(
        None, "--on-disk/--in-memory",
        help="Keep the original vectors and the payloads on disk, memory-mapped (new stores only).",
    ),
    hnsw_on_disk: bool = typer.Option(
        None, "--hnsw-on-disk/--hnsw-in-memory", help="Keep the HNSW graph on disk, memory-mapped (new stores only)."
    ),
) -> None:
    """Sync files into a store: new and changed files are encoded and written, unchanged ones skipped.

    A new store records the encoder's settings, ``--backend`` and ``--dtype`` included; an existing store encodes
    with its recorded settings, and other ``--backend`` / ``--dtype`` values than it records are an error.
    ``--static`` makes a static store (the shipped static model and mixer: no transformer runs). The storage
    options (``--quantization``, ``--node-quantization``, ``--on-disk``, ``--hnsw-on-disk``) are recorded by a new
    store; given for an existing one, they must be the recorded values (docs/store.md, "Scale").
    """
    start = time.perf_counter()
    globs = tuple(glob or DEFAULT_GLOBS)
    files, skipped_links, unmatched = collect_files(paths, globs, folder_prefix)
    documents, skipped = _read(files, encoding)
    skipped = skipped_links + skipped
    folders = [p for p in paths if p.is_dir()]
    if dry_run:
        changes, gone = _plan(documents, folders, store, url, location, collection_name)
        nodes = 0
    else:
        encoder = None
        if static and (backend is not None or dtype is not None):
            raise InvalidInputError("--backend and --dtype say how the transformer runs; a --static store has none")
        if backend is not None or dtype is not None:
            from lmk_rag.encoder import LandmarkEncoder

            encoder = LandmarkEncoder(**runtime_settings(backend, dtype))
        mode = "static" if static else None
        storage = StorageOptions(quantization=quantization, node_quantization=node_quantization, on_disk=on_disk,
                                 hnsw_on_disk=hnsw_on_disk)
        with open_store(store, url, location, collection_name, bm25=bm25, encoder=encoder, mode=mode,
                        storage=storage) as target:
            changes = target.changes(documents)
            gone = _gone(target, folders)
            nodes = target.upsert_documents(documents, document_batch_size=document_batch_size, show_progress_bar=True,
                                         sources={doc_id: metadata["path"] for doc_id, _, metadata in documents})
            for doc_id in gone if sync else []:
                target.delete_document(doc_id)
            if (sync and gone) or any(change != "unchanged" for change in changes.values()):
                target.optimize()
    for line in skipped:
        typer.echo(f"skipped {line}", err=True)
    if unmatched:
        typer.echo(f"skipped {len(unmatched)} file(s) matching no --glob ({', '.join(globs)}): "
                   f"{_some(str(path) for path in unmatched)}", err=True)
    deleted = gone if sync else []
    if gone and not sync:
        typer.echo(f"note: {len(gone)} stored document(s) from these folders have no file any more "
                   f"({_some(gone)}); they stay in the store: ingest with --sync to delete them", err=True)
    counts = {kind: sum(1 for c in changes.values() if c == kind) for kind in ("new", "changed", "unchanged")}
    if dry_run:
        typer.echo("".join(f"{change}: {doc_id}\n" for doc_id, change in changes.items() if change != "unchanged")
                   + "".join(f"delete: {doc_id}\n" for doc_id in deleted), nl=False)
    written = "nothing written (dry run)" if dry_run else f"{nodes} nodes written"
    typer.echo(
        f"{counts['new']} new, {counts['changed']} changed, {counts['unchanged']} unchanged, {len(deleted)} deleted, "
        f"{len(skipped) + len(unmatched)} skipped; {written} in {time.perf_counter() - start:.1f} s"
    )


#: How many names a line about many files or documents shows before "and N more".
SHOWN_NAMES = 3


def _some(names: Iterable[str]) -> str:
    """The first :data:`SHOWN_NAMES` of some names, and how many more there are."""
    names = list(names)
    more = len(names) - SHOWN_NAMES
    return ", ".join(names[:SHOWN_NAMES]) + (f" and {more} more" if more > 0 else "")


def _plan(
    documents: list[tuple[str, str, dict[str, Any]]], folders: list[Path], store: Path | None, url: str | None,
    location: str | None, collection_name: str | None,
) -> tuple[dict[str, str], list[str]]:
    """What an ingest would do, without creating or changing the store (every document is new when there is none):
    each document's change, and the stored documents from ``folders`` whose file is gone (see :func:`_gone`)."""
    try:
        with open_store(store, url, location, collection_name, read_only=True) as target:
            return target.changes(documents), _gone(target, folders)
    except StoreNotFoundError:
        return {doc_id: "new" for doc_id, _, _ in documents}, []


@app.command(rich_help_panel=EVERYDAY)
def query(
    text: str = typer.Argument(..., help="The query."),
    store: Path = store_option(),
    url: str = url_option(),
    location: str = location_option(),
    collection_name: str | None = collection_option(),
    k: int = typer.Option(10, "-k", min=1, help="Hits to return."),
    rerank: str = typer.Option(
        None, help="chunks | static | node (default: the store's, chunks or static in a --static store)."
    ),
    alpha: float = typer.Option(
        None, min=0.0, max=1.0, help="Weight of the rerank score against BM25 (1 = rerank only, 0 = BM25 only; "
        "default: the store's)."
    ),
    filter: list[str] = typer.Option(
        None, "--filter", help="key=value on metadata (repeat; same key = any of); numbers, true, false and null are "
        "read as such, a value in double quotes as a string: --filter 'code=\"007\"'."
    ),
    nodes: bool = typer.Option(False, "--nodes", help="Node-level hits (several per document)."),
    as_json: bool = typer.Option(False, "--json", help='Print {"query": ..., "hits": [...]} as JSON.'),
) -> None:
    """Search a store: dense and BM25 prefetch, MaxSim rerank fused with BM25; the best node per document."""
    with open_store(store, url, location, collection_name, read_only=True) as source:
        hits = source.search(
            text, k=k, rerank=rerank, filter=parse_filters(filter or []), one_per_document=not nodes,
            alpha=alpha
        )
        _print_hits(text, hits, as_json)  # before the store closes: closing an Edge shard flushes it (0.1-0.3 s)
        if not hits:
            typer.echo(_no_hits(filter or [], source.count_documents()), err=True)


#: The keys LlamaIndex's vector stores add to a node's metadata (its JSON, its type, its document's id thrice):
#: hidden from ``query``'s hits when LlamaIndex wrote the node (``_node_content`` is there).
LLAMAINDEX_KEYS = ("_node_content", "_node_type", "document_id", "doc_id", "ref_doc_id")


def _shown_metadata(metadata: dict[str, Any]) -> dict[str, Any]:
    """A hit's metadata as the user gave it: without LlamaIndex's own keys on nodes LlamaIndex wrote."""
    if "_node_content" not in metadata:
        return metadata
    return {key: value for key, value in metadata.items() if key not in LLAMAINDEX_KEYS}


def _no_hits(filters: list[str], documents: int) -> str:
    """The stderr line of a query without hits: why, and what to try."""
    if documents == 0:
        return "no hits: the store holds no documents; add some with lmk-rag ingest"
    given = " ".join(f"--filter {spec}" for spec in filters)
    return (f"no hits: no stored node matches {given} (documents from lmk-rag ingest carry only the metadata key "
            "'path'; query without --filter --json to see a hit's metadata)")


def _print_hits(text: str, hits: list[Hit], as_json: bool) -> None:
    """Print a query's hits: two lines each (rank, score, doc id, span, snippet; then the passage that matched,
    :func:`_passage_line`), or ``--json``'s object (each piece of evidence with its text)."""
    if as_json:
        shown = [{**asdict(hit), "metadata": _shown_metadata(hit.metadata),
                  "evidence": [{**evidence.as_dict(), "text": hit.passage(evidence)} for evidence in hit.evidence]}
                 for hit in hits]
        typer.echo(json.dumps({"query": text, "hits": shown}, indent=2, ensure_ascii=False))
        return
    for rank, hit in enumerate(hits, 1):
        snippet = " ".join(hit.text.split())[:100]
        typer.echo(f"{rank:>2}. {hit.score:.4f}  {hit.doc_id} [{hit.span[0]}:{hit.span[1]}]  {snippet}")
        if hit.evidence:
            typer.echo(_passage_line(hit))  # typer.echo drops the styles where stdout is no terminal


#: Characters of a passage shown (whitespace runs as one space).
PASSAGE_CHARS = 240


def _passage_line(hit: Hit) -> str:
    """A hit's second line: its best evidence's kind, span and score, then its passage (whitespace runs as one
    space, cut at :data:`PASSAGE_CHARS`), styled to stand out (bold yellow; the styles are dropped when piped)."""
    evidence = hit.evidence[0]
    score = "-" if evidence.score is None else f"{evidence.score:.4f}"
    head = f"    {evidence.kind} [{evidence.start}:{evidence.end}] {score}  "
    return typer.style(head, dim=True) + typer.style(_squeezed(hit.passage(evidence), PASSAGE_CHARS), fg="yellow",
                                                     bold=True)


def _squeezed(text: str, most: int) -> str:
    """``text`` with each whitespace run as one space (kept at its ends), cut to ``most`` characters."""
    return re.sub(r"\s+", " ", text)[:most]


@app.command(rich_help_panel=EVERYDAY)
def info(
    store: Path = store_option(),
    url: str = url_option(),
    location: str = location_option(),
    collection_name: str | None = collection_option(),
    as_json: bool = typer.Option(True, "--json", help="Print JSON (the default; as query --json prints).",
                                 show_default=False),
) -> None:
    """Print a store's counts and recorded settings as JSON."""
    with open_store(store, url, location, collection_name, read_only=True) as source:
        typer.echo(json.dumps(source.info(), indent=2))


@app.command(rich_help_panel=EVERYDAY)
def check(
    store: Path = store_option(),
    url: str = url_option(),
    location: str = location_option(),
    collection_name: str | None = collection_option(),
) -> None:
    """Verify a whole store: its settings record, every point, vector and count; exit 1 when anything is damaged.

    The record is checked against the collection (vector sizes) and against the encoder it describes, which is
    built (the model loads) and must give the recorded fingerprint.
    """
    with open_store(store, url, location, collection_name, read_only=True) as source:
        problems = source.check()
        summary = f"{source.count_documents()} documents, {source.count()} nodes"
        if not problems:  # the encoder the record describes, built and checked: an edited record fails here
            with contextlib.redirect_stderr(io.StringIO()):  # the model's loading bar is no news for a check
                _ = source.encoder
    for problem in problems:
        typer.echo(f"problem: {problem}")
    if problems:
        raise CorruptStoreError(
            f"{len(problems)} kind(s) of damage in {summary}; re-ingest the documents named above, or rebuild the "
            "store by ingesting into a new folder"
        )
    typer.echo(f"ok: {summary}; every point and vector checked")
