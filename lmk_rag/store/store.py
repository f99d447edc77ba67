"""``LandmarkStore``: landmark nodes in Qdrant (Edge in-process by default, or qdrant-client), two-stage search.

A short facade over modules with one job each: :mod:`~lmk_rag.store.backends` opens the backend (folder checks,
lock), :mod:`~lmk_rag.store.settings` records and checks how the vectors were made, :mod:`~lmk_rag.store.points`
builds node points with every vector, :mod:`~lmk_rag.store.versions` writes and deletes documents so that none is
ever lost or doubled, :mod:`~lmk_rag.store.query` plans a search and fuses its scores. The class itself opens the
store and holds its settings; :class:`~lmk_rag.store.writes.StoreWrites` (writes and deletes) and
:class:`~lmk_rag.store.reads.StoreReads` (searches and look-ups) are its two halves.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from lmk_rag.checks import check_count, refuse_unknown
from lmk_rag.errors import CorruptStoreError, InvalidInputError, SettingsMismatchError
from lmk_rag.nodes import DEFAULT_NODE_TOKENS
from lmk_rag.store import versions
from lmk_rag.store.backends import OpenedBackend, open_backend
from lmk_rag.store.base import Backend, IndexKind
from lmk_rag.store.bm25 import BM25_LANGUAGE, check_language
from lmk_rag.store.filters import FilterLike
from lmk_rag.store.ingest import Document
from lmk_rag.store.ledger import Ledger
from lmk_rag.store.modes import default_rerank, resolve_mode, static_store_encoder
from lmk_rag.store.points import StoreVectors
from lmk_rag.store.query import DEFAULT_ALPHA, check_alpha
from lmk_rag.store.reads import StoreReads
from lmk_rag.store.settings import (
    add_payload_indexes,
    check_encoder,
    check_payload_indexes,
    check_settings,
    check_text_keys,
    create_settings,
    validate_meta,
)
from lmk_rag.store.types import DEFAULT_BATCH_SIZE, Hit, NodeRecord, Quantization, Rerank, ServerOptions, StoreMode
from lmk_rag.store.writes import StoreWrites

if TYPE_CHECKING:  # pragma: no cover
    from lmk_rag.encoder.protocols import DocumentEncoder, TokenEncoder

logger = logging.getLogger(__name__)
T = TypeVar("T")


class LandmarkStore(StoreReads, StoreWrites):
    """Landmark nodes of documents in Qdrant, searched in two stages.

    Exactly one of ``path`` (Qdrant Edge folder; the default ``./lmk_store``), ``url`` (a Qdrant server),
    ``client`` (an existing ``QdrantClient``), ``location`` (qdrant-client local mode: ``":memory:"`` or a
    folder) or ``aclient`` alone (an ``AsyncQdrantClient`` in local mode) picks the backend. The qdrant-client
    arguments keep ``QdrantClient``'s and ``QdrantVectorStore``'s names and meanings.

    :param path: folder of an embedded Qdrant Edge store (created if missing).
    :param url: URL of a Qdrant server or cluster.
    :param api_key: API key for ``url``.
    :param client: an existing ``qdrant_client.QdrantClient``.
    :param aclient: a ``qdrant_client.AsyncQdrantClient`` for the async methods (``asearch``, ...), which then call
        it natively; beside ``client`` (the same server), or alone in local mode. Built from ``url`` when not given.
    :param location: qdrant-client local mode: ``":memory:"`` or a folder.
    :param collection_name: the collection on a qdrant-client backend (default ``"lmk_rag"``); an Edge store is
        its folder.
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
    :param bm25: store a BM25 sparse vector per node, used in the prefetch and fused into the final score;
        None = as recorded (on for new stores, see docs/decisions.md).
    :param bm25_language: the language of BM25's stop words and stemmer for a new store (``"english"``,
        ``"german"``, ... :func:`~lmk_rag.store.bm25.bm25_languages`); None = as recorded (English for new stores).
    :param alpha: weight of the rerank score against BM25 in the final score, in [0, 1] (1 = rerank alone, 0 =
        BM25 alone). None = as recorded (:data:`~lmk_rag.store.query.DEFAULT_ALPHA` for new stores); a value
        given for a new store is recorded, for an existing one it applies to this handle. ``search`` may override it.
    :param quantization: ``"int8"`` or ``"binary"`` quantization of the multivectors of a new store.
    :param text_keys: metadata keys a new store indexes as full text: a ``text`` filter on them matches word
        prefixes in any case (``"6FTR78Y"`` finds ``"6ftr78yun"``); on other keys it matches whole words. None = as
        recorded (none for new stores).
    :param payload_indexes: metadata keys to index for fast filtering, as ``QdrantVectorStore`` takes them:
        ``[{"field_name": "tenant", "field_schema": "keyword"}, ...]`` (keyword, integer, float, bool, datetime,
        uuid; ``"text"`` is a ``text_keys`` entry). Missing ones are added to an existing store and recorded.
    :param create: create the store when missing; False raises :class:`StoreError` instead.
    :param read_only: open to read only: no write lock, no repair of interrupted writes (their half-written
        versions stay invisible), and every write raises :class:`StoreReadOnlyError`.
    :param prefetch_limit: candidates per prefetch branch (at least ``4 * k``).
    :param hnsw_ef: HNSW ``ef`` of the dense prefetch (None: Qdrant's default).
    :param batch_size: points per upsert request (one update operation on Edge).
    :param document_batch_size: documents encoded and written per batch by :meth:`add_documents`, each batch
        durable before the next.
    :param prefer_grpc: use gRPC for calls to ``url``.
    :param timeout: request timeout in seconds for ``url``.
    :param client_kwargs: other arguments of the ``QdrantClient`` (and ``AsyncQdrantClient``) built for ``url`` or
        ``location``.
    :param shard_number: shards of a new collection on a cluster.
    :param replication_factor: copies of each shard of a new collection.
    :param write_consistency_factor: replicas that must confirm a write, for a new collection.
    :param parallel: processes uploading points to a server (``upload_points``); default 1.
    :param max_retries: times a failed upsert request to a server is sent again (default 3).
    :raises TypeError: for an argument this class does not take, naming the close ones.
    :raises InvalidInputError: for a bad value, or qdrant-client options on an Edge store.
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
        aclient: Any = None,
        location: str | None = None,
        collection_name: str | None = None,
        encoder: DocumentEncoder | TokenEncoder | None = None,
        static_encoder: TokenEncoder | None = None,
        mode: StoreMode | str | None = None,
        node_tokens: int | None = None,
        bm25: bool | None = None,
        bm25_language: str | None = None,
        alpha: float | None = None,
        quantization: Quantization | None = None,
        text_keys: Sequence[str] | None = None,
        payload_indexes: Sequence[Mapping[str, Any]] | None = None,
        create: bool = True,
        read_only: bool = False,
        prefetch_limit: int = 100,
        hnsw_ef: int | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        document_batch_size: int = 8,
        prefer_grpc: bool | None = None,
        timeout: int | None = None,
        client_kwargs: Mapping[str, Any] | None = None,
        shard_number: int | None = None,
        replication_factor: int | None = None,
        write_consistency_factor: int | None = None,
        parallel: int | None = None,
        max_retries: int | None = None,
        **unknown: Any,
    ) -> None:
        """Open or create the store (see the class docstring)."""
        refuse_unknown("LandmarkStore()", unknown, set(inspect.signature(LandmarkStore).parameters) - {"unknown"})
        if quantization not in (None, "int8", "binary"):
            raise InvalidInputError(f"quantization must be None, 'int8' or 'binary', got {quantization!r}")
        self._alpha = None if alpha is None else check_alpha(alpha)
        keys = None if text_keys is None else check_text_keys(text_keys)
        indexes = {} if payload_indexes is None else check_payload_indexes(payload_indexes)
        node_tokens = None if node_tokens is None else check_count("node_tokens", node_tokens)
        bm25_language = None if bm25_language is None else check_language(bm25_language)
        if bm25 is False and bm25_language is not None:
            raise InvalidInputError("bm25_language chooses BM25's stop words and stemmer: it needs bm25=True")
        for name, given in (("encoder", encoder), ("static_encoder", static_encoder)):
            if isinstance(given, (str, bytes, int, float, os.PathLike)):  # a model name or folder, not an encoder
                raise InvalidInputError(
                    f"{name} must be an encoder object, got {given!r}; pick a model with "
                    "encoder=LandmarkEncoder(model_name=...) (or StaticTokenEncoder for a static store)"
                )
        self._encoder = encoder
        self.static_encoder = static_encoder
        self.prefetch_limit = check_count("prefetch_limit", prefetch_limit)
        self.hnsw_ef = None if hnsw_ef is None else check_count("hnsw_ef", hnsw_ef)
        self.document_batch_size = check_count("document_batch_size", document_batch_size)
        self.read_only = read_only
        create = create and not read_only  # a read-only open never creates anything, folder or collection
        options = ServerOptions(aclient, prefer_grpc, timeout, client_kwargs, shard_number, replication_factor,
                                write_consistency_factor, parallel, max_retries)
        self._opened: OpenedBackend = open_backend(path, url, api_key, client, location, collection_name, create,
                                                   options, check_count("batch_size", batch_size), read_only)
        self.where = self._opened.where
        try:
            self._open(mode=mode, node_tokens=node_tokens, bm25=bm25, bm25_language=bm25_language,
                       quantization=quantization, keys=keys, indexes=indexes, create=create)
        except BaseException:
            self.close()
            raise

    def _open(self, mode: StoreMode | str | None, node_tokens: int | None, bm25: bool | None,
              bm25_language: str | None, quantization: Quantization | None, keys: list[str] | None,
              indexes: dict[str, IndexKind], create: bool) -> None:
        """Read or create the settings record, check it against the arguments, finish interrupted writes."""
        encoder, static_encoder, read_only = self._encoder, self.static_encoder, self.read_only
        meta = self._backend.read_meta()
        meta = None if meta is None else validate_meta(meta, self.where)
        self.mode = resolve_mode(meta, mode, encoder, self.where)
        if self.mode == StoreMode.STATIC:
            self._encoder = static_store_encoder(meta, encoder, static_encoder)
            static_encoder = self.static_encoder = self._encoder.tokens
        text_indexed = sorted(key for key, kind in indexes.items() if kind == "text")
        indexes = {key: kind for key, kind in indexes.items() if kind != "text"}
        if meta is None:
            alpha = DEFAULT_ALPHA if self._alpha is None else self._alpha
            self._meta = create_settings(self._backend, self.where, create, lambda: self.encoder, static_encoder,
                                         DEFAULT_NODE_TOKENS if node_tokens is None else node_tokens,
                                         True if bm25 is None else bm25, alpha,
                                         quantization, sorted(set(keys or []) | set(text_indexed)), self.mode,
                                         bm25_language or BM25_LANGUAGE, indexes)
        else:
            self._meta = check_settings(meta, self._backend, self.where, static_encoder, node_tokens, bm25, keys,
                                        bm25_language)
            undeclared = sorted(set(text_indexed) - set(self._meta.get("text_keys", [])))
            if undeclared:
                raise SettingsMismatchError(
                    f"{self.where} indexes the metadata keys {self._meta.get('text_keys', [])} as full text, given "
                    f"text payload indexes on {undeclared}: text indexes are declared when a store is created"
                )
            self._meta = add_payload_indexes(self._backend, self._meta, indexes, self.where, read_only)
            if encoder is not None or self.mode == StoreMode.STATIC:
                check_encoder(self._meta, self._encoder, self.where)
        self._vectors = StoreVectors.from_settings(self._meta, static_encoder, self.where)
        repaired = 0 if read_only else versions.repair(self._backend)
        if repaired:
            logger.warning("%s: repaired %d document(s) an interrupted write left pending", self.where, repaired)
        self._ledger = Ledger(self._backend, self._meta, lambda: (self.count_documents(), self.count()), self.where)
        if read_only and self._backend.count(versions.pending_filter(self._backend)):
            # a reader cannot finish an interrupted write: its counts are between two states until a writer opens
            logger.warning("%s: a write was interrupted; the next writer's open finishes or undoes it", self.where)
        else:
            self._ledger.verify(fix=not read_only)

    @property
    def _backend(self) -> Backend:
        return self._opened.backend

    @property
    def encoder(self) -> DocumentEncoder:
        """The landmark encoder; built on first use from the recorded settings (or the defaults)."""
        if self._encoder is None:
            from lmk_rag.encoder import LandmarkEncoder

            meta = getattr(self, "_meta", None)  # None while a new store is being created: the defaults
            settings = meta["encoder"]["settings"] if meta else {}
            try:
                self._encoder = LandmarkEncoder(**settings)
            except TypeError as error:  # a setting this version does not know: an edited or newer record
                raise CorruptStoreError(
                    f"{self.where}: the settings record names encoder settings this lmk-rag does not take ({error}); "
                    "restore the record, upgrade lmk-rag, or re-ingest into a new store"
                ) from None
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

    @property
    def collection_name(self) -> str | None:
        """The collection on a qdrant-client backend; None on Edge (the store is its folder)."""
        return getattr(self._backend, "collection", None)

    @property
    def client(self) -> Any:
        """The ``QdrantClient`` of a qdrant-client store; None on Edge or with an async client alone."""
        return getattr(self._backend, "client", None)

    @property
    def aclient(self) -> Any:
        """The ``AsyncQdrantClient`` the async methods call; None on Edge and beside a ``client`` given alone."""
        return getattr(self._backend, "aclient", None)

    # ------------------------------------------------------------------ async

    async def call_async(self, function: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """Run ``function`` (which uses this store) in a worker thread without blocking the event loop; with an
        :attr:`aclient`, every engine call it makes is that client's coroutine, awaited on the running loop (the
        same request as the sync call). The async methods below are this over their sync twins.

        :return: what ``function`` returns.
        """
        loop = asyncio.get_running_loop()

        def run() -> T:
            with self._backend.async_transport(loop):
                return function(*args, **kwargs)

        return await asyncio.to_thread(run)

    async def asearch(self, query: str, k: int = 10, **kwargs: Any) -> list[Hit]:
        """:meth:`search`, awaitable (see :meth:`call_async`)."""
        return await self.call_async(self.search, query, k, **kwargs)

    async def aadd_documents(self, documents: Iterable[Document], **kwargs: Any) -> int:
        """:meth:`add_documents`, awaitable (see :meth:`call_async`)."""
        return await self.call_async(self.add_documents, documents, **kwargs)

    async def aget_nodes(self, node_ids: Sequence[str] | None = None, filter: FilterLike = None) -> list[NodeRecord]:
        """:meth:`get_nodes`, awaitable (see :meth:`call_async`)."""
        return await self.call_async(self.get_nodes, node_ids, filter)

    async def adelete_document(self, doc_id: str) -> bool:
        """:meth:`delete_document`, awaitable (see :meth:`call_async`)."""
        return await self.call_async(self.delete_document, doc_id)

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
