"""The ``bm25`` pipeline: lexical BM25 (Lucene variant) from the ``bm25s`` package."""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from lmk_rag.eval.pipelines.base import IndexStats, PipelineOptions, Ranking, register_pipeline


@register_pipeline("bm25")
class BM25Pipeline:
    """BM25 over lower-cased word tokens with English stop words removed (no stemming, no model)."""

    def __init__(self, options: PipelineOptions) -> None:
        """Keep the options; BM25 uses none of the model or encoder settings.

        :param options: the pipeline options.
        """
        self.options = options
        self._retriever = None
        self._n_docs = 0

    def index(self, docs: Sequence[str]) -> IndexStats:
        """Tokenize and index the documents.

        :param docs: the document texts.
        :return: the indexing time (never cached).
        """
        import bm25s

        start = time.perf_counter()
        tokens = bm25s.tokenize(list(docs), stopwords="en", show_progress=False)
        self._retriever = bm25s.BM25()
        self._retriever.index(tokens, show_progress=False)
        self._n_docs = len(docs)
        return IndexStats(encode_s=time.perf_counter() - start)

    def search(self, queries: Sequence[str], k: int) -> list[Ranking]:
        """Rank the documents by BM25 score; documents scoring 0 are left out.

        :param queries: the query texts.
        :param k: results per query at most.
        :return: one ranking per query.
        """
        import bm25s

        assert self._retriever is not None, "index() must be called before search()"
        tokens = bm25s.tokenize(list(queries), stopwords="en", return_ids=False, show_progress=False)
        rankings: list[Ranking] = []
        k = min(k, self._n_docs)
        for query_tokens in tokens:
            scores = self._retriever.get_scores(query_tokens)
            top = np.argsort(-scores, kind="stable")[:k]
            rankings.append([(int(i), float(scores[i])) for i in top if scores[i] > 0])
        return rankings
