"""The store's prefetch branches where the prefetch is the bottleneck: nDCG@10 of the ``lmk-rag`` pipelines
with ``prefetch_limit=40`` and 10 results per query, on the quality report's subsamples.

``lmk-rag eval`` ranks 100 documents per query, so the store prefetches at least 400 nodes per branch,
more than most subsamples hold, and the branches cannot change which nodes are reranked. With 40
candidates per branch they compete, as a 400-node prefetch does on a corpus of thousands of nodes.
Encodings come from the eval cache (see ``report.py``)::

    python benchmarks/prefetch_bottleneck.py      # prints a markdown table (docs/decisions.md quotes it)
"""

from __future__ import annotations

from report import CACHE, DATA, SEED, SETS  # benchmarks/report.py: the report's sets, sizes and cache

from lmk_rag.eval.beir import load_beir
from lmk_rag.eval.metrics import mean_metrics, per_query_metrics
from lmk_rag.eval.pipelines import PipelineOptions, get_pipeline
from lmk_rag.eval.sample import subsample

#: node vector only; + BM25 (the default); + BM25 + document vector.
PIPELINES = ["lmk-rag-dense", "lmk-rag", "lmk-rag-docprefetch"]
PREFETCH_LIMIT, K = 40, 10


def ndcg10(folder: str, max_queries: int, max_docs: int, pipeline: str) -> float:
    """nDCG@10 of one pipeline on one subsampled set with the small prefetch.

    :param folder: the dev set folder relative to the data folder.
    :param max_queries: the query sample size.
    :param max_docs: the document sample size.
    :param pipeline: a registered ``lmk-rag*`` pipeline.
    :return: mean nDCG@10 over the sampled queries.
    """
    dataset = subsample(load_beir(DATA / folder), max_queries, max_docs, seed=SEED)
    runner = get_pipeline(pipeline, PipelineOptions(cache_dir=CACHE, encoder={"prefetch_limit": PREFETCH_LIMIT}))
    runner.index(list(dataset.doc_texts))
    rankings = runner.search(list(dataset.query_texts), K)
    run = {qid: [dataset.doc_ids[doc] for doc, _ in ranking] for qid, ranking in zip(dataset.query_ids, rankings)}
    per_query = per_query_metrics(dataset.qrels, run)
    return mean_metrics([per_query[qid] for qid in dataset.query_ids])["ndcg@10"]


def main() -> None:
    """Print one row per pipeline, one column per set."""
    print("| pipeline | " + " | ".join(f"{name} ({q}/{d})" for name, (q, d) in SETS.items()) + " | mean |")
    print("|---|" + "---|" * (len(SETS) + 1))
    for pipeline in PIPELINES:
        values = [ndcg10(name, q, d, pipeline) for name, (q, d) in SETS.items()]
        cells = " | ".join(f"{value:.4f}" for value in values)
        print(f"| {pipeline} | {cells} | {sum(values) / len(values):.4f} |", flush=True)


if __name__ == "__main__":
    main()
