"""``LandmarkStore``: landmark nodes in Qdrant (Edge in-process by default, or qdrant-client), two-stage search.

The store opens a backend (:mod:`~lmk_rag.store.backends`: folder checks, lock), reads or records its settings
(:mod:`~lmk_rag.store.settings`), and builds two collaborators over them, as ``QdrantClient`` builds its local or
remote client: a :class:`~lmk_rag.store.reads.Reader` (searches and look-ups) and a
:class:`~lmk_rag.store.writes.Writer` (writes and deletes through :mod:`~lmk_rag.store.writes`). Each public
method's arguments are documented here, and checked and given their defaults here, once; the method then makes one
call to one of the two with the resolved values.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import fields, replace
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from lmk_rag.checks import check_count, check_text
from lmk_rag.encoder.types import EncodedText
from lmk_rag.errors import InvalidInputError, SettingsMismatchError, refuse_unknown
from lmk_rag.nodes import DEFAULT_NODE_TOKENS
from lmk_rag.store import records as rec
from lmk_rag.store.backends import OpenedBackend, open_backend
from lmk_rag.store.base import Backend, IndexKind
from lmk_rag.store.bm25 import BM25_LANGUAGE, check_language
from lmk_rag.store.documents import Document, check_on_ack
from lmk_rag.store.filters import FilterLike
from lmk_rag.store.query import DEFAULT_ALPHA, check_alpha, check_depth, plan_search
from lmk_rag.store.reads import Reader
from lmk_rag.store.settings import (
    DEFAULT_OVERSAMPLING,
    add_payload_indexes,
    check_payload_indexes,
    check_settings,
    check_text_keys,
    create_settings,
    new_storage,
    recorded_storage,
    validate_settings,
)
from lmk_rag.store.store_encoder import StoreEncoder, check_encoder, resolve_mode, static_store_encoder
from lmk_rag.store.types import (
    DEFAULT_BATCH_SIZE,
    EncodedQuery,
    Hit,
    NodeRecord,
    Rerank,
    SearchOptions,
    ServerOptions,
    StorageOptions,
    StoreMode,
)
from lmk_rag.store.vectors import NodeVectors, QueryVectors, VectorSpec
from lmk_rag.store.writes import CommittedCounts, Writer, repair

if TYPE_CHECKING:  # pragma: no cover
    from lmk_rag.encoder.protocols import DocumentEncoder, TokenEncoder

logger = logging.getLogger(__name__)
T = TypeVar("T")
#: The constructor's option objects, by argument name (a flat option names its object).
OPTION_GROUPS = (("storage", StorageOptions), ("search", SearchOptions), ("server", ServerOptions))


class LandmarkStore:
    """Landmark nodes of documents in Qdrant, searched in two stages.

    Exactly one of ``path`` (Qdrant Edge folder; the default ``./lmk_store``), ``url`` (a Qdrant server),
    ``client`` (an existing ``QdrantClient``), ``location`` (qdrant-client local mode: ``":memory:"`` or a
    folder) or ``aclient`` alone (an ``AsyncQdrantClient`` in local mode) picks the backend. The qdrant-client
    arguments keep ``QdrantClient``'s and ``QdrantVectorStore``'s names and meanings.

    :param path: folder of an embedded Qdrant Edge store (created if missing); made absolute and resolved, as
        :attr:`where` and :meth:`info` show it.
    :param url: URL of a Qdrant server or cluster.
    :param api_key: API key for ``url``.
    :param client: an existing ``qdrant_client.QdrantClient``.
    :param aclient: a ``qdrant_client.AsyncQdrantClient`` for the async methods (``asearch``, ...), which then call
        it natively; beside ``client`` (the same server), or alone in local mode. Built from ``url`` when not given.
    :param location: qdrant-client local mode: ``":memory:"`` or a folder.
    :param collection_name: the collection on a qdrant-client backend (default ``"lmk_rag"``); an Edge store is
        its folder.
    :param encoder: the :class:`~lmk_rag.LandmarkEncoder`, or for a static store a
        :class:`~lmk_rag.StaticTokenEncoder` or :class:`~lmk_rag.static.document_encoder.StaticDocumentEncoder`; None
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
    :param text_keys: metadata keys a new store indexes as full text: a ``text`` filter on them matches word
        prefixes in any case (``"6FTR78Y"`` finds ``"6ftr78yun"``); on other keys it matches whole words. None = as
        recorded (none for new stores).
    :param payload_indexes: metadata keys to index for fast filtering, as ``QdrantVectorStore`` takes them:
        ``[{"field_name": "tenant", "field_schema": "keyword"}, ...]`` (keyword, integer, float, bool, datetime,
        uuid; ``"text"`` is a ``text_keys`` entry). Missing ones are added to an existing store and recorded.
    :param create: create the store when missing; False raises :class:`StoreError` instead.
    :param read_only: open to read only: no repair of interrupted writes (their half-written versions stay
        invisible), and every write raises :class:`StoreReadOnlyError`. An Edge folder another process holds (a
        writer, or the first reader) is read from a copy of this process's own, taken at the holder's last commit
        and taken again when it commits (see :meth:`refresh` and docs/store.md, "Concurrency"). A reader holding
        the folder hands it over to a writer that asks, and reads a copy from then on: readers never keep a
        writer out.
    :param batch_size: points per upsert request (one update operation on Edge).
    :param document_batch_size: documents encoded and written per batch by :meth:`upsert_documents`, each batch
        durable before the next.
    :param storage: how a new store holds its vectors (:class:`~lmk_rag.store.types.StorageOptions`: quantized
        copies, memory placement, HNSW ``m`` and ``ef_construct``); recorded, and checked against an existing store.
    :param search: how this handle searches (:class:`~lmk_rag.store.types.SearchOptions`: prefetch depth, HNSW
        ``ef``, oversampling, exact search).
    :param server: how a qdrant-client backend talks to Qdrant (:class:`~lmk_rag.store.types.ServerOptions`:
        gRPC, timeout, client arguments, shards and replicas of a new collection, parallel uploads, retries).
    :raises TypeError: for an argument this class does not take, naming the close ones.
    :raises InvalidInputError: for a bad value, qdrant-client options on an Edge store, or a folder path that is a
        file.
    :raises StoreLockedError: when another process holds the store and this one would write it (or cannot copy it
        to read it).
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
        text_keys: Sequence[str] | None = None,
        payload_indexes: Sequence[Mapping[str, Any]] | None = None,
        create: bool = True,
        read_only: bool = False,
        batch_size: int = DEFAULT_BATCH_SIZE,
        document_batch_size: int = 8,
        storage: StorageOptions | None = None,
        search: SearchOptions | None = None,
        server: ServerOptions | None = None,
        **unknown: Any,
    ) -> None:
        """Open or create the store (see the class docstring)."""
        for name, kind in OPTION_GROUPS:
            grouped = sorted(set(unknown) & {option.name for option in fields(kind)})
            if grouped:
                raise TypeError(f"LandmarkStore() takes {', '.join(grouped)} in {name}={kind.__name__}(...), e.g. "
                                f"{name}={kind.__name__}({grouped[0]}=...)")
        refuse_unknown("LandmarkStore()", unknown, set(inspect.signature(LandmarkStore).parameters) - {"unknown"})
        for (name, kind), given in zip(OPTION_GROUPS, (storage, search, server)):
            if given is not None and not isinstance(given, kind):
                raise InvalidInputError(f"{name} must be a {kind.__name__}, got {given!r}: e.g. "
                                        f"{name}={kind.__name__}(...)")
        storage = (storage or StorageOptions()).given()
        self._alpha = None if alpha is None else check_alpha(alpha)
        keys = None if text_keys is None else check_text_keys(text_keys)
        indexes = {} if payload_indexes is None else check_payload_indexes(payload_indexes)
        node_tokens = None if node_tokens is None else check_count("node_tokens", node_tokens)
        bm25_language = None if bm25_language is None else check_language(bm25_language)
        if bm25 is not None and not isinstance(bm25, bool):
            raise InvalidInputError(f"bm25 must be True, False or None (as recorded), got {bm25!r}")
        if bm25 is False and bm25_language is not None:
            raise InvalidInputError("bm25_language chooses BM25's stop words and stemmer: it needs bm25=True")
        for name, given in (("encoder", encoder), ("static_encoder", static_encoder)):
            if isinstance(given, (str, bytes, int, float, os.PathLike)):  # a model name or folder, not an encoder
                raise InvalidInputError(
                    f"{name} must be an encoder object, got {given!r}; pick a model with "
                    "encoder=LandmarkEncoder(model_name=...) (or StaticTokenEncoder for a static store)"
                )
        self._given_encoder = encoder
        self.static_encoder = static_encoder
        self.search_options = search or SearchOptions()
        self.document_batch_size = check_count("document_batch_size", document_batch_size)
        self.read_only = read_only
        create = create and not read_only  # a read-only open never creates anything, folder or collection
        self._opened: OpenedBackend = open_backend(path, url, api_key, client, aclient, location, collection_name,
                                                   create, server or ServerOptions(),
                                                   check_count("batch_size", batch_size), read_only)
        self.where = self._opened.where
        try:
            with self._opened.shared.changing():  # a reader in another process copies before or after, not during
                self._open(mode=mode, node_tokens=node_tokens, bm25=bm25, bm25_language=bm25_language,
                           storage=storage, keys=keys, indexes=indexes, create=create)
        except BaseException:
            self.close()
            raise

    def _open(self, mode: StoreMode | str | None, node_tokens: int | None, bm25: bool | None,
              bm25_language: str | None, storage: dict[str, Any], keys: list[str] | None,
              indexes: dict[str, IndexKind], create: bool) -> None:
        """Read or create the settings record, check it against the arguments, finish interrupted writes, and build
        the reader and the writer."""
        backend, where, read_only, given = self._backend, self.where, self.read_only, self._given_encoder
        shared = self._opened.shared  # another handle of this process may have this folder open: its record
        settings = shared.settings or backend.read_settings()
        settings = None if settings is None else validate_settings(settings, where)
        self.mode = resolve_mode(settings, mode, given, where)
        static_encoder = self.static_encoder
        if self.mode == StoreMode.STATIC:
            given = static_store_encoder(settings, given, static_encoder)
            static_encoder = self.static_encoder = given.token_encoder
        encoder = StoreEncoder(given, where, read_only)
        text_indexed = sorted(key for key, kind in indexes.items() if kind == "text")
        indexes = {key: kind for key, kind in indexes.items() if kind != "text"}
        if settings is None:
            alpha = DEFAULT_ALPHA if self._alpha is None else self._alpha
            settings = create_settings(backend, where, create, encoder.get, static_encoder,
                                   DEFAULT_NODE_TOKENS if node_tokens is None else node_tokens,
                                   True if bm25 is None else bm25, alpha,
                                   new_storage(storage),
                                   sorted(set(keys or []) | set(text_indexed)), self.mode,
                                   bm25_language or BM25_LANGUAGE, indexes)
        else:
            settings = check_settings(settings, backend, where, static_encoder, node_tokens, bm25, keys, bm25_language,
                                      storage)
            undeclared = sorted(set(text_indexed) - set(settings.get("text_keys", [])))
            if undeclared:
                raise SettingsMismatchError(
                    f"{where} indexes the metadata keys {settings.get('text_keys', [])} as full text, given "
                    f"text payload indexes on {undeclared}: text indexes are declared when a store is created"
                )
            add_payload_indexes(backend, settings, indexes, where, read_only)
            if given is not None:
                check_encoder(settings, given, where)
        quantized = recorded_storage(settings).node_quantized
        if self.search_options.oversampling is not None and not quantized:
            raise InvalidInputError(
                f"oversampling applies to quantized node vectors, and {where} keeps none: create the store with "
                "node_quantization='int8' (or another kind), or drop oversampling"
            )
        if quantized and self.search_options.oversampling is None:
            self.search_options = replace(self.search_options, oversampling=DEFAULT_OVERSAMPLING)
        self._settings = encoder.settings = settings
        self._encoders = encoder
        spec = VectorSpec.from_settings(settings, where)
        repaired = 0 if read_only else repair(backend)
        if repaired:
            logger.warning("%s: repaired %d document(s) an interrupted write left pending", where, repaired)
        if shared.committed_counts is None:
            shared.settings, shared.committed_counts = settings, CommittedCounts(backend, settings, where)
        counts = shared.committed_counts
        if read_only and backend.count(rec.pending_filter(backend)):
            # a reader cannot finish an interrupted write: its counts are between two states until a writer opens
            logger.warning("%s: a write was interrupted; the next writer's open finishes or undoes it", where)
        else:
            counts.verify(fix=not read_only)
        self._reads = Reader(backend, where, settings, QueryVectors(spec, static_encoder), encoder, counts.current,
                             self.mode, self.search_options, self._alpha, shared.access)
        self._writer = Writer(backend, where, settings, NodeVectors(spec, static_encoder), counts, encoder, read_only,
                              shared.write_lock, shared.access)

    @property
    def _backend(self) -> Backend:
        return self._opened.backend

    @property
    def _reader(self) -> Reader:
        """The reader, after :meth:`refresh` where the store reads a copy (elsewhere it is always current)."""
        if self._opened.copied:
            self._opened.refresh()
        return self._reads

    def refresh(self) -> bool:
        """Read what the store's holder last committed. A read-only store another process holds is read from a
        copy of this process's own, taken when it was opened: this takes a new copy when the holder committed since
        (every search and look-up does this first). Elsewhere the store is always current.

        :return: True when a new copy is read from now on.
        :raises StoreFullError: when the disk has no room for the new copy (the old one is still read).
        """
        return self._opened.refresh()

    @property
    def encoder(self) -> DocumentEncoder:
        """The landmark encoder; built on first use from the recorded settings (or the defaults)."""
        return self._encoders.get()

    @property
    def settings(self) -> dict[str, Any]:
        """The store's recorded settings (a copy)."""
        return dict(self._settings)

    @property
    def dim(self) -> int:
        """Size of the node vectors (and chunk vectors)."""
        return int(self._settings["encoder"]["dim"])

    @property
    def node_tokens(self) -> int:
        """Node size in tokens used when the store cuts documents."""
        return int(self._settings["node_tokens"])

    @property
    def bm25(self) -> bool:
        """Whether the store holds BM25 vectors (prefetched and fused into the final score)."""
        return bool(self._settings.get("bm25"))

    @property
    def alpha(self) -> float:
        """Weight of the rerank score in the final score: this handle's, else the recorded one."""
        return self._reader.defaults.alpha

    @property
    def document_weight(self) -> float:
        """The document cosine's share of the chunk rerank's score: :data:`~lmk_rag.store.query.DOCUMENT_WEIGHT`
        in a store of whole documents, 0 in one of unrelated texts glued together, between the two in a mix
        (:func:`~lmk_rag.store.query.document_weight`, measured on a sample of the stored nodes; 0 in a static
        store), or this handle's ``search=SearchOptions(document_weight=...)``. A search with ``rerank="chunks"``
        scores its dense side as ``(1 - document_weight) * chunk MaxSim + document_weight * document cosine``."""
        with self._reader.access.reading():
            return self._reader.document_weight()

    @property
    def default_rerank(self) -> Rerank:
        """The rerank of a search that names none: ``chunks``, or ``static`` in a static store."""
        return self._reader.defaults.rerank

    @property
    def text_keys(self) -> list[str]:
        """The metadata keys indexed as full text (see the class docstring)."""
        return list(self._settings.get("text_keys", []))

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

    # ------------------------------------------------------------------ reads

    def search(
        self,
        query: str,
        k: int = 10,
        rerank: Rerank | str | None = None,
        filter: FilterLike = None,
        one_per_document: bool = True,
        alpha: float | None = None,
    ) -> list[Hit]:
        """Encode a query once and search in two stages (see :meth:`search_encoded`).

        :param query: the query text.
        :param rerank: ``"chunks"`` (MaxSim over chunk vectors), ``"static"`` (static token MaxSim) or ``"node"``
            (the node vector's cosine); None: the store's :attr:`default_rerank`.
        :return: hits, best first.
        :raises InvalidInputError: for a query that is not a str.
        :raises EmptyTextError: for an empty or whitespace-only query.
        """
        check_text(query, "query")
        reader = self._reader
        return reader.search(plan_search(reader.defaults, k=k, rerank=rerank, alpha=alpha, filter=filter,
                                         one_per_document=one_per_document, text=query))

    def search_encoded(
        self,
        query: EncodedQuery | EncodedText,
        k: int = 10,
        rerank: Rerank | str | None = None,
        filter: FilterLike = None,
        one_per_document: bool = True,
        alpha: float | None = None,
        prefetch_limit: int | None = None,
    ) -> list[Hit]:
        """Search with an already encoded query in one Query API call (on Qdrant Edge, its BM25 search first, so
        that it runs once; where this process is the store's only writer, the hits' payloads are read by id after
        ranking: docs/store.md, "Search"); candidates are ranked by
        ``alpha * rerank + (1 - alpha) * bm25`` (see :mod:`lmk_rag.store.query`).

        :param query: an :class:`~lmk_rag.store.EncodedQuery`: its vectors (``.vector`` (dim,), ``.chunk_vectors``
            (q, dim)), its text for BM25 (None ranks by the rerank alone) and its static token vectors, (q,
            static_dim), needed for ``"static"`` (``EncodedQuery.of(store.encoder.encode_queries(text), text)``); or
            the encoder's :class:`~lmk_rag.EncodedText` alone, a query without text.
        :param k: hits returned.
        :param rerank: ``"chunks"``, ``"static"`` or ``"node"`` (the node vector's cosine); None: the store's
            :attr:`default_rerank`.
        :param filter: metadata filter.
        :param one_per_document: at most one hit (the best node) per document.
        :param alpha: weight of the rerank score in [0, 1] (None: the store's :attr:`alpha`, moved toward the rerank
            for a query text asked as a question: :func:`~lmk_rag.store.query.query_alpha`).
        :param prefetch_limit: candidates per prefetch branch (None: the store's, at least ``4 * k``).
        :return: hits, best first; scores lie in [-1, 1].
        :raises InvalidInputError: for a query that is neither.
        :raises SettingsMismatchError: for ``alpha`` < 1 on a store without BM25.
        """
        if isinstance(query, EncodedText):
            query = EncodedQuery(query.vector, query.chunk_vectors)
        if not isinstance(query, EncodedQuery):
            raise InvalidInputError(
                f"search_encoded takes an EncodedQuery (EncodedQuery.of(store.encoder.encode_queries(text), text)), "
                f"got {query!r}; search a text with search()"
            )
        if query.text is not None and not isinstance(query.text, str):
            raise InvalidInputError(f"an EncodedQuery's text must be the query's text (a string) or None, got "
                                    f"{query.text!r}")
        reader = self._reader
        return reader.search(plan_search(reader.defaults, k=k, rerank=rerank, alpha=alpha, filter=filter,
                                         one_per_document=one_per_document, text=query.text,
                                         prefetch_limit=prefetch_limit), query)

    def search_vector(
        self, vector: Sequence[float] | np.ndarray, k: int = 10, filter: FilterLike = None,
        one_per_document: bool = True,
    ) -> list[Hit]:
        """Search by a query vector made outside the store (a LlamaIndex ``query_embedding``): the nodes whose
        vectors are nearest to it, scored by that cosine alone (no rerank, no BM25; see :meth:`search_encoded`).

        :param vector: the query vector, shape (dim,).
        :param k: hits returned.
        :param filter: metadata filter.
        :param one_per_document: at most one hit (the best node) per document.
        :return: hits, best first; scores lie in [-1, 1].
        """
        reader = self._reader
        plan = plan_search(reader.defaults, k=k, rerank=Rerank.NODE, filter=filter, one_per_document=one_per_document)
        vector = np.asarray(vector, dtype=np.float32)
        return reader.search(plan, EncodedQuery(vector, vector.reshape(1, -1)))

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
        reader = self._reader
        return reader.search_mmr(query, k, lambda_, filter,
                                 check_depth(k, candidates, "candidates", reader.options.prefetch_limit))

    def get_nodes(self, node_ids: Sequence[str] | None = None, filter: FilterLike = None) -> list[NodeRecord]:
        """Nodes by id and/or metadata filter, with their vectors (in no particular order)."""
        return self._reader.get_nodes(node_ids, filter)

    def doc_ids(self) -> list[str]:
        """The ids of the stored documents, sorted."""
        return self._reader.doc_ids()

    def documents(self) -> dict[str, dict[str, Any]]:
        """Every stored document's metadata, by doc id."""
        return self._reader.documents()

    def sources(self) -> dict[str, str]:
        """The file each document was read from, by doc id, for the documents written with one
        (``upsert_documents(..., sources=...)``, as ``lmk-rag ingest`` does)."""
        return self._reader.sources()

    def count(self) -> int:
        """The number of stored nodes."""
        return self._reader.count()

    def count_documents(self) -> int:
        """The number of stored documents."""
        return self._reader.count_documents()

    def info(self) -> dict[str, Any]:
        """Where the store is, its counts and recorded settings (JSON-able)."""
        return self._reader.info()

    def check(self) -> list[str]:
        """Read every point and list what is wrong (empty: the store is sound): interrupted writes, nodes without a
        current document version, damaged vectors, node counts that differ from their documents' records, and
        committed counts that differ from what the engine holds."""
        return self._reader.check()


    # ------------------------------------------------------------------ writes
    # One verb, upsert, as Qdrant means it: insert, or replace what has the same id. The unit in the name is what is
    # replaced whole: a document (by doc id: its old nodes dropped), or a node (by node id: its document keeps its
    # other nodes). ``encoded``: given as node records, with their vectors, instead of texts the store encodes.

    def upsert_document(self, doc_id: str, text: str, metadata: dict[str, Any] | None = None) -> int:
        """Encode one document, cut it into nodes and write them as the document's new version, replacing its stored
        nodes (an unchanged document is not written again).

        :return: the number of nodes written.
        :raises EmptyTextError: when the text is empty.
        """
        return self.upsert_documents([(doc_id, text, metadata)], show_progress_bar=False)

    def upsert_documents(
        self,
        documents: Iterable[Document],
        *,
        document_batch_size: int | None = None,
        show_progress_bar: bool | None = None,
        on_ack: Callable[[list[str]], None] | None = None,
        skip_unchanged: bool = True,
        sources: Mapping[str, str] | None = None,
    ) -> int:
        """Encode, cut and write ``(doc_id, text, metadata)`` documents (or ``(doc_id, text)``: no metadata) in
        batches, each durable before the next; each replaces the stored version of its document (by doc id).

        :param document_batch_size: documents per batch (default: the store's ``document_batch_size``).
        :param show_progress_bar: show a tqdm bar in documents, and under it the encoder's bar in tokens for the
            batch being encoded, which a long document moves too (None: only on a terminal).
        :param on_ack: called with the doc ids of each batch once it is durable.
        :param skip_unchanged: leave out documents whose text and metadata the store already holds (by the content
            hash on their marker), without encoding them; False rewrites them.
        :param sources: ``{doc_id: file}``: the file each document was read from, recorded on its marker apart
            from its metadata (an unchanged document gets it too, without being rewritten); :meth:`sources` lists
            them. ``lmk-rag ingest --sync`` deletes only documents it recorded a source for.
        :return: the number of nodes written.
        :raises InvalidInputError: for a bad document, a doc id given twice, a ``document_batch_size`` that is not a
            positive integer or an ``on_ack`` that is not callable (nothing is written then).
        """
        batch_size = (self.document_batch_size if document_batch_size is None
                      else check_count("document_batch_size", document_batch_size))
        check_on_ack(on_ack)
        return self._writer.upsert_documents(documents, batch_size, show_progress_bar, on_ack, skip_unchanged,
                                             sources)

    def changes(self, documents: Iterable[Document]) -> dict[str, str]:
        """What writing these documents would do to each: ``"new"``, ``"changed"`` or ``"unchanged"`` (same text,
        metadata and encoder as the stored version; documents written without a content hash count as changed)."""
        return self._writer.changes(documents)

    def upsert_encoded_document(self, doc_id: str, records: Sequence[NodeRecord],
                                metadata: dict[str, Any] | None = None) -> int:
        """Write pre-encoded nodes as the new version of a document, replacing all its stored nodes safely.

        :param doc_id: the document; every record's ``doc_id`` must equal it.
        :param records: the document's nodes (node ids unique; ``chunk_vectors`` None: encoded by the store, as
            :meth:`upsert_nodes` does).
        :param metadata: the document's metadata (default: the first record's).
        :return: the number of nodes written.
        :raises VectorSizeError: when a vector's size differs from the store's.
        """
        return self._writer.upsert_encoded_document(doc_id, records, metadata)

    def upsert_encoded_documents(
        self,
        documents: Iterable[tuple[str, Sequence[NodeRecord]]],
        *,
        document_batch_size: int = 64,
        on_ack: Callable[[list[str]], None] | None = None,
    ) -> int:
        """Write many pre-encoded ``(doc_id, records)`` documents, ``document_batch_size`` per write, each replacing
        its stored version (as :meth:`upsert_encoded_document`; metadata from each document's first record), calling
        ``on_ack`` with each batch's ids once durable.

        :return: the number of nodes written.
        :raises InvalidInputError: for bad records, a ``document_batch_size`` that is not a positive integer or an
            ``on_ack`` that is not callable.
        """
        batch_size = check_count("document_batch_size", document_batch_size)
        check_on_ack(on_ack)
        return self._writer.upsert_encoded_documents(documents, batch_size, on_ack)

    def upsert_nodes(self, records: Sequence[NodeRecord]) -> int:
        """Write pre-encoded nodes into their documents, each replacing the stored node of its node id and keeping
        the document's other stored nodes (where :meth:`upsert_encoded_document` replaces a whole document). A node
        id stored under another document moves: that document keeps its other nodes. Each document given is written
        as one new version (its kept nodes and the new ones), committed as :meth:`upsert_encoded_document` commits
        it; nodes moving between documents leave their old ones first, in a change of their own.

        :param records: nodes of any documents (node ids unique); a record's ``chunk_vectors`` may be None: the
            store's encoder encodes them from the texts (the records of a document that tile it from its start as
            the document, see :func:`~lmk_rag.store.documents.fill_chunk_vectors`).
        :return: the number of nodes written, kept nodes included.
        :raises InvalidInputError: for records that are not :class:`NodeRecord` s, a node id given twice, or a bad
            record.
        :raises VectorSizeError: when a vector's size differs from the store's.
        :raises StoreReadOnlyError: for a store opened ``read_only``.
        """
        return self._writer.upsert_nodes(records)

    def delete_document(self, doc_id: str) -> bool:
        """Delete a document and its nodes.

        :return: True if the document existed.
        :raises InvalidInputError: for a doc id that is not a non-empty string.
        """
        return self._writer.delete_document(doc_id)

    def delete_nodes(self, node_ids: Sequence[str] | None = None, filter: FilterLike = None) -> int:
        """Delete nodes by id and/or metadata filter (both None: every node); a document left without nodes is
        deleted, the other documents keep the rest of their nodes.

        :param node_ids: node ids (an empty list deletes nothing).
        :param filter: metadata filter.
        :return: the number of nodes deleted.
        :raises InvalidInputError: when ``node_ids`` is not a list of strings (before anything is recorded).
        """
        return self._writer.delete_nodes(node_ids, filter)

    def clear(self) -> None:
        """Delete every document (the settings stay)."""
        return self._writer.clear()

    def optimize(self) -> None:
        """Build indexes now (Qdrant Edge optimizes only when asked; servers do it on their own)."""
        return self._writer.optimize()

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

    async def aupsert_documents(self, documents: Iterable[Document], **kwargs: Any) -> int:
        """:meth:`upsert_documents`, awaitable (see :meth:`call_async`)."""
        return await self.call_async(self.upsert_documents, documents, **kwargs)

    async def aget_nodes(self, node_ids: Sequence[str] | None = None, filter: FilterLike = None) -> list[NodeRecord]:
        """:meth:`get_nodes`, awaitable (see :meth:`call_async`)."""
        return await self.call_async(self.get_nodes, node_ids, filter)

    async def adelete_document(self, doc_id: str) -> bool:
        """:meth:`delete_document`, awaitable (see :meth:`call_async`)."""
        return await self.call_async(self.delete_document, doc_id)

    # ------------------------------------------------------------------ closing

    def close(self) -> None:
        """Flush and release the backend and the lock (idempotent); later calls raise :class:`StoreClosedError`."""
        opened = getattr(self, "_opened", None)
        if opened is not None:
            opened.release()
            self._reads = self._writer = opened.backend  # a ClosedBackend now: any use raises

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
