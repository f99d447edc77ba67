"""The ``lmk-rag`` pipeline: the product end to end. Encoder defaults, nodes cut from one encoding
pass, a Qdrant Edge store in a temporary folder with its defaults, two-stage search (dense + BM25
prefetch, chunk MaxSim and BM25 fused by the store's ``alpha``), documents ranked by their best node.

Searches run at the product's depth: the prefetch a ``k=10`` query uses (100 candidates per branch), whatever
the ranking depth the harness asks for, so nDCG@10 is the product's. Variants: ``lmk-rag-alpha1`` (MaxSim
alone, BM25 only widens the prefetch), ``lmk-rag-dense`` (no BM25 at all), ``lmk-rag-static`` (static MaxSim
rerank), ``lmk-rag-node`` (``rerank="node"``: the node vector instead of a multivector rerank)."""

from __future__ import annotations

import shutil
import tempfile
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from lmk_rag.eval.pipelines.base import IndexStats, PipelineOptions, Ranking, landmark_encoder, register_pipeline

if TYPE_CHECKING:  # pragma: no cover
    from lmk_rag.encoder import LandmarkEncoder

#: Pipeline settings in ``options.encoder`` that go to the store, not the encoder, besides the storage ones (the
#: store's :data:`~lmk_rag.store.settings.STORAGE_KEYS`).
STORE_SETTINGS = ("static_model", "prefetch_limit", "alpha", "oversampling", "exact")
#: The ``k`` of a product query, whose prefetch depth every search uses.
PRODUCT_K = 10


