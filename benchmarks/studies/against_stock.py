"""Every studied candidate against the tuned stock row (issue 42: where a set misses the tuned stock fusion + 0.03,
the numbers of every candidate on it).

Reads the per-query values the studies wrote (``--out`` of each) and the report's ``quality.json``, and prints, for
each set asked, one Markdown table: every variant of every study given, its nDCG@10, its paired difference to the
study's reference ranking (``store``, the product's ranking, where the study has it, else its ``base``) and to
``llamaindex-fused-tuned`` (the stock fusion with its weight tuned on the set itself), each with its 95% paired
interval; a lead of +0.03 or more whose interval lies above 0 is bold::

    python benchmarks/studies/against_stock.py perlfaq-answers manpages-short \\
        --study granularity=granularity_study.json --study bm25=bm25_study.json > missed_sets.md
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from common import paired_difference

QUALITY = Path(__file__).resolve().parents[1] / "results" / "quality.json"
STOCK = "llamaindex-fused-tuned"
TARGET = 0.03


def per_query(quality: list[dict], dataset: str, label: str) -> dict[str, float]:
    """One report row's nDCG@10 by query id."""
    row = next((r for r in quality if r["dataset"] == dataset and r["label"] == label), None)
    if row is None:
        raise SystemExit(f"error: {QUALITY.name} has no {label!r} row for {dataset!r}; run benchmarks/report.py")
    return {qid: values["ndcg@10"] for qid, values in row["per_query"].items()}


def interval(values: list[float], reference: list[float]) -> tuple[str, float, float]:
    """``+d [lo, hi]`` of the paired difference, with ``d`` and ``lo``."""
    diff, low, high = paired_difference(values, reference)
    return f"{diff:+.3f} [{low:+.3f}, {high:+.3f}]", diff, low


def table(dataset: str, studies: dict[str, dict], quality: list[dict]) -> list[str]:
    """The Markdown lines of one set's table."""
    stock, product = per_query(quality, dataset, STOCK), per_query(quality, dataset, "lmk-rag")
    ids = sorted(stock)
    lead, _, _ = interval([product[q] for q in ids], [stock[q] for q in ids])
    lines = [f"## {dataset} ({len(ids)} queries)", "",
             f"Tuned stock row {np.mean([stock[q] for q in ids]):.3f}; lmk-rag (the report's run) "
             f"{np.mean([product[q] for q in ids]):.3f}, {lead} over it.", "",
             "| study | variant | nDCG@10 | against the study's reference | against the tuned stock row |",
             "|---|---|---|---|---|"]
    for study, results in studies.items():
        variants = results.get(dataset)
        if variants is None:
            continue
        reference = "store" if "store" in variants else "base"
        for variant, values in variants.items():
            ours = [values[q] for q in ids]
            versus_reference, _, _ = interval(ours, [variants[reference][q] for q in ids])
            versus_stock, diff, low = interval(ours, [stock[q] for q in ids])
            if diff >= TARGET and low > 0:
                versus_stock = f"**{versus_stock}**"
            name = f"{variant} (reference)" if variant == reference else variant
            lines.append(f"| {study} | {name} | {np.mean(ours):.3f} | {versus_reference} | {versus_stock} |")
    return [*lines, ""]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("sets", nargs="+", help="the report's names of the sets")
    parser.add_argument("--study", action="append", required=True, metavar="NAME=FILE",
                        help="a study's name and the per-query values it wrote (--out); repeatable")
    parser.add_argument("--quality", type=Path, default=QUALITY, help="the report's rows (default: %(default)s)")
    args = parser.parse_args()
    quality = json.loads(args.quality.read_text())
    studies = {}
    for given in args.study:
        name, _, path = given.partition("=")
        if not path:
            raise SystemExit(f"error: --study takes NAME=FILE, got {given!r}")
        studies[name] = json.loads(Path(path).read_text())
    for dataset in args.sets:
        print("\n".join(table(dataset, studies, quality)))


if __name__ == "__main__":
    main()
