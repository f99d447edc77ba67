"""One LlamaIndex ``VectorStoreQuery`` as one :class:`LandmarkStore` search, by query mode:

- ``default``: with ``query_str``, the store's fused search (rerank and BM25, the store's ``alpha``); with
  ``query_embedding`` alone, the nearest node vectors (no rerank, no BM25);
- ``hybrid``: the fused search with ``alpha`` = ``VectorStoreQuery.alpha`` (None: the store's), ``hybrid_top_k``
  results (else ``similarity_top_k``); without ``query_str``, the dense search of ``default``;
- ``sparse``, ``text_search``: BM25 alone over the whole store (``alpha`` 0); ``sparse_top_k`` results for
  ``sparse``;
- ``mmr``: maximal marginal relevance over the node vectors; ``mmr_threshold`` (query kwarg, else
  ``VectorStoreQuery.mmr_threshold``, else 0.5) weighs relevance (1) against diversity (0);
- the others: ``NotImplementedError`` (the learner modes fit a classifier on every stored vector in the client).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from llama_index.core.vector_stores.types import VectorStoreQuery, VectorStoreQueryMode

from llama_index.vector_stores.landmark.filters import to_store_filter
from lmk_rag.errors import InvalidInputError, SettingsMismatchError
from lmk_rag.store import Hit, LandmarkStore, Rerank

LEXICAL_MODES = (VectorStoreQueryMode.SPARSE, VectorStoreQueryMode.TEXT_SEARCH)
MMR_DEFAULT = 0.5
"""``mmr_threshold`` when neither the query nor its kwargs give one (LlamaIndex's default)."""


def search(
    store: LandmarkStore, query: VectorStoreQuery, rerank: Rerank | str | None, alpha: float | None = None,
    qdrant_filters: Any = None, **kwargs: Any
) -> list[Hit]:
    """Run a LlamaIndex query on the store (see the module docstring).

    :param store: the store.
    :param query: the query; an empty ``node_ids`` or ``doc_ids`` list restricts nothing, as in
        ``QdrantVectorStore`` (``VectorStoreIndex.as_retriever`` passes the ids its ``index_struct`` holds, which is
        ``[]`` for a store that keeps the text: reading ``[]`` as "none" would make every retriever find nothing); a
        ``hybrid`` query without ``query_str`` is the dense search of its embedding (as ``QdrantVectorStore``).
    :param rerank: the rerank of the fused search (None: the store's), checked by the store.
    :param alpha: the fused search's weight of the rerank (None: the store's); ``VectorStoreQuery.alpha`` overrides
        it in ``hybrid`` mode.
    :param qdrant_filters: a qdrant-client ``models.Filter``, which must hold beside ``query.filters`` (AND).
    :param kwargs: ``mmr_threshold`` for ``mmr`` (present, even as None, it overrides the query's).
    :return: hits, best first (MMR: in pick order).
    :raises InvalidInputError: for a query with neither text nor embedding, or a lexical query without text.
    :raises NotImplementedError: for the learner modes (``svm``, ``linear_regression``, ``logistic_regression``) and
        ``semantic_hybrid``.
    """
    mode = VectorStoreQueryMode(query.mode)
    flt = to_store_filter(query.filters, query.node_ids or None, query.doc_ids or None, qdrant_filters)
    k = query.similarity_top_k
    if mode == VectorStoreQueryMode.MMR:
        threshold = kwargs.get("mmr_threshold", query.mmr_threshold)
        lambda_ = MMR_DEFAULT if threshold is None else threshold
        return store.search_mmr(query.query_str or _embedding(query, mode), k, lambda_=lambda_, filter=flt)
    if mode not in (VectorStoreQueryMode.DEFAULT, VectorStoreQueryMode.HYBRID, *LEXICAL_MODES):
        raise NotImplementedError(
            f"LandmarkVectorStore does not run query mode {mode.value!r}: use 'default' (fused rerank + BM25), "
            "'hybrid' (with VectorStoreQuery.alpha), 'sparse'/'text_search' (BM25) or 'mmr'"
        )
    if not query.query_str:
        if mode in LEXICAL_MODES:
            raise InvalidInputError(
                f"query mode {mode.value!r} scores words with BM25: VectorStoreQuery.query_str is empty"
            )
        return store.search_vector(_embedding(query, mode), k=k, filter=flt, doc_level=False)
    if mode == VectorStoreQueryMode.HYBRID:
        alpha, k = alpha if query.alpha is None else query.alpha, query.hybrid_top_k or k
    elif mode in LEXICAL_MODES:
        if not store.bm25:
            raise SettingsMismatchError(
                f"query mode {mode.value!r} ranks by BM25 keyword vectors, and {store.where} was built without them "
                "(enable_hybrid=False): query in mode 'default', or ingest into a new store with enable_hybrid=True"
            )
        alpha = 0.0
        k = (query.sparse_top_k or k) if mode == VectorStoreQueryMode.SPARSE else k
    return store.search(query.query_str, k=k, rerank=rerank, filter=flt, doc_level=False, alpha=alpha)


def _embedding(query: VectorStoreQuery, mode: VectorStoreQueryMode) -> np.ndarray:
    """The query's embedding as float32, shape (dim,).

    :raises InvalidInputError: when the query has neither text nor embedding.
    """
    if query.query_embedding is None:
        raise InvalidInputError(
            f"query mode {mode.value!r}: the query has neither query_str (which the store encodes) nor query_embedding"
        )
    return np.asarray(query.query_embedding, dtype=np.float32)
