"""``LandmarkStore``: landmark nodes in Qdrant (Edge in-process by default, or qdrant-client), two-stage search.

A short facade over modules with one job each: :mod:`~lmk_rag.store.backends` opens the backend (folder checks,
lock), :mod:`~lmk_rag.store.settings` records and checks how the vectors were made, :mod:`~lmk_rag.store.points`
builds node points with every vector, :mod:`~lmk_rag.store.versions` writes and deletes documents so that none is
ever lost or doubled, and :mod:`~lmk_rag.store.query` plans a search and fuses its scores.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from lmk_rag.errors import InvalidInputError, SettingsMismatchError, VectorSizeError
from lmk_rag.store import records as rec
from lmk_rag.store import versions
from lmk_rag.store.backends import OpenedBackend, open_backend
from lmk_rag.store.base import Backend
from lmk_rag.store.filters import FilterLike
from lmk_rag.store.ingest import (
    Document,
    add_in_batches,
    check_documents,
    check_records,
    content_hash,
    upsert_in_batches,
)
from lmk_rag.store.modes import default_rerank, resolve_mode, static_store_encoder
from lmk_rag.store.points import StoreVectors
from lmk_rag.store.query import (
    DEFAULT_ALPHA,
    best_hits,
    check_alpha,
    check_k,
    check_rerank,
    fuse,
    plan_mmr,
    plan_search,
)
from lmk_rag.store.settings import check_encoder, check_settings, check_text_keys, create_settings
from lmk_rag.store.types import Branch, Hit, NodeRecord, Quantization, Rerank, StoreMode

logger = logging.getLogger(__name__)


class LandmarkStore:
    """Landmark nodes of documents in Qdrant, searched in two stages.

    Exactly one of ``path`` (Qdrant Edge folder; the default ``./lmk_store``), ``url`` (a Qdrant server),
    ``client`` (an existing ``QdrantClient``) or ``location`` (qdrant-client local mode: ``":memory:"`` or a
    folder) picks the backend.

    :param path: folder of an embedded Qdrant Edge store (created if missing).
    :param url: URL of a Qdrant server or cluster.
    :param api_key: API key for ``url``.
    :param client: an existing ``qdrant_client.QdrantClient``.
    :param location: qdrant-client local mode: ``":memory:"`` or a folder.
    :param encoder: the :class:`~lmk_rag.LandmarkEncoder`, or for a static store a
        :class:`~lmk_rag.StaticTokenEncoder` or :class:`~lmk_rag.static.documents.StaticDocumentEncoder`; None
        rebuilds it from the store's recorded settings (or uses the defaults for a new store). Must match a store's
        recorded settings.
    :param static_encoder: object with ``.dim``, ``.fingerprint``, ``.encode_document_tokens(text)`` and
        ``.encode_query_tokens(text)``; fills the static MaxSim slot of a transformer store (needed for
        ``rerank="static"``). A static store's encoder is its static encoder.
    :param mode: ``"transformer"`` or ``"static"`` (no transformer: pooled static node vectors, static token
        multivectors, BM25; no ``chunks`` vector; see docs/static.md). None = as recorded, else static when
        ``encoder`` is a static encoder, else transformer.
    :param node_tokens: node size in tokens when the store cuts documents; None = as recorded (256 for new stores).
    :param collection: collection name on qdrant-client backends.
    :param bm25: store a BM25 sparse vector per node, used in the prefetch and fused into the final score;
        None = as recorded (on for new stores, see docs/decisions.md).
    :param alpha: weight of the rerank score against BM25 in the final score, in [0, 1] (1 = rerank alone, 0 =
        BM25 alone). None = as recorded (:data:`~lmk_rag.store.query.DEFAULT_ALPHA` for new stores); a value
        given for a new store is recorded, for an existing one it applies to this handle. ``search`` may override it.
    :param quantization: ``"int8"`` or ``"binary"`` quantization of the multivectors of a new store.
    :param text_keys: metadata keys a new store indexes as full text: a ``text`` filter on them matches word
        prefixes in any case (``"6FTR78Y"`` finds ``"6ftr78yun"``); on other keys it matches whole words. None = as
        recorded (none for new stores).
    :param create: create the store when missing; False raises :class:`StoreError` instead.
    :param prefetch_limit: candidates per prefetch branch (at least ``4 * k``).
    :param hnsw_ef: HNSW ``ef`` of the dense prefetch (None: Qdrant's default).
    :param batch_size: documents encoded and written per batch.
    :param server_options: pass-through options of qdrant-client backends (``prefer_grpc``, ``timeout``,
        ``shard_number``, ... see :mod:`lmk_rag.store.server`).
    :raises StoreLockedError: when another process has the store open.
    :raises CorruptStoreError: when the folder or collection is damaged or not a lmk-rag store.
    :raises SettingsMismatchError: when ``encoder``/``static_encoder``/``mode``/``bm25``/``node_tokens``/``text_keys``
        differ from the store's.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        url: str | None = None,
        api_key: str | None = None,
        client: Any = None,
        location: str | None = None,
        encoder: Any = None,
        static_encoder: Any = None,
        mode: StoreMode | str | None = None,
        node_tokens: int | None = None,
        collection: str = "lmk_rag",
        bm25: bool | None = None,
        alpha: float | None = None,
        quantization: Quantization | None = None,
        text_keys: Sequence[str] | None = None,
        create: bool = True,
        prefetch_limit: int = 100,
        hnsw_ef: int | None = None,
        batch_size: int = 8,
        **server_options: Any,
    ) -> None:
        """Open or create the store (see the class docstring)."""
        if quantization not in (None, "int8", "binary"):
            raise InvalidInputError(f"quantization must be None, 'int8' or 'binary', got {quantization!r}")
        self._alpha = None if alpha is None else check_alpha(alpha)
        keys = None if text_keys is None else check_text_keys(text_keys)
        self._encoder = encoder
        self.static_encoder = static_encoder
        self.prefetch_limit = prefetch_limit
        self.hnsw_ef = hnsw_ef
        self.batch_size = batch_size
        self._opened: OpenedBackend = open_backend(path, url, api_key, client, location, collection, create,
                                                   server_options)
        self.where = self._opened.where
        try:
            meta = self._backend.read_meta()
            self.mode = resolve_mode(meta if isinstance(meta, dict) else None, mode, encoder, self.where)
            if self.mode == StoreMode.STATIC:
                self._encoder = static_store_encoder(meta, encoder, static_encoder)
                static_encoder = self.static_encoder = self._encoder.tokens
            if meta is None:
                alpha = DEFAULT_ALPHA if self._alpha is None else self._alpha
                self._meta = create_settings(self._backend, self.where, create, lambda: self.encoder, static_encoder,
                                             node_tokens or 256, True if bm25 is None else bm25, alpha, quantization,
                                             keys or [], self.mode)
            else:
                self._meta = check_settings(meta, self._backend, self.where, static_encoder, node_tokens, bm25, keys)
                if encoder is not None or self.mode == StoreMode.STATIC:
                    check_encoder(self._meta, self._encoder, self.where)
            self._vectors = StoreVectors.from_settings(self._meta, static_encoder, self.where)
            repaired = versions.repair(self._backend)
            if repaired:
                logger.warning("%s: repaired %d document(s) an interrupted write left pending", self.where, repaired)
        except BaseException:
            self.close()
            raise

    @property
    def _backend(self) -> Backend:
        return self._opened.backend

    @property
    def encoder(self) -> Any:
        """The landmark encoder; built on first use from the recorded settings (or the defaults)."""
        if self._encoder is None:
            from lmk_rag.encoder import LandmarkEncoder

            meta = getattr(self, "_meta", None)  # None while a new store is being created: the defaults
            self._encoder = LandmarkEncoder(**(meta["encoder"]["settings"] if meta else {}))
            if meta is not None:
                check_encoder(meta, self._encoder, self.where)
        return self._encoder

    @property
    def settings(self) -> dict[str, Any]:
        """The store's recorded settings (a copy)."""
        return dict(self._meta)

    @property
    def dim(self) -> int:
        """Size of the node vectors (and chunk vectors)."""
        return int(self._meta["encoder"]["dim"])

    @property
    def node_tokens(self) -> int:
        """Node size in tokens used when the store cuts documents."""
        return int(self._meta["node_tokens"])

    @property
    def bm25(self) -> bool:
        """Whether the store holds BM25 vectors (prefetched and fused into the final score)."""
        return bool(self._meta.get("bm25"))

    @property
    def alpha(self) -> float:
        """Weight of the rerank score in the final score: this handle's, else the recorded one."""
        if self._alpha is not None:
            return self._alpha
        return float(self._meta.get("alpha", DEFAULT_ALPHA if self.bm25 else 1.0))

    @property
    def default_rerank(self) -> Rerank:
        """The rerank of a search that names none: ``chunks``, or ``static`` in a static store."""
        return default_rerank(self.mode)

    @property
    def text_keys(self) -> list[str]:
        """The metadata keys indexed as full text (see the class docstring)."""
        return list(self._meta.get("text_keys", []))

    @property
    def backend(self) -> Backend:
        """The backend (for benchmarks and diagnostics)."""
        return self._backend

    # ------------------------------------------------------------------ writing

    def add_document(self, doc_id: str, text: str, metadata: dict[str, Any] | None = None) -> int:
        """Encode one document, cut it into nodes and write them (replacing an older version; an unchanged
        document is not written again).

        :return: the number of nodes written.
        :raises EmptyTextError: when the text is empty.
        """
        return self.add_documents([(doc_id, text, metadata)], show_progress_bar=False)

    def add_documents(
        self,
        documents: Iterable[Document],
        *,
        batch_size: int | None = None,
        show_progress_bar: bool | None = None,
        on_ack: Callable[[list[str]], None] | None = None,
        skip_unchanged: bool = True,
    ) -> int:
        """Encode, cut and write ``(doc_id, text, metadata)`` documents in batches, each durable before the next.

        :param batch_size: documents per batch (default: the store's ``batch_size``).
        :param show_progress_bar: show a tqdm bar (None: only on a terminal).
        :param on_ack: called with the doc ids of each batch once it is durable.
        :param skip_unchanged: leave out documents whose text and metadata the store already holds (by the content
            hash on their marker), without encoding them; False rewrites them.
        :return: the number of nodes written.
        :raises InvalidInputError: for a bad document or a doc id given twice.
        """
        docs = check_documents(documents)
        if skip_unchanged:
            changes = self.changes(docs)
            docs = [doc for doc in docs if changes[doc[0]] != "unchanged"]
        return add_in_batches(self.encoder, lambda writes: self._write(writes, on_ack), docs, self.node_tokens,
                              self._meta["encoder"]["fingerprint"], batch_size or self.batch_size, show_progress_bar)

    def changes(self, documents: Iterable[Document]) -> dict[str, str]:
        """What writing these documents would do to each: ``"new"``, ``"changed"`` or ``"unchanged"`` (same text,
        metadata and encoder as the stored version; documents written without a content hash count as changed)."""
        docs = check_documents(documents)
        recorded = versions.recorded_hashes(self._backend, [doc_id for doc_id, _, _ in docs])
        fingerprint = self._meta["encoder"]["fingerprint"]
        return {
            doc_id: "new" if doc_id not in recorded
            else "unchanged" if recorded[doc_id] == content_hash(text, metadata, fingerprint) else "changed"
            for doc_id, text, metadata in docs
        }

    def upsert_nodes(self, doc_id: str, records: Sequence[NodeRecord], metadata: dict[str, Any] | None = None) -> int:
        """Write pre-encoded nodes as the new version of a document, replacing its old nodes safely.

        :param doc_id: the document; every record's ``doc_id`` must equal it.
        :param records: the document's nodes (node ids unique).
        :param metadata: the document's metadata (default: the first record's).
        :return: the number of nodes written.
        :raises VectorSizeError: when a vector's size differs from the store's.
        """
        records = list(records)
        check_records(doc_id, records)
        meta = dict(metadata if metadata is not None else records[0].metadata)
        return self._write([versions.DocumentWrite(doc_id, records, meta)])

    def upsert_documents(
        self,
        documents: Iterable[tuple[str, Sequence[NodeRecord]]],
        *,
        batch_size: int = 64,
        on_ack: Callable[[list[str]], None] | None = None,
    ) -> int:
        """Write many pre-encoded ``(doc_id, records)`` documents, ``batch_size`` per write (as :meth:`upsert_nodes`;
        metadata from each document's first record), calling ``on_ack`` with each batch's ids once durable.

        :return: the number of nodes written.
        """
        return upsert_in_batches(lambda writes: self._write(writes, on_ack), documents, batch_size)

    def _write(self, writes: list[versions.DocumentWrite], on_ack: Callable[[list[str]], None] | None = None) -> int:
        """Write the documents as new versions (every record checked first), then acknowledge them."""
        written = versions.write_documents(self._backend, writes, self._vectors.points, self._vectors.check)
        if on_ack is not None:
            on_ack([write.doc_id for write in writes])
        return written

    def delete_document(self, doc_id: str) -> bool:
        """Delete a document and its nodes.

        :return: True if the document existed.
        """
        return versions.delete_document(self._backend, doc_id)

    def delete_nodes(self, node_ids: Sequence[str] | None = None, filter: FilterLike = None) -> int:
        """Delete nodes by id and/or metadata filter (both None: every node); a document left without nodes is
        deleted, the other documents keep the rest of their nodes.

        :param node_ids: node ids (an empty list deletes nothing).
        :param filter: metadata filter.
        :return: the number of nodes deleted.
        """
        if node_ids is None and filter is None:
            deleted = self.count()
            self.clear()
            return deleted
        return versions.delete_nodes(self._backend, versions.nodes_filter(self._backend, filter, node_ids))

    def clear(self) -> None:
        """Delete every document (the settings stay)."""
        versions.clear(self._backend)

    # ------------------------------------------------------------------ reading

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
        rerank = self.default_rerank if rerank is None else check_rerank(rerank)
        check_k(k)
        alpha = self.alpha if alpha is None else check_alpha(alpha)
        if alpha < 1.0 and not self.bm25:
            raise SettingsMismatchError(f"{self.where} has no BM25 vectors: alpha must be 1, got {alpha}")
        plan = plan_search(
            dense=[Branch("node", np.asarray(query.vector, dtype=np.float32).tolist())],
            scorer=self._vectors.scorer(rerank, query, static_query),
            sparse=self._vectors.sparse_query(text),
            alpha=alpha,
            prefetch_limit=prefetch_limit or max(self.prefetch_limit, 4 * k),
            filter=versions.nodes_filter(self._backend, filter),
            payload_keys=rec.HIT_KEYS,
            hnsw_ef=self.hnsw_ef,
        )
        results = self._backend.query(plan)
        shown = {p.id for p in versions.visible(self._backend, [p for points in results for p in points])}
        best = best_hits(fuse(plan, [[p for p in points if p.id in shown] for points in results], alpha), k, doc_level)
        full = {p.id: p for p in self._backend.retrieve([pid for pid, _ in best], False)}
        return [rec.hit_from_point(full[pid], score) for pid, score in best if pid in full]

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
        check_k(k)
        if isinstance(query, str):
            if not query.strip():
                raise InvalidInputError("query must be a non-empty string")
            query = self.encoder.encode_queries(query).vector
        vector = np.asarray(query, dtype=np.float32)
        if vector.shape != (self.dim,):
            raise VectorSizeError(f"query vector of shape {vector.shape}, store expects ({self.dim},)")
        plan = plan_mmr(vector.tolist(), lambda_, candidates or max(self.prefetch_limit, 4 * k), k,
                        versions.nodes_filter(self._backend, filter), rec.HIT_KEYS, self.hnsw_ef)
        (picked,) = self._backend.query(plan)
        shown = versions.visible(self._backend, picked)
        full = {p.id: p for p in self._backend.retrieve([p.id for p in shown], False)}
        return [rec.hit_from_point(full[p.id], p.score) for p in shown if p.id in full]

    def get_nodes(self, node_ids: Sequence[str] | None = None, filter: FilterLike = None) -> list[NodeRecord]:
        """Nodes by id and/or metadata filter, with their vectors (in no particular order)."""
        points = list(versions.scroll(self._backend, versions.nodes_filter(self._backend, filter, node_ids), with_vectors=True))
        return [rec.record_from_point(p) for p in versions.visible(self._backend, points)]

    def doc_ids(self) -> list[str]:
        """The ids of the stored documents, sorted."""
        return sorted(self.documents())

    def documents(self) -> dict[str, dict[str, Any]]:
        """Every stored document's metadata, by doc id."""
        markers = versions.scroll(self._backend, versions.documents_filter(self._backend), False)
        return {m.payload["doc_id"]: m.payload.get("meta") or {} for m in markers}

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

    def optimize(self) -> None:
        """Build indexes now (Qdrant Edge optimizes only when asked; servers do it on their own)."""
        self._backend.optimize()

    # ------------------------------------------------------------------ closing

    def close(self) -> None:
        """Flush and release the backend and the lock (idempotent)."""
        opened = getattr(self, "_opened", None)
        if opened is not None:
            opened.release()

    def __enter__(self) -> LandmarkStore:
        """Use as a context manager."""
        return self

    def __exit__(self, *exc: object) -> None:
        """Close on exit."""
        self.close()

    def __repr__(self) -> str:
        """Backend and location."""
        opened = getattr(self, "_opened", None)
        return f"LandmarkStore({opened.backend.name if opened else '?'}: {getattr(self, 'where', '?')})"
