"""``lmk-rag eval``: score a retrieval pipeline on a BEIR folder."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from lmk_rag.cli.root import app
from lmk_rag.cli.runtime import backend_option, dtype_option, parse_granularity, runtime_settings
from lmk_rag.eval.pipelines import pipeline_names
from lmk_rag.paths import user_cache_dir


def _default_cache_dir() -> Path:
    return user_cache_dir("eval")


def _parse_setting(item: str) -> tuple[str, Any]:
    """``"key=value"`` -> ``("key", value)``, with ``value`` read as JSON when it parses, else kept as text."""
    key, sep, value = item.partition("=")
    if not sep or not key:
        raise typer.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint="--encoder")
    try:
        return key, json.loads(value)
    except json.JSONDecodeError:
        return key, value


def _list_pipelines(value: bool) -> None:
    """``--list-pipelines``: print the pipeline names, one a line, and stop."""
    if value:
        typer.echo("\n".join(pipeline_names()))
        raise typer.Exit()


#: The help's list of pipelines, below the options: whole names, wrapped at the terminal's width (in the option's
#: help column, 80 columns cut the longer names).
PIPELINES_EPILOG = f"Pipelines (--pipeline): {', '.join(pipeline_names())}."


@app.command("eval", epilog=PIPELINES_EPILOG)
def eval_command(
    dataset_dir: Path = typer.Argument(..., help="BEIR folder: corpus.jsonl[.gz], queries.jsonl, qrels/test.tsv."),
    pipeline: str = typer.Option(
        ..., "--pipeline", "-p", help="Pipeline: lmk-rag, bm25, ... (all listed below)."
    ),
    list_pipelines: bool = typer.Option(
        False, "--list-pipelines", is_eager=True, callback=_list_pipelines, help="Print the pipeline names and exit."
    ),
    model: str = typer.Option(None, help="Model folder or Hugging Face id (default: all-MiniLM-L6-v2)."),
    max_queries: int = typer.Option(None, min=1, help="Evaluate a seeded random sample of this many queries."),
    max_docs: int = typer.Option(
        None, min=1, help="Keep the sampled queries' relevant documents plus seeded random others, this many in all."
    ),
    seed: int = typer.Option(0, help="Seed of --max-queries and --max-docs sampling."),
    granularity: str = typer.Option(None, help="Encoder chunk size in tokens, 'sentence', 'variable' or 'none'."),
    context: str = typer.Option(None, help="Encoder context: 'document' or 'chunk'."),
    chunk_vector: str = typer.Option(None, help="Encoder chunk vector: 'landmark' or 'mean'."),
    window_overlap: int = typer.Option(None, min=0, help="Encoder window overlap in tokens (document context)."),
    backend: str = backend_option(),
    dtype: str = dtype_option(),
    extra: list[str] = typer.Option(
        None, "--encoder", help="Other pipeline setting KEY=VALUE (repeatable; VALUE is read as JSON when it parses)."
    ),
    batch_size: int = typer.Option(32, min=1, help="Encoding batch size."),
    cache_dir: Path = typer.Option(None, help="Encoding cache folder (default: the user cache dir, lmk-rag/eval)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of a table."),
    run_file: Path = typer.Option(None, help="Also write the rankings as a TREC run file here."),
    progress: bool = typer.Option(False, help="Show encoding progress bars."),
) -> None:
    """Evaluate one pipeline on one BEIR folder: nDCG@10, recall@1/10/100, MRR@10, timings."""
    from lmk_rag.errors import LmkRagError
    from lmk_rag.eval.beir import load_beir
    from lmk_rag.eval.pipelines import PipelineOptions
    from lmk_rag.eval.run import evaluate
    from lmk_rag.eval.sample import subsample

    encoder: dict[str, Any] = dict(_parse_setting(item) for item in extra or [])
    if granularity is not None:
        encoder["granularity"] = parse_granularity(granularity)
    for name, value in (("context", context), ("chunk_vector", chunk_vector), ("window_overlap", window_overlap)):
        if value is not None:
            encoder[name] = value
    encoder.update(runtime_settings(backend, dtype))
    options = PipelineOptions(
        model=model,
        cache_dir=cache_dir or _default_cache_dir(),
        encoder=encoder,
        batch_size=batch_size,
        show_progress=progress,
    )
    try:
        dataset = subsample(load_beir(dataset_dir), max_queries, max_docs, seed)
        report = evaluate(dataset, pipeline, options, run_file=run_file)
    except LmkRagError as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(code=1) from error
    report.update({"max_queries": max_queries, "max_docs": max_docs, "seed": seed})
    typer.echo(json.dumps(report) if as_json else _table(report))


def _table(report: dict[str, Any]) -> str:
    """A short human-readable summary of a report."""
    from lmk_rag.eval.metrics import METRIC_KEYS

    lines = [
        f"{report['dataset']}  pipeline={report['pipeline']}  model={report['model']}  "
        f"queries={report['queries']}  docs={report['docs']}",
        "  ".join(f"{key}={report[key]:.4f}" for key in METRIC_KEYS),
        f"encode_s={report['encode_s']:.1f} (cached={report['cached']})  query_ms={report['query_ms']:.1f}",
    ]
    for key in ("by_position", "by_length"):
        for value, metrics in report.get(key, {}).items():
            lines.append(f"  {key[3:]}={value}: ndcg@10={metrics['ndcg@10']:.4f} recall@1={metrics['recall@1']:.4f}")
    return "\n".join(lines)
