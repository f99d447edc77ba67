"""Compare two TREC run files (``lmk-rag eval --run-file``) up to the store's documented tie order.

Per query: the top 10 documents must be the same, in the same order, with scores equal to 1e-5. Deeper ranks may
differ where Qdrant chose among candidates tied at a prefetch cut (docs/decisions.md, "store: equal scores"); they
are counted apart::

    python benchmarks/compare_runs.py before.run after.run
"""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path


def load(path: Path) -> dict[str, list[tuple[str, float]]]:
    """Each query's ranked ``(doc_id, score)`` pairs."""
    runs: dict[str, list[tuple[str, float]]] = defaultdict(list)
    for line in path.read_text().splitlines():
        query_id, _, doc_id, _, score, _ = line.split()
        runs[query_id].append((doc_id, float(score)))
    return runs


def compare(a: dict[str, list[tuple[str, float]]], b: dict[str, list[tuple[str, float]]]) -> tuple[int, int]:
    """How many queries differ in their top 10, and how many only below it."""
    top, deep = 0, 0
    for query_id in set(a) | set(b):
        x, y = a.get(query_id, []), b.get(query_id, [])
        same_docs = [d for d, _ in x[:10]] == [d for d, _ in y[:10]]
        if not same_docs or any(abs(s - t) > 1e-5 for (_, s), (_, t) in zip(x[:10], y[:10])):
            top += 1
        elif [d for d, _ in x] != [d for d, _ in y]:
            deep += 1
    return top, deep


if __name__ == "__main__":
    first, second = (load(Path(name)) for name in sys.argv[1:3])
    top, deep = compare(first, second)
    print(f"{len(first)} queries: top-10 differs in {top}, only deeper ranks in {deep}")
