"""The read half of :class:`~lmk_rag.store.LandmarkStore`: searches (fused, MMR) and look-ups.

A mixin (as qdrant-client adds its fastembed methods to ``QdrantClient``): it uses the store's backend, vectors
and settings and changes nothing in the store.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from lmk_rag.checks import check_count
from lmk_rag.encoder.types import EncodedText
from lmk_rag.errors import CorruptStoreError, InvalidInputError, SettingsMismatchError, VectorSizeError
from lmk_rag.store import records as rec
from lmk_rag.store import versions
from lmk_rag.store.check import sample_problem
from lmk_rag.store.filters import FilterLike
from lmk_rag.store.points import check_directions
from lmk_rag.store.query import (
    best_hits,
    check_alpha,
    check_rerank,
    checked_score,
    fuse,
    plan_mmr,
    plan_search,
)
from lmk_rag.store.types import Branch, Hit, NodeRecord, Rerank

if TYPE_CHECKING:  # pragma: no cover
    from lmk_rag.encoder.protocols import DocumentEncoder
    from lmk_rag.store.base import Backend
    from lmk_rag.store.ledger import Ledger
    from lmk_rag.store.points import StoreVectors


class StoreReads:
    """Searches and look-ups of a store (see :class:`~lmk_rag.store.LandmarkStore`)."""

    _backend: Backend
    _vectors: StoreVectors
    _meta: dict[str, Any]
    _ledger: Ledger
    where: str
    prefetch_limit: int
    hnsw_ef: int | None
    #: Whether this handle has sampled the stored vectors (:meth:`_check_sample`).
    _sampled: bool = False
    encoder: DocumentEncoder
    alpha: float
    bm25: bool
    default_rerank: Rerank
    dim: int

    def search(
        self,
        query: str,
        k: int = 10,
        rerank: Rerank | str | None = None,
        filter: FilterLike = None,
        doc_level: bool = True,
        alpha: float | None = None,
    ) -> list[Hit]:
        """Encode a query once and search in two stages (see :meth:`search_encoded`).

        :param query: the query text.
        :param rerank: ``"chunks"`` (MaxSim over chunk vectors), ``"static"`` (static token MaxSim) or ``"none"``;
            None: the store's :attr:`default_rerank`.
        :return: hits, best first.
        """
        rerank = self.default_rerank if rerank is None else check_rerank(rerank)
        if not isinstance(query, str) or not query.strip():
            raise InvalidInputError("query must be a non-empty string")
        static_query = self._vectors.static_query(query) if rerank == Rerank.STATIC else None
        return self.search_encoded(self.encoder.encode_queries(query), k=k, rerank=rerank, filter=filter,
                                   doc_level=doc_level, static_query=static_query, text=query, alpha=alpha)

    def search_encoded(
        self,
        query: Any,
        k: int = 10,
        rerank: Rerank | str | None = None,
        filter: FilterLike = None,
        doc_level: bool = True,
        static_query: np.ndarray | None = None,
        text: str | None = None,
        alpha: float | None = None,
        prefetch_limit: int | None = None,
    ) -> list[Hit]:
        """Search with an already encoded query in one Query API call; candidates are ranked by
        ``alpha * rerank + (1 - alpha) * bm25`` (see :mod:`lmk_rag.store.query`).

        :param query: an :class:`~lmk_rag.EncodedText` (``.vector`` (dim,), ``.chunk_vectors`` (q, dim)).
        :param k: hits returned.
        :param rerank: ``"chunks"``, ``"static"`` or ``"none"`` (the node vector's cosine); None: the store's
            :attr:`default_rerank`.
        :param filter: metadata filter.
        :param doc_level: at most one hit (the best node) per document.
        :param static_query: the query's static token vectors, shape (q, static_dim); needed for ``"static"``.
        :param text: the query text for BM25; None ranks by the rerank alone.
        :param alpha: weight of the rerank score in [0, 1] (None: the store's :attr:`alpha`).
        :param prefetch_limit: candidates per prefetch branch (None: the store's, at least ``4 * k``).
        :return: hits, best first; scores lie in [-1, 1].
        :raises SettingsMismatchError: for ``alpha`` < 1 on a store without BM25.
        """
        self._check_sample()
        if not (hasattr(query, "vector") and hasattr(query, "chunk_vectors")):
            raise InvalidInputError(
                f"search_encoded takes an encoded query (store.encoder.encode_queries(text)), got {query!r}; "
                "search a text with search()"
            )
        if text is not None and not isinstance(text, str):
            raise InvalidInputError(f"text must be the query's text (a string) or None, got {text!r}")
        rerank = self.default_rerank if rerank is None else check_rerank(rerank)
        prefetch_limit = self._candidates(k, prefetch_limit, "prefetch_limit")
        alpha = self.alpha if alpha is None else check_alpha(alpha)
        if alpha < 1.0 and not self.bm25:
            raise SettingsMismatchError(f"{self.where} has no BM25 vectors: alpha must be 1, got {alpha}")
        plan = plan_search(
            dense=[Branch("node", np.asarray(query.vector, dtype=np.float32).tolist())],
            scorer=self._vectors.scorer(rerank, query, static_query),
            sparse=self._vectors.sparse_query(text),
            alpha=alpha,
            prefetch_limit=prefetch_limit,
            filter=versions.nodes_filter(self._backend, filter),
            payload_keys=rec.HIT_KEYS,
            hnsw_ef=self.hnsw_ef,
        )
        results = self._backend.query(plan)
        shown = {p.id for p in versions.visible(self._backend, [p for points in results for p in points])}
        best = best_hits(fuse(plan, [[p for p in points if p.id in shown] for points in results], alpha), k, doc_level)
        full = {p.id: p for p in self._backend.retrieve([pid for pid, _ in best], False)}
        return [rec.hit_from_point(full[pid], score) for pid, score in best if pid in full]

    def search_vector(
        self, vector: Sequence[float] | np.ndarray, k: int = 10, filter: FilterLike = None, doc_level: bool = True
    ) -> list[Hit]:
        """Search by a query vector made outside the store (a LlamaIndex ``query_embedding``): the nodes whose
        vectors are nearest to it, scored by that cosine alone (no rerank, no BM25; see :meth:`search_encoded`).

        :param vector: the query vector, shape (dim,).
        :param k: hits returned.
        :param filter: metadata filter.
        :param doc_level: at most one hit (the best node) per document.
        :return: hits, best first; scores lie in [-1, 1].
        """
        vector = np.asarray(vector, dtype=np.float32)
        encoded = EncodedText(vector=vector, chunk_vectors=vector.reshape(1, -1), spans=[(0, 0)])
        return self.search_encoded(encoded, k=k, rerank=Rerank.NONE, filter=filter, doc_level=doc_level)

    def _check_sample(self) -> None:
        """Before this handle's first search, look for damaged vectors in a sample of the stored nodes
        (:func:`~lmk_rag.store.check.sample_problem`): damaged vectors would give wrong hits without an error.

        :raises CorruptStoreError: naming a damaged node and ``lmk-rag check``, which lists them all.
        """
        if self._sampled:
            return
        damaged = sample_problem(self._backend)
        if damaged:
            raise CorruptStoreError(
                f"{self.where}: stored vectors are damaged (node {damaged}); run lmk-rag check --store "
                f"{self.where} to list every damaged node, then re-ingest those documents"
            )
        self._sampled = True

    def _candidates(self, k: Any, given: Any, name: str) -> int:
        """Check ``k`` and return how many candidates a search takes: ``given`` (checked, named ``name``), else the
        store's ``prefetch_limit``, at least ``4 * k``."""
        check_count("k", k)
        return max(self.prefetch_limit, 4 * k) if given is None else check_count(name, given)

    def search_mmr(
        self,
        query: str | np.ndarray,
        k: int = 10,
        lambda_: float = 0.5,
        filter: FilterLike = None,
        candidates: int | None = None,
    ) -> list[Hit]:
        """Diverse results: maximal marginal relevance over the node vectors, in one Query API call (no rerank, no
        BM25). Each next node maximises ``lambda_ * cosine(query, node) - (1 - lambda_) * its highest cosine to a
        node already picked``.

        :param query: the query text (encoded once) or its vector, shape (dim,).
        :param k: hits returned.
        :param lambda_: weight of relevance against diversity in [0, 1]: 1 gives the nearest nodes, 0 the most
            different ones after the nearest.
        :param filter: metadata filter.
        :param candidates: how many nearest nodes MMR chooses from (None: the store's ``prefetch_limit``, at least
            ``4 * k``).
        :return: hits in MMR order; each hit's score is its node vector's cosine to the query, in [-1, 1].
        """
        self._check_sample()
        candidates = self._candidates(k, candidates, "candidates")
        if isinstance(query, str):
            if not query.strip():
                raise InvalidInputError("query must be a non-empty string")
            query = self.encoder.encode_queries(query).vector
        try:
            vector = np.asarray(query, dtype=np.float32)
        except (TypeError, ValueError):
            raise InvalidInputError(
                f"query must be a string or a vector of {self.dim} numbers, got {query!r}"
            ) from None
        if vector.shape != (self.dim,):
            raise VectorSizeError(f"query vector of shape {vector.shape}, store expects ({self.dim},)")
        check_directions(vector, "query vector")
        plan = plan_mmr(vector.tolist(), lambda_, candidates, k, versions.nodes_filter(self._backend, filter),
                        rec.HIT_KEYS, self.hnsw_ef)
        (picked,) = self._backend.query(plan)
        for point in picked:
            checked_score(point, point.score)  # a cosine outside [-1, 1] comes from damaged vectors
        shown = versions.visible(self._backend, picked)
        full = {p.id: p for p in self._backend.retrieve([p.id for p in shown], False)}
        return [rec.hit_from_point(full[p.id], p.score) for p in shown if p.id in full]

    def get_nodes(self, node_ids: Sequence[str] | None = None, filter: FilterLike = None) -> list[NodeRecord]:
        """Nodes by id and/or metadata filter, with their vectors (in no particular order)."""
        wanted = versions.nodes_filter(self._backend, filter, node_ids)
        points = list(versions.scroll(self._backend, wanted, with_vectors=True))
        return [rec.record_from_point(p) for p in versions.visible(self._backend, points)]

    def doc_ids(self) -> list[str]:
        """The ids of the stored documents, sorted."""
        return sorted(self.documents())

    def documents(self) -> dict[str, dict[str, Any]]:
        """Every stored document's metadata, by doc id."""
        markers = versions.scroll(self._backend, versions.documents_filter(self._backend), False)
        return {m.payload["doc_id"]: m.payload.get("meta") or {} for m in markers}

    def sources(self) -> dict[str, str]:
        """The file each document was read from, by doc id, for the documents written with one
        (``add_documents(..., sources=...)``, as ``lmk-rag ingest`` does)."""
        markers = versions.scroll(self._backend, versions.documents_filter(self._backend), False)
        return {m.payload["doc_id"]: m.payload["source"] for m in markers if isinstance(m.payload.get("source"), str)}

    def count(self) -> int:
        """The number of stored nodes."""
        return self._backend.count(versions.nodes_filter(self._backend, None))

    def count_documents(self) -> int:
        """The number of stored documents."""
        return self._backend.count(versions.documents_filter(self._backend))

    def info(self) -> dict[str, Any]:
        """Where the store is, its counts and recorded settings (JSON-able)."""
        return {
            "backend": self._backend.name,
            "location": self.where,
            "documents": self.count_documents(),
            "nodes": self.count(),
            **{key: value for key, value in self._meta.items() if key != "format"},
        }

    def check(self) -> list[str]:
        """Read every point and list what is wrong (empty: the store is sound): interrupted writes, nodes without a
        current document version, damaged vectors, node counts that differ from their documents' records, and
        committed counts that differ from what the engine holds."""
        from lmk_rag.store.check import verify

        return verify(self._backend, self._ledger.current() if self._ledger.enabled else None)
