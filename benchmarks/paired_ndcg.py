"""The paired nDCG@10 difference of two TREC run files (``lmk-rag eval --run-file``) over one BEIR set's queries, as
``backend_quality.md`` reports it: both means, the mean of ``b - a`` with its 95% paired-bootstrap interval
(``intervals.paired_difference``), and how many queries keep the same top 10 documents in the same order::

    python benchmarks/paired_ndcg.py DATASET_DIR a.run b.run
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import pytrec_eval
from compare_runs import load
from intervals import paired_difference


def qrels(dataset: Path) -> dict[str, dict[str, int]]:
    """The set's test judgements: query id -> document id -> grade."""
    judged: dict[str, dict[str, int]] = {}
    with open(dataset / "qrels" / "test.tsv", newline="") as lines:
        rows = csv.reader(lines, delimiter="\t")
        next(rows)
        for query_id, doc_id, grade in rows:
            judged.setdefault(query_id, {})[doc_id] = int(grade)
    return judged


def main() -> None:
    """Print one markdown row: queries, nDCG@10 of a and b, the paired difference, same top 10."""
    dataset, first, second = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    runs = [load(first), load(second)]
    evaluator = pytrec_eval.RelevanceEvaluator(qrels(dataset), {"ndcg_cut.10"})
    scores = [evaluator.evaluate({query: dict(ranked) for query, ranked in run.items()}) for run in runs]
    queries = sorted(set(scores[0]) & set(scores[1]))
    a, b = ([score[query]["ndcg_cut_10"] for query in queries] for score in scores)
    mean, low, high = paired_difference(b, a)
    same = sum([doc for doc, _ in runs[0][query][:10]] == [doc for doc, _ in runs[1][query][:10]] for query in queries)
    print(f"| {dataset.name} ({len(queries)} queries) | {sum(a) / len(a):.4f} | {sum(b) / len(b):.4f} | "
          f"{mean:+.4f} [{low:+.4f}, {high:+.4f}] | {same} / {len(queries)} |")


if __name__ == "__main__":
    main()
