"""The quality report: the pipelines a reader compares, on every dev set whole, with 95% bootstrap intervals.

Runs each pipeline through the eval harness (:func:`lmk_rag.eval.run.evaluate`, the code behind
``lmk-rag eval``) with the harness's on-disk encoding cache, so a rerun only encodes the queries. Writes
``quality.md`` (nDCG@10 and recall@1 per pipeline and set with 95% bootstrap intervals over queries, and the
paired difference of ``lmk-rag`` to its baselines), ``quality.json`` (every run's report with its per-query
metrics) and ``needle_recall1_by_position.png`` / ``needle_ndcg10_by_position.png`` (one line per pipeline
with its interval, one panel per needle length)::

    python benchmarks/report.py                      # the dev sets of both domains, whole
    python benchmarks/report.py --long               # adds manpages-needle/L32768 (200 haystacks of ~32k tokens)
    python benchmarks/report.py --size manpages-short=50,150 --pipelines bm25,lmk-rag   # a quick subsample
    python benchmarks/report.py --long --resume      # keep the runs quality.json holds, run only the missing ones
    python benchmarks/report.py --render             # rewrite quality.md and the plots from quality.json, run nothing

The manual-page sets are read from ``--data`` (``../shared/data``), the perldoc sets from ``benchmarks/data``
(built by ``benchmarks/build_perldoc.py``). The report is rewritten after every run, so an interrupted report
keeps what it measured and ``--resume`` goes on from there.

Other pipelines (``lmk-rag-dense``, ``maxsim-*``, static ones, ...) are for ``lmk-rag eval``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from intervals import bootstrap_interval, paired_difference
from stock_pipelines import LlamaIndexFusedPipeline, fuse_scores, top_documents

from lmk_rag.eval import (
    DEFAULT_MODEL,
    RANK_DEPTH,
    BeirDataset,
    PipelineOptions,
    evaluate,
    load_beir,
    mean_metrics,
    per_query_metrics,
    subsample,
)
from lmk_rag.research import user_cache_dir

DATA = Path("/work/shared/data") if Path("/work/shared/data").is_dir() else Path("../shared/data")
#: The sets this repository builds and ships (the perldoc domain).
SHIPPED_DATA = Path(__file__).parent / "data"
RESULTS = Path(__file__).parent / "results"
CACHE = user_cache_dir("eval")
SEED = 0
#: The report's sets, whole: ``folder -> (max_queries, max_docs)``, None keeping everything.
SETS: dict[str, tuple[int | None, int | None]] = {
    "manpages-needle/L2048": (None, None),
    "manpages-needle/L8192": (None, None),
    "manpages-longdoc": (None, None),
    "manpages-short": (None, None),
    "perldoc-longdoc": (None, None),
    "perldoc-ref": (None, None),
    "perlfaq-answers": (None, None),
    "perlfaq-longdoc": (None, None),
    "unixfaq-answers": (None, None),  # held out, both: reported, never tuned on (data/unixfaq-*/README.md)
    "unixfaq-longdoc": (None, None),
    "tcl-ref": (None, None),  # held out too (data/tcl-*/README.md)
    "tcl-needle-L2048": (None, None),
}
LONG_SET = ("manpages-needle/L32768", (None, None))
#: The pipelines a well-informed LlamaIndex user builds from stock parts with the same model
#: (`stock_pipelines.py`), with plain BM25 the bar the product must clear.
STOCK = ["bm25", "llamaindex-chunked", "llamaindex-chunked-bm25", "llamaindex-hybrid-relative",
         "llamaindex-hybrid-rrf", "llamaindex-fused"]
#: The row of ``llamaindex-fused`` with its dense weight chosen on each set itself, the best of
#: :data:`TUNED_WEIGHTS` by the set's nDCG@10: an upper bound of the stock pipelines no user gets.
TUNED = "llamaindex-fused-tuned"
TUNED_WEIGHTS = tuple(round(0.3 + 0.05 * step, 2) for step in range(11))
#: What a reader compares: the stock pipelines, the tuned stock fusion, LlamaIndex's default, the best
#: single-vector pipeline (mean pooling, see studies/results/baselines.md), the product before fusion and the product.
PIPELINES = [*STOCK, TUNED, "llamaindex-default", "mean", "lmk-rag-alpha1", "lmk-rag"]
#: The product before the shipped projection (docs/decisions.md, "quality: a linear projection"): its runs of
#: 2026-11-30 and 2026-12-01, kept in quality.json under this label; the report pairs today's product with it.
EARLIER_PRODUCT = "lmk-rag, no projection"
PRODUCT, BASELINES = "lmk-rag", (TUNED, *STOCK, "lmk-rag-alpha1", EARLIER_PRODUCT)
#: The row pairing the product with the best stock pipeline of each set (by that set's nDCG@10).
BEST_STOCK = "best stock"
#: Pipelines rerun with ``--finetuned DIR`` (those that encode with the landmark encoder).
FINETUNED_PIPELINES = ["mean", "lmk-rag"]
#: Plot layout: inches per panel, inches for the legend column, resolution.
PANEL_INCHES, LEGEND_INCHES, DPI = 4.5, 1.8, 80
MARKERS, LINESTYLES = "osD^vP*Xh<>", ["-", "--", "-.", ":"]
PLOT_METRICS = {"recall@1": "needle_recall1_by_position.png", "ndcg@10": "needle_ndcg10_by_position.png"}
INTERVAL_METRICS = ("ndcg@10", "recall@1")


@dataclass(frozen=True)
class Cell:
    """One run of the report.

    :param folder: the dev set folder relative to the data folder.
    :param max_queries: the query sample size (None: every query).
    :param max_docs: the document sample size (None: every document).
    :param pipeline: the registered pipeline name.
    :param model: a model folder, or None for the default model.
    :param label: the row name in the table.
    """

    folder: str
    max_queries: int | None
    max_docs: int | None
    pipeline: str
    model: str | None = None
    label: str = ""


def evaluate_cell(cell: Cell, data: Path = DATA, cache_dir: Path = CACHE,
                  encoder: dict[str, Any] | None = None) -> dict[str, Any]:
    """Evaluate one pipeline on one (possibly subsampled) set, as ``lmk-rag eval --json`` would.

    :param cell: what to run.
    :param data: the folder holding the dev sets.
    :param cache_dir: the encoding cache.
    :param encoder: encoder overrides (``--encoder KEY=VALUE``).
    :return: the eval report with ``per_query`` metrics, plus ``positions`` (each query's needle position, when
        the set has them), ``max_queries``, ``max_docs``, ``seed``, ``wall_s`` and ``label``.
    """
    dataset = subsample(load_beir(set_folder(cell.folder, data)), cell.max_queries, cell.max_docs, seed=SEED)
    start = time.perf_counter()
    options = PipelineOptions(model=cell.model, cache_dir=cache_dir, encoder=dict(encoder or {}))
    if cell.pipeline == TUNED:
        report = evaluate_tuned(dataset, options)
    else:
        report = evaluate(dataset, cell.pipeline, options, keep_per_query=True)
    positions = {qid: meta["position"] for qid, meta in zip(dataset.query_ids, dataset.query_metadata)
                 if "position" in meta}
    report.update({"max_queries": cell.max_queries, "max_docs": cell.max_docs, "seed": SEED,
                   "wall_s": round(time.perf_counter() - start, 1), "label": cell.label or cell.pipeline})
    if positions:
        report["positions"] = positions
    return report


def evaluate_tuned(dataset: BeirDataset, options: PipelineOptions) -> dict[str, Any]:
    """``llamaindex-fused`` at each of :data:`TUNED_WEIGHTS`, the weight with the best nDCG@10 on ``dataset``
    kept: both sides search once, the weights only fuse again. Queries and documents without text are left out as
    :func:`lmk_rag.eval.run.evaluate` leaves them out.

    :param dataset: the (possibly subsampled) set.
    :param options: the pipeline options (the weight is this function's).
    :return: the eval report of the best weight, with ``weight`` and ``weights`` (nDCG@10 at each weight).
    """
    pipeline = LlamaIndexFusedPipeline(options)
    docs = [index for index, text in enumerate(dataset.doc_texts) if text.strip()]
    queries = [index for index, text in enumerate(dataset.query_texts) if text.strip()]
    stats = pipeline.index([dataset.doc_texts[index] for index in docs])
    sides = {dataset.query_ids[index]: pipeline.sides(dataset.query_texts[index]) for index in queries}
    scored: dict[float, dict[str, dict[str, float]]] = {}
    for weight in TUNED_WEIGHTS:
        run: dict[str, list[str]] = {query_id: [] for query_id in dataset.query_ids}
        for query_id, (dense, lexical) in sides.items():
            ranking = top_documents(fuse_scores(dense, lexical, weight), RANK_DEPTH)
            run[query_id] = [dataset.doc_ids[docs[doc]] for doc, _ in ranking]
        scored[weight] = per_query_metrics(dataset.qrels, run)
    ndcg = {weight: mean_metrics(list(rows.values()))["ndcg@10"] for weight, rows in scored.items()}
    best = max(TUNED_WEIGHTS, key=lambda weight: (ndcg[weight], -abs(weight - 0.5)))
    per_query = {query_id: scored[best][query_id] for query_id in dataset.query_ids}
    return {"dataset": dataset.name, "pipeline": TUNED, "model": options.model or DEFAULT_MODEL,
            "queries": len(dataset.query_ids), "docs": len(dataset.doc_ids), **mean_metrics(list(per_query.values())),
            "encode_s": round(stats.encode_s, 3), "cached": stats.cached, "encoder": pipeline.settings,
            "weight": best, "weights": {str(weight): round(value, 4) for weight, value in ndcg.items()},
            "per_query": per_query}


def set_folder(folder: str, data: Path = DATA) -> Path:
    """Where a dev set lives: under ``data`` (the manual-page sets) or under :data:`SHIPPED_DATA` (perldoc).

    :param folder: the set's folder name (``manpages-short``, ``perldoc-ref``, ...).
    :param data: the folder holding the shared dev sets.
    :return: the set's folder.
    """
    shipped = SHIPPED_DATA / folder
    return shipped if shipped.is_dir() and not (data / folder).is_dir() else data / folder


def same_cell(cell: Cell, report: dict[str, Any]) -> bool:
    """Whether an earlier run measured this cell: same set, row label, model and sample sizes."""
    return (report["dataset"], report["label"], report["max_queries"], report["max_docs"]) == (
        cell.folder, cell.label or cell.pipeline, cell.max_queries, cell.max_docs) and (
        cell.model is None or report["model"] == cell.model)


def plan(sets: dict[str, tuple[int | None, int | None]], pipelines: Sequence[str],
         finetuned: Path | None = None) -> list[Cell]:
    """Every (set, pipeline) cell of the report, set by set (the slow long sets last when listed last),
    fine-tuned rows after the base rows.

    :param sets: folder -> (max_queries, max_docs).
    :param pipelines: the base-model pipelines.
    :param finetuned: a fine-tuned model folder, or None.
    :return: the cells in table order.
    """
    rows = [(name, None, name) for name in pipelines]
    if finetuned is not None:
        rows += [(name, str(finetuned), f"{name} (fine-tuned)") for name in FINETUNED_PIPELINES]
    return [Cell(folder, *sizes, pipeline, model, label) for folder, sizes in sets.items()
            for pipeline, model, label in rows]


def machine() -> str:
    """A one-line description of the machine the report ran on."""
    import torch

    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    return (f"{platform.machine()} {platform.system()}, {os.cpu_count()} CPU cores, {device}, "
            f"torch {torch.__version__}, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}")


def values(report: dict[str, Any], metric: str, position: str | None = None) -> list[float]:
    """A run's per-query values of one metric (only the queries at one needle position when given)."""
    positions = report.get("positions", {})
    return [row[metric] for qid, row in report["per_query"].items()
            if position is None or str(float(positions.get(qid, -1))) == position]


def table(reports: Sequence[dict[str, Any]], metric: str = "ndcg@10") -> str:
    """The markdown table: one row per label, one column per dataset (mean and 95% bootstrap interval), plus the
    mean over sets.

    :param reports: eval reports carrying a ``label`` and ``per_query``.
    :param metric: the metric shown in the cells.
    :return: markdown text.
    """
    sets = list(dict.fromkeys(report["dataset"] for report in reports))
    labels = list(dict.fromkeys(report["label"] for report in reports))
    cells = {(report["label"], report["dataset"]): report for report in reports}
    lines = ["| pipeline | " + " | ".join(sets) + " | mean |", "|---|" + "---|" * (len(sets) + 1)]
    for label in labels:
        shown, means = [], []
        for name in sets:
            report = cells.get((label, name))
            if report is None:
                shown.append("-")
                continue
            low, high = bootstrap_interval(values(report, metric))
            shown.append(f"{report[metric]:.3f} [{low:.3f}, {high:.3f}]")
            means.append(report[metric])
        mean = f"{sum(means) / len(means):.3f}" if len(means) == len(sets) else "-"
        lines.append(f"| {label} | " + " | ".join(shown) + f" | {mean} |")
    return "\n".join(lines)


def differences(reports: Sequence[dict[str, Any]], metric: str = "ndcg@10") -> str:
    """The markdown table of ``lmk-rag`` minus each baseline per set: mean difference and 95% paired-bootstrap
    interval (empty when the product or no baseline ran)."""
    runs = {(report["label"], report["dataset"]): report for report in reports}
    sets = list(dict.fromkeys(report["dataset"] for report in reports))
    best = {name: max((runs[label, name] for label in STOCK if (label, name) in runs), default=None,
                      key=lambda report: report[metric]) for name in sets}
    rows = []
    for baseline in (BEST_STOCK, *BASELINES):
        cells = []
        for name in sets:
            product = runs.get((PRODUCT, name))
            other = best[name] if baseline == BEST_STOCK else runs.get((baseline, name))
            if product is None or other is None:
                cells.append("-")
                continue
            qids = list(product["per_query"])
            diff, low, high = paired_difference([product["per_query"][q][metric] for q in qids],
                                                [other["per_query"][q][metric] for q in qids])
            named = (f" ({other['label']})" if baseline == BEST_STOCK
                     else f" (weight {other['weight']})" if baseline == TUNED else "")
            cells.append(f"{diff:+.3f} [{low:+.3f}, {high:+.3f}]{named}")
        if any(cell != "-" for cell in cells):
            rows.append(f"| {PRODUCT} - {baseline} | " + " | ".join(cells) + " |")
    if not rows:
        return ""
    return "\n".join(["| difference | " + " | ".join(sets) + " |", "|---|" + "---|" * len(sets), *rows])


def plot_positions(reports: Sequence[dict[str, Any]], metric: str, path: Path) -> bool:
    """Plot a metric against the needle position, one panel per needle set, one line per pipeline.

    :param reports: eval reports; those without ``by_position`` are skipped.
    :param metric: the metric to plot (``recall@1``, ``ndcg@10``, ...).
    :param path: the PNG file to write.
    :return: whether a plot was written (False when no report has ``by_position``).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    needle = [report for report in reports if "by_position" in report]
    sets = list(dict.fromkeys(report["dataset"] for report in needle))
    if not sets:
        return False
    labels = list(dict.fromkeys(report["label"] for report in needle))
    colors = plt.get_cmap("tab10")
    figure, axes = plt.subplots(1, len(sets), figsize=(PANEL_INCHES * len(sets) + LEGEND_INCHES, PANEL_INCHES - 1),
                                sharey=True, squeeze=False, layout="constrained")
    for axis, name in zip(axes[0], sets):
        for report in (report for report in needle if report["dataset"] == name):
            positions = sorted(report["by_position"], key=float)
            index = labels.index(report["label"])
            x = np.array([float(p) for p in positions]) + 0.006 * (index - len(labels) / 2)  # intervals side by side
            y = [report["by_position"][p][metric] for p in positions]
            axis.plot(x, y, marker=MARKERS[index % len(MARKERS)], linestyle=LINESTYLES[index % len(LINESTYLES)],
                      color=colors(index % 10), label=report["label"], alpha=0.9)
            if "per_query" in report:
                bounds = np.array([bootstrap_interval(values(report, metric, p)) for p in positions]).T
                axis.vlines(x, bounds[0], bounds[1], color=colors(index % 10), alpha=0.5, linewidth=2)
        first = next(report for report in needle if report["dataset"] == name)
        axis.set_title(f"{name.split('/')[-1]}: {first['queries']} queries, {first['docs']} docs")
        axis.set_xlabel("needle position in the document")
        axis.set_ylim(-0.03, 1.03)
        axis.grid(alpha=0.3)
    axes[0][0].set_ylabel(metric)
    handles, names = axes[0][0].get_legend_handles_labels()
    figure.legend(handles, names, loc="outside right center", fontsize=8)
    figure.savefig(path, dpi=DPI)
    plt.close(figure)
    return True


def write_report(reports: Sequence[dict[str, Any]], out: Path, command: str) -> list[Path]:
    """Write ``quality.md``, ``quality.json`` and the position plots.

    :param reports: eval reports carrying a ``label``; a run kept from an earlier report carries ``date``.
    :param out: the output folder.
    :param command: the command line that produced the reports (quoted in the markdown).
    :return: the files written.
    """
    out.mkdir(parents=True, exist_ok=True)
    written = [out / "quality.json"]
    written[0].write_text(json.dumps(list(reports)) + "\n")
    plots = [name for metric, name in PLOT_METRICS.items() if plot_positions(reports, metric, out / name)]
    written += [out / name for name in plots]
    sizes = dict.fromkeys(f"{r['dataset']} {r['queries']} queries / {r['docs']} docs" for r in reports)
    whole = all(r["max_queries"] is None and r["max_docs"] is None for r in reports)
    models = sorted({report["model"] for report in reports if report["pipeline"] != "bm25"})
    today = datetime.date.today().isoformat()
    lines = [
        "# Retrieval quality", "",
        f"- Date: {datetime.date.today().isoformat()}. Machine: {machine()}.",
        *kept_lines(reports, today),
        f"- Models: {', '.join(models)}; encoder and store defaults. The lmk-rag pipelines search at the product's "
        "depth (the prefetch of a k=10 query: 100 candidates per branch).",
        ("- **Whole sets**: " if whole else f"- **Subsampled**, seed {SEED}: ") + "; ".join(sizes) + ".",
        "- Cells: mean over queries [95% percentile-bootstrap interval over queries, 2,000 resamples].",
        f"- Regenerate: `{command}` (encodings are cached on disk; a warm rerun only encodes queries).",
        "", "## nDCG@10", "", table(reports), "", "## Recall@1", "", table(reports, "recall@1"), "",
    ]
    paired = differences(reports)
    if paired:
        lines += ["## lmk-rag against its baselines (nDCG@10, paired over the same queries)", "",
                  f"`{BEST_STOCK}`: the stock pipeline ({', '.join(STOCK)}) with the best nDCG@10 on that set. "
                  f"`{TUNED}`: llamaindex-fused with its dense weight tuned on the set itself (best of "
                  f"{TUNED_WEIGHTS[0]}..{TUNED_WEIGHTS[-1]} by nDCG@10): an upper bound no user gets.",
                  "", paired, ""]
    lines += [f"![{metric} by needle position]({name})" for metric, name in PLOT_METRICS.items() if name in plots]
    (out / "quality.md").write_text("\n".join(lines) + "\n")
    return [out / "quality.md", *written]


def in_report_order(reports: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Runs sorted as the report lays them out: sets as in :data:`SETS` (the long set last), rows as in
    :data:`PIPELINES` (fine-tuned and other rows after)."""
    sets = [*SETS, LONG_SET[0]]
    return sorted(reports, key=lambda r: (sets.index(r["dataset"]) if r["dataset"] in sets else len(sets),
                                          PIPELINES.index(r["label"]) if r["label"] in PIPELINES else len(PIPELINES)))


def kept_lines(reports: Sequence[dict[str, Any]], today: str) -> list[str]:
    """The report's line on runs kept from earlier days (``--resume``): per day, which pipelines on which sets."""
    days: dict[str, tuple[dict[str, None], dict[str, None]]] = {}
    for report in reports:
        if report.get("date", today) != today:
            labels, sets = days.setdefault(report["date"], ({}, {}))
            labels[report["label"]] = sets[report["dataset"]] = None
    if not days:
        return []
    return ["- Kept from earlier reports (`--resume`): " + "; ".join(
        f"{day}: {', '.join(labels)} on {', '.join(sets)}" for day, (labels, sets) in sorted(days.items())) + "."]


def parse_size(text: str) -> tuple[str, tuple[int | None, int | None]]:
    """Parse ``FOLDER=QUERIES,DOCS``."""
    folder, _, sizes = text.partition("=")
    queries, docs = (int(value) for value in sizes.split(","))
    return folder, (queries, docs)


def main(argv: Sequence[str] | None = None) -> list[Path]:
    """Run the report from the command line.

    :param argv: arguments (default ``sys.argv[1:]``).
    :return: the files written.
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--long", action="store_true", help="add manpages-needle/L32768")
    parser.add_argument("--finetuned", type=Path, help="also run the landmark pipelines with this model folder")
    parser.add_argument("--size", action="append", default=[], type=parse_size, metavar="FOLDER=QUERIES,DOCS",
                        help="override or add a set's sample size (repeatable)")
    parser.add_argument("--only", action="append", default=[], metavar="FOLDER", help="run only these sets")
    parser.add_argument("--pipelines", help="comma-separated pipelines (default: all of the report)")
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--cache-dir", type=Path, default=CACHE)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--render", action="store_true",
                        help="rewrite the report from the output's quality.json (sets and rows in report order)")
    parser.add_argument("--resume", action="store_true",
                        help="keep the runs the output's quality.json holds (those of other cells too); "
                             "run only the missing cells")
    args = parser.parse_args(argv)
    sets = dict(SETS)
    if args.long:
        sets[LONG_SET[0]] = LONG_SET[1]
    sets.update(dict(args.size))
    if args.only:
        sets = {name: sizes for name, sizes in sets.items() if name in args.only}
    pipelines = args.pipelines.split(",") if args.pipelines else PIPELINES
    earlier = json.loads((args.out / "quality.json").read_text()) if args.resume or args.render else []
    if args.render:
        return write_report(in_report_order(earlier), args.out, "python benchmarks/report.py --long --resume")
    command = "python benchmarks/report.py" + (" " + " ".join(argv) if argv else "")
    reports: list[dict[str, Any]] = []
    written: list[Path] = []
    for cell in plan(sets, pipelines, args.finetuned):
        report = next((run for run in earlier if same_cell(cell, run)), None)
        if report is None:
            # A fine-tuned model gets its own cache folder: its states must never be mixed with another model's.
            cache_dir = args.cache_dir / ("finetuned-" + Path(cell.model).name if cell.model else "")
            report = evaluate_cell(cell, args.data, cache_dir)
            report["date"] = datetime.date.today().isoformat()
            print(f"{cell.folder} {report['label']}: ndcg@10={report['ndcg@10']:.3f} cached={report['cached']} "
                  f"wall_s={report['wall_s']}", flush=True)
        reports.append(report)
        earlier = [run for run in earlier if not same_cell(cell, run)]  # what is not (yet) measured again stays
        written = write_report(reports + earlier, args.out, command)
    return written


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
