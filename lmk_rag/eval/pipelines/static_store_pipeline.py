"""The ``static-store`` pipeline: the transformer-free store end to end. ``LandmarkStore(mode="static")`` in a
temporary Qdrant Edge folder: pooled static node vectors (dense prefetch), static token multivectors through the
ConvMixer (the rerank), BM25 fused by the store's ``alpha``; documents ranked by their best node.

Documents are written by the store's own ``upsert_documents`` (static encoding is cheap: nothing is cached), and
searches run at the product's depth, as in the ``lmk-rag`` pipeline. Settings in ``options.encoder``:
``static_model`` (a model2vec folder or hub id; default: the shipped model), ``mixer`` (``"default"``, ``"shipped"``,
a mixer folder, or null for raw static vectors), ``granularity``, ``prefetch_limit`` (default 100) and ``alpha``.
numpy and Qdrant Edge only: this pipeline imports no torch.
"""

from __future__ import annotations

import shutil
import tempfile
import time
import weakref
from collections.abc import Sequence
from typing import Any

from lmk_rag.eval.pipelines.base import IndexStats, PipelineOptions, Ranking, register_pipeline
from lmk_rag.eval.pipelines.lmk_rag_pipeline import PRODUCT_K

#: ``options.encoder`` keys that build the static encoder.
ENCODER_SETTINGS = ("static_model", "mixer", "granularity")


@register_pipeline("static-store")
class StaticStorePipeline:
    """Index with ``LandmarkStore(mode="static")``, search with its default rerank (static MaxSim) fused with BM25."""

    def __init__(self, options: PipelineOptions) -> None:
        """Keep the options; the store is built in :meth:`index`."""
        self.options = options
        self._store: Any = None

    @property
    def _prefetch_limit(self) -> int:
        return int(self.options.encoder.get("prefetch_limit", 100))

    @property
    def settings(self) -> dict[str, Any]:
        """The static encoder's settings and the search's (reported in the eval JSON)."""
        if self._store is None:
            return dict(self.options.encoder)
        return {**self._store.encoder.settings, "rerank": self._store.default_rerank.value, "alpha": self._store.alpha,
                "prefetch_limit": self._prefetch_limit}

    def index(self, docs: Sequence[str]) -> IndexStats:
        """Encode and write the documents into a fresh static store and build its index.

        :param docs: the document texts; doc ids are their list positions.
        :return: the time to encode, write and index (never cached).
        """
        from lmk_rag.static.document_encoder import StaticDocumentEncoder
        from lmk_rag.store import LandmarkStore, SearchOptions

        settings = {key: self.options.encoder[key] for key in ENCODER_SETTINGS if key in self.options.encoder}
        start = time.perf_counter()
        folder = tempfile.mkdtemp(prefix="lmk_rag_eval_static_store_")
        self._store = LandmarkStore(folder, encoder=StaticDocumentEncoder(**settings),
                                    alpha=self.options.encoder.get("alpha"),
                                    search=SearchOptions(prefetch_limit=self._prefetch_limit))
        weakref.finalize(self, _drop_store, self._store, folder)
        documents = [(str(index), text, None) for index, text in enumerate(docs)]
        self._store.upsert_documents(documents, show_progress_bar=self.options.show_progress, skip_unchanged=False)
        self._store.optimize()
        return IndexStats(encode_s=time.perf_counter() - start)

    def search(self, queries: Sequence[str], k: int) -> list[Ranking]:
        """One store query per query text, at the product's prefetch depth.

        :param queries: the query texts.
        :param k: documents per query at most.
        :return: one ranking per query (documents by their best node's score).
        """
        from lmk_rag.store import EncodedQuery

        assert self._store is not None, "index() must be called before search()"
        store = self._store
        prefetch_limit = max(self._prefetch_limit, 4 * PRODUCT_K)
        rankings: list[Ranking] = []
        for text in queries:
            query = EncodedQuery.of(store.encoder.encode_queries(text), text,
                                    store.static_encoder.encode_query_tokens(text))
            hits = store.search_encoded(query, k=k, one_per_document=True, prefetch_limit=prefetch_limit)
            rankings.append([(int(hit.doc_id), hit.score) for hit in hits])
        return rankings


def _drop_store(store: Any, folder: str) -> None:
    """Close the pipeline's store and remove its temporary folder."""
    store.close()
    shutil.rmtree(folder, ignore_errors=True)
