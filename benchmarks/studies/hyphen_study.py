"""Hyphen study (issue 42): do words broken at a line end, joined again, lift the store's ranking?

Manual pages rendered by ``man`` (every manpages set; the demo's pages too) hyphenate words at line ends: the text
holds ``de``, U+2010, the line break as white space, ``scription``, as text extracted from PDFs holds soft hyphens
(U+00AD). The encoder and BM25 see two fragments where the query has one word. Variants, each ranked by the store's
own fusion (``granularity_study``'s ``store``):

- ``base``: the texts as they are;
- ``joined``: every such break removed (a letter, U+2010 or U+00AD, white space, a letter) from documents and
  queries before encoding and BM25 (the set encoded again);
- ``joined bm25``: the same for BM25 alone (the encoding of the texts as they are);
- ``joined queries``: the queries alone joined, for both sides (the documents as they are).

Prints nDCG@10 per variant with the paired difference to ``base`` and writes the per-query values::

    python benchmarks/studies/hyphen_study.py manpages-short manpages-needle/L2048 --out hyphen_study.json
"""

from __future__ import annotations

import dataclasses
import re

import common
import numpy as np
from granularity_study import Study

BREAK = re.compile(r"(?<=[^\W\d_])[\u2010\u00ad]\s+(?=[^\W\d_])")


def joined(texts: list[str]) -> list[str]:
    """The texts with every word broken at a line end joined again."""
    return [BREAK.sub("", text) for text in texts]


def store_rankings(corpus: common.Corpus) -> list[list[int]]:
    """The store's document ranking of every query."""
    study = Study(corpus)
    rankings = []
    for query in range(len(corpus.data.query_ids)):
        nodes, values = study.scores(query)["store"]
        rankings.append(common.doc_ranking(nodes, np.round(values, 6), corpus.node_doc))
    return rankings


def study(corpus: common.Corpus) -> dict[str, dict[str, float]]:
    """Every variant's per-query nDCG@10, by query id."""
    data = corpus.data
    fixed = dataclasses.replace(data, doc_texts=joined(data.doc_texts), query_texts=joined(data.query_texts))
    encoded = common.corpus_of(fixed)
    rankings = {"base": store_rankings(corpus), "joined": store_rankings(encoded)}
    lexical = dataclasses.replace(corpus, data=dataclasses.replace(data, query_texts=fixed.query_texts),
                                  node_texts=joined(corpus.node_texts))
    rankings["joined bm25"] = store_rankings(lexical)
    asked = dataclasses.replace(lexical, node_texts=corpus.node_texts, query_vectors=encoded.query_vectors,
                                query_chunks=encoded.query_chunks)
    rankings["joined queries"] = store_rankings(asked)
    return common.ndcg_per_query(corpus, rankings)


if __name__ == "__main__":
    common.run_study(__doc__.split("\n")[0], study)