@register_pipeline("lmk-rag")
class LmkRagPipeline:
    """Index with :class:`~lmk_rag.store.LandmarkStore`, search with ``rerank="chunks"``.

    Document encodings come through the harness's states cache (shared with the other landmark
    pipelines); writing the store and building its index are timed in :meth:`index`. Besides encoder
    settings, ``options.encoder`` may hold ``static_model`` (for ``lmk-rag-static``) and the store's
    ``prefetch_limit`` (default 100), ``alpha``, ``oversampling`` and ``exact`` (brute-force search: rankings that
    do not depend on how the HNSW graph was built, for comparing two versions of the code).
    """

    rerank = "chunks"
    alpha: float | None = None  # the store's default
    bm25: bool | None = None  # the store's default (on)
    static = False  # also store static token vectors (needed for ``rerank="static"``)

    def __init__(self, options: PipelineOptions) -> None:
        """Keep the options; the store is built in :meth:`index`."""
        self.options = options
        self._store: Any = None
        self._encoder: LandmarkEncoder | None = None

    @property
    def settings(self) -> dict[str, Any]:
        """The encoder settings and search mode (reported in the eval JSON)."""
        base = self._encoder.settings if self._encoder is not None else {}
        store = self._store
        return {
            **base,
            "rerank": self.rerank,
            "bm25": self.bm25 if store is None else store.bm25,
            "alpha": self._store_option("alpha", self.alpha) if store is None else store.alpha,
            "bm25_tokenizer": None if store is None else store.settings.get("bm25_tokenizer"),
            "prefetch_limit": self._prefetch_limit,
        }

    def _store_option(self, name: str, default: Any) -> Any:
        """A store setting from ``options.encoder``, else the pipeline's default."""
        return self.options.encoder.get(name, default)

    @property
    def _prefetch_limit(self) -> int:
        """The store's ``prefetch_limit`` (``options.encoder["prefetch_limit"]``, default 100)."""
        return int(self.options.encoder.get("prefetch_limit", 100))

    def index(self, docs: Sequence[str]) -> IndexStats:
        """Encode (cached), cut nodes, write them to a fresh Edge store and build its index.

        :param docs: the document texts; doc ids are their list positions.
        :return: the cold encoding time plus the time to write and index the store.
        """
        import time

        from lmk_rag.eval.states import encode_states_cached
        from lmk_rag.store import LandmarkStore
        from lmk_rag.store.documents import records_from_encoding
        from lmk_rag.store.settings import STORAGE_KEYS
        from lmk_rag.store.types import SearchOptions, StorageOptions

        self._encoder = landmark_encoder(
            self.options, {key: value for key, value in self.options.encoder.items()
                           if key not in STORE_SETTINGS + STORAGE_KEYS}
        )
        result = encode_states_cached(self._encoder, docs, self.options.cache_dir)
        start = time.perf_counter()
        folder = tempfile.mkdtemp(prefix="lmk_rag_eval_store_")
        static_encoder = None
        if self.static:
            from lmk_rag.static import StaticTokenEncoder

            static_encoder = StaticTokenEncoder(self.options.encoder.get("static_model"))
        self._store = LandmarkStore(
            folder,
            encoder=self._encoder,
            bm25=self.bm25,
            alpha=self._store_option("alpha", self.alpha),
            static_encoder=static_encoder,
            search=SearchOptions(prefetch_limit=self._prefetch_limit,
                                 oversampling=self._store_option("oversampling", None),
                                 exact=bool(self._store_option("exact", False))),
            storage=StorageOptions(**{key: self.options.encoder[key] for key in STORAGE_KEYS
                                      if key in self.options.encoder}),
        )
        weakref.finalize(self, _drop_store, self._store, folder)

        def records() -> Any:
            for index, (text, encoded) in enumerate(zip(docs, self._encoder.pool(result.states))):
                doc_id = str(index)
                yield doc_id, records_from_encoding(doc_id, text, encoded, self._store.node_tokens)

        self._store.upsert_encoded_documents(records())
        self._store.optimize()
        return IndexStats(encode_s=result.encode_s + time.perf_counter() - start, cached=result.cached)

    def search(self, queries: Sequence[str], k: int) -> list[Ranking]:
        """Encode the queries in one batch and run one store query each, at the product's prefetch depth.

        :param queries: the query texts.
        :param k: documents per query at most (fewer when the product's candidates hold fewer documents).
        :return: one ranking per query (documents by their best node's score).
        """
        assert self._store is not None, "index() must be called before search()"
        from lmk_rag.store import EncodedQuery

        encoded = self._encoder.encode_queries(list(queries))
        prefetch_limit = max(self._prefetch_limit, 4 * PRODUCT_K)
        rankings: list[Ranking] = []
        for text, query in zip(queries, encoded):
            static_vectors = self._store.static_encoder.encode_query_tokens(text) if self.static else None
            hits = self._store.search_encoded(EncodedQuery.of(query, text, static_vectors), k=k, rerank=self.rerank,
                                              one_per_document=True, prefetch_limit=prefetch_limit)
            rankings.append([(int(hit.doc_id), hit.score) for hit in hits])
        return rankings


@register_pipeline("lmk-rag-alpha1")
class LmkRagAlpha1Pipeline(LmkRagPipeline):
    """``lmk-rag`` with ``alpha=1``: BM25 widens the prefetch, chunk MaxSim alone ranks (the store before fusion)."""

    alpha = 1.0


@register_pipeline("lmk-rag-dense")
class LmkRagDensePipeline(LmkRagPipeline):
    """``lmk-rag`` without BM25: dense prefetch only, then the rerank."""

    bm25 = False


@register_pipeline("lmk-rag-static")
class LmkRagStaticPipeline(LmkRagPipeline):
    """``lmk-rag`` with static token vectors in the store and ``rerank="static"`` (static MaxSim rerank)."""

    rerank = "static"
    static = True


@register_pipeline("lmk-rag-node")
class LmkRagNodePipeline(LmkRagPipeline):
    """``lmk-rag`` with ``rerank="node"``: the node vector's cosine fused with BM25, no multivector rerank."""

    rerank = "node"


def _drop_store(store: Any, folder: str) -> None:
    """Close the pipeline's store and remove its temporary folder."""
    store.close()
    shutil.rmtree(folder, ignore_errors=True)
