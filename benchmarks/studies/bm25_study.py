"""BM25 study (issue 42 item 5): what makes the store's lexical side lose on prose, and whether a change wins.

The store's BM25 is Qdrant's model with code tokens, English stop words and stemmer, k1=1.2, b=0.75, a fixed
average length of 256 tokens, and the IDF of the collection's nodes (``base``). Each variant changes one of those,
in the node vectors and the queries alike:

- ``word``: Qdrant's word tokenizer (keeps ``dry_run`` whole, no identifier parts);
- ``avg true``: the nodes' true average length in BM25 tokens instead of 256;
- ``b 0.4`` / ``b 0.9`` / ``b 1.0``, ``k 0.9`` / ``k 1.6`` (and both): the length normalisation and the
  term-frequency saturation;
- ``doc idf``: IDF over documents (a term's document frequency among the set's documents) instead of nodes.

Each variant is measured twice: BM25 alone (documents by their best node over every node) and fused as the store
fuses (the store's candidates, with the variant's BM25 in the prefetch, scored by ``common.store_scores`` at the
store's alpha). Prints nDCG@10 per variant with the paired difference to ``base`` and writes the per-query values::

    python benchmarks/studies/bm25_study.py perldoc-ref perlfaq-answers --out bm25_study.json
"""

from __future__ import annotations

import common
import numpy as np

#: Each variant's Qdrant ``Bm25Config`` settings over the store's (None: the store's model itself).
MODELS: dict[str, dict[str, object] | None] = {
    "base": None, "word": {"tokenizer": "word"}, "b 0.4": {"b": 0.4}, "b 0.9": {"b": 0.9}, "b 1.0": {"b": 1.0},
    "k 0.9": {"k": 0.9}, "k 1.6": {"k": 1.6}, "k 0.9 b 0.9": {"k": 0.9, "b": 0.9},
}


def average_length(texts: list[str]) -> float:
    """The nodes' mean length in the store's BM25 tokens (stop words dropped, as the model counts them)."""
    counter = common.bm25_model(k=1e9, b=0.0)  # huge k and no length normalisation: the weights are the counts
    return float(np.mean([np.round(counter.embed_document(text).values).sum() for text in texts]))


def document_idf(index: common.Bm25Index, node_doc: np.ndarray) -> common.Bm25Index:
    """The same node weights with the IDF of documents: a term's frequency is the number of documents holding it."""
    weights = index.weights.tocsc()
    n_docs = int(node_doc.max()) + 1
    df = np.array([len(np.unique(node_doc[weights.indices[weights.indptr[c] : weights.indptr[c + 1]]]))
                   for c in range(weights.shape[1])])
    out = common.Bm25Index(weights, index.vocab)
    out.idf = np.log(1 + (n_docs - df + 0.5) / (df + 0.5))
    return out


def indexes(corpus: common.Corpus) -> dict[str, tuple[common.Bm25Index, list[list[int]]]]:
    """Each variant's node index and query terms."""
    out = {}
    for name, config in MODELS.items():
        model = None if config is None else common.bm25_model(**config)
        out[name] = (common.Bm25Index.of_store(corpus.node_texts, model),
                     common.query_terms(corpus.data.query_texts, model))
    mean = average_length(corpus.node_texts)
    print(f"  nodes' mean length: {mean:.0f} BM25 tokens (the store's model assumes 256)", flush=True)
    model = common.bm25_model(avg_len=mean)
    out[f"avg true {mean:.0f}"] = (common.Bm25Index.of_store(corpus.node_texts, model),
                                   common.query_terms(corpus.data.query_texts, model))
    out["doc idf"] = (document_idf(out["base"][0], corpus.node_doc), out["base"][1])
    return out


def study(corpus: common.Corpus) -> dict[str, dict[str, float]]:
    """Every variant's per-query nDCG@10 alone and fused, by query id."""
    rankings: dict[str, list[list[int]]] = {}
    every_node = np.arange(len(corpus.node_doc))
    for name, (index, terms) in indexes(corpus).items():
        for query in range(len(corpus.data.query_ids)):
            bm25 = index.scores(terms[query])
            rankings.setdefault(f"alone {name}", []).append(
                common.doc_ranking(every_node, np.round(bm25, 6), corpus.node_doc))
            rankings.setdefault("base" if name == "base" else f"fused {name}", []).append(
                common.query_ranking(corpus, query, bm25))
    return common.ndcg_per_query(corpus, rankings)


def show(per_query: dict[str, dict[str, float]]) -> None:
    """Print the variants alone against BM25 alone, then fused against the store."""
    for side, base in (("alone", "alone base"), ("fused", "base")):
        print(f"  {side}:")
        common.print_against_base({("base" if name == base else name): values for name, values in per_query.items()
                                   if name.startswith(side) or name == base})


if __name__ == "__main__":
    common.run_study(__doc__.split("\n")[0], study, show)
