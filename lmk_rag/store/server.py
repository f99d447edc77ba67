"""qdrant-client backend: a Qdrant server or cluster, or qdrant-client local mode. The only module
importing ``qdrant_client``.

The request builders (:func:`client_kwargs`, :func:`create_collection_request`,
:func:`upload_request`, :func:`query_requests`) are pure functions, so the pass-through settings
(shards, replication, gRPC, parallel upload) are testable without a server.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import importlib.metadata
import inspect
import logging
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np
from qdrant_client import AsyncQdrantClient, QdrantClient, models
from qdrant_client.common.version_check import is_compatible
from qdrant_client.http.exceptions import ApiException
from qdrant_client.local.async_qdrant_local import AsyncQdrantLocal
from qdrant_client.local.qdrant_local import QdrantLocal

from lmk_rag.checks import check_count
from lmk_rag.errors import CorruptStoreError, InvalidInputError, StoreUnavailableError, VectorSizeError
from lmk_rag.store.base import Backend, IndexKind
from lmk_rag.store.engine_errors import Guarded
from lmk_rag.store.filters import ConditionBuilder
from lmk_rag.store.records import SETTINGS_POINT_ID, STORE, vector_layout
from lmk_rag.store.types import (
    Branch,
    CollectionSpec,
    Constant,
    Expression,
    Ln,
    PayloadValue,
    PointData,
    Quantization,
    QueryPlan,
    Score,
    ScoredPointData,
    SearchOptions,
    ServerOptions,
    SparseVector,
    Sum,
)

logger = logging.getLogger(__name__)

_INDEX_TYPES = {
    "keyword": models.PayloadSchemaType.KEYWORD,
    "integer": models.PayloadSchemaType.INTEGER,
    "float": models.PayloadSchemaType.FLOAT,
    "text": models.TextIndexParams(
        type=models.TextIndexType.TEXT, tokenizer=models.TokenizerType.PREFIX, lowercase=True
    ),
    "bool": models.PayloadSchemaType.BOOL,
    "datetime": models.PayloadSchemaType.DATETIME,
    "uuid": models.PayloadSchemaType.UUID,
}


class ServerConditions:
    """Native qdrant-client filter constructors for :func:`lmk_rag.store.filters.translate`."""

    def match(self, key: str, value: Any) -> Any:
        """Exact match of one value."""
        return models.FieldCondition(key=key, match=models.MatchValue(value=value))

    def match_any(self, key: str, values: list[Any]) -> Any:
        """Match any of the values."""
        return models.FieldCondition(key=key, match=models.MatchAny(any=values))

    def match_text(self, key: str, text: str) -> Any:
        """Full-text match."""
        return models.FieldCondition(key=key, match=models.MatchText(text=text))

    def match_substring(self, key: str, text: str) -> Any:
        """The string (or a string element of the list) holds ``text`` (case-sensitive)."""
        return models.FieldCondition(key=key, match=models.MatchSubstring(substring=text))

    def range(self, key: str, bounds: dict[str, float]) -> Any:
        """Numeric range."""
        return models.FieldCondition(key=key, range=models.Range(**bounds))

    def datetime_range(self, key: str, bounds: dict[str, str]) -> Any:
        """Range of points in time."""
        return models.FieldCondition(key=key, range=models.DatetimeRange(**bounds))

    def is_empty(self, key: str) -> Any:
        """Missing, null or empty."""
        return models.IsEmptyCondition(is_empty=models.PayloadField(key=key))

    def combine(self, must: list[Any], should: list[Any], must_not: list[Any]) -> Any:
        """A native filter."""
        return models.Filter(must=must or None, should=should or None, must_not=must_not or None)


def client_kwargs(url: str | None, api_key: str | None, location: str | None, options: ServerOptions) -> dict[str, Any]:
    """Keyword arguments of the ``QdrantClient`` (and ``AsyncQdrantClient``) for a server (``url``) or local mode
    (``location``): the store's own arguments over ``options.client_kwargs``.

    :return: the kwargs; gRPC and timeout only apply to servers.
    """
    kwargs = dict(options.client_kwargs or {})
    if url is not None:
        kwargs.update(url=url, api_key=api_key, prefer_grpc=bool(options.prefer_grpc))
        if _checks_version(url, options):
            kwargs["check_compatibility"] = False
        if options.timeout is not None:
            kwargs["timeout"] = options.timeout
    elif location == ":memory:":
        kwargs["location"] = ":memory:"
    else:
        kwargs["path"] = location
    return kwargs


#: ``QdrantClient`` arguments the store's own arguments set (``client_kwargs`` may not hold them).
OWN_CLIENT_ARGUMENTS = ("url", "api_key", "location", "path", "prefer_grpc", "timeout", "host", "port")


def check_options(options: ServerOptions, url: str | None, client: Any, aclient: Any, location: str | None) -> None:
    """Refuse options that are malformed or would have no effect on this backend, before anything is opened.

    :raises InvalidInputError: for a count that is not a positive integer, a ``client_kwargs`` that is not a dict of
        other ``QdrantClient`` arguments, client options beside a ready-made client, server options in local mode,
        an ``aclient`` that is not an ``AsyncQdrantClient``, or a server's ``aclient`` without a sync client.
    """
    for name in ("timeout", "shard_number", "replication_factor", "write_consistency_factor", "parallel"):
        if getattr(options, name) is not None:
            check_count(name, getattr(options, name))
    if options.max_retries is not None:
        check_count("max_retries", options.max_retries, minimum=0)
    if options.prefer_grpc is not None and not isinstance(options.prefer_grpc, bool):
        raise InvalidInputError(f"prefer_grpc must be True or False, got {options.prefer_grpc!r}")
    if options.client_kwargs is not None:
        if not isinstance(options.client_kwargs, Mapping) or not all(isinstance(k, str) for k in options.client_kwargs):
            raise InvalidInputError(f"client_kwargs must be a dict of QdrantClient arguments, got "
                                    f"{options.client_kwargs!r}")
        own = sorted(set(options.client_kwargs) & set(OWN_CLIENT_ARGUMENTS))
        if own:
            raise InvalidInputError(f"client_kwargs may not set {own}: give them as the store's own arguments")
    building = [name for name in ("prefer_grpc", "timeout", "client_kwargs") if getattr(options, name) is not None]
    if building and (client is not None or (aclient is not None and url is None)):
        raise InvalidInputError(f"{', '.join(building)}: for the clients the store builds for url= or location=; "
                                "the client you gave is configured already")
    server_only = [name for name in building if name != "client_kwargs"]
    if server_only and url is None:
        raise InvalidInputError(f"{', '.join(server_only)}: for calls to a Qdrant server (url=); local mode has "
                                "no server")
    if aclient is not None and not isinstance(aclient, AsyncQdrantClient):
        raise InvalidInputError(f"aclient must be a qdrant_client.AsyncQdrantClient, got {type(aclient).__name__}")
    local = _is_local(client) or location is not None or _is_local(aclient)
    if local:
        cluster = [name for name in ("shard_number", "replication_factor", "write_consistency_factor")
                   if getattr(options, name) is not None]
        if cluster:
            raise InvalidInputError(f"{', '.join(cluster)}: for a collection spread over a Qdrant cluster (url=); "
                                    "qdrant-client local mode has no shards")
    elif aclient is not None and client is None and url is None:
        raise InvalidInputError(
            "aclient= alone serves only local mode; for a Qdrant server give url= (both clients are built) or "
            "client= beside it: a store opens and checks its settings synchronously"
        )


def _is_local(client: Any) -> bool:
    """Whether a (sync or async) qdrant-client client runs local mode."""
    return isinstance(getattr(client, "_client", None), (QdrantLocal, AsyncQdrantLocal))


#: Characters Qdrant refuses in a collection name.
FORBIDDEN_COLLECTION_CHARS = '<>:"/\\|?*\0'


def check_collection(collection_name: str) -> None:
    """Refuse a collection name Qdrant would refuse (checked before anything is opened).

    :raises InvalidInputError: for a name that is not a non-empty str of at most 255 characters without
        any of :data:`FORBIDDEN_COLLECTION_CHARS`.
    """
    if not isinstance(collection_name, str) or not collection_name or len(collection_name) > 255:
        raise InvalidInputError(f"collection_name must be a name of 1 to 255 characters, got {collection_name!r}")
    bad = sorted({char for char in collection_name if char in FORBIDDEN_COLLECTION_CHARS})
    if bad:
        raise InvalidInputError(
            f"collection_name {collection_name!r} holds {', '.join(map(repr, bad))}, which Qdrant refuses in "
            "collection names; use letters, digits, '-' and '_'"
        )


def _checks_version(url: str | None, options: ServerOptions) -> bool:
    """Whether the backend checks the server's version itself, on opening: for a server whose clients it builds,
    unless ``client_kwargs`` set qdrant-client's own check. That check runs in a daemon thread, which can crash the
    interpreter when it exits during the thread's request (an unreachable server), so the clients are built without
    it."""
    return url is not None and "check_compatibility" not in (options.client_kwargs or {})


def _warn_if_incompatible(server_version: str) -> None:
    """Warn, as qdrant-client's own check does, when the server's version is too far from the client's."""
    client_version = importlib.metadata.version("qdrant-client")
    if not is_compatible(client_version, server_version):
        warnings.warn(
            f"Qdrant client version {client_version} is incompatible with server version {server_version}: major "
            "versions should match and minor versions differ by at most 1",
            stacklevel=5,
        )


def _client(factory: Any, url: str | None, api_key: str | None, location: str | None, options: ServerOptions) -> Any:
    """A new ``QdrantClient`` or ``AsyncQdrantClient`` (``factory``; see :func:`client_kwargs`).

    :raises InvalidInputError: for a URL, location or ``client_kwargs`` qdrant-client cannot use.
    """
    try:
        return factory(**client_kwargs(url, api_key, location, options))
    except (ValueError, TypeError) as error:
        given = (f"url {url!r}", "give a URL such as http://localhost:6333") if url is not None else (
            f"location {location!r}", "give a folder or ':memory:'")
        if isinstance(error, TypeError):
            given = (f"client_kwargs {dict(options.client_kwargs or {})!r}", "give QdrantClient's own arguments")
        raise InvalidInputError(f"qdrant-client cannot use {given[0]} ({error}); {given[1]}") from None


def create_collection_request(
    collection: str,
    spec: CollectionSpec,
    shard_number: int | None = None,
    replication_factor: int | None = None,
    write_consistency_factor: int | None = None,
) -> dict[str, Any]:
    """Keyword arguments of ``QdrantClient.create_collection`` for the store's named vectors.

    :param collection: the collection name.
    :param spec: the named vectors.
    :param shard_number: shards of the collection (cluster), or None for the server default.
    :param replication_factor: copies of each shard, or None.
    :param write_consistency_factor: replicas that must confirm a write, or None.
    :return: the kwargs.
    """
    storage = spec.storage
    vectors_memory = models.Memory.COLD if storage.on_disk else None
    hnsw = models.HnswConfigDiff(m=spec.storage.hnsw_m, ef_construct=spec.storage.ef_construct,
                                 memory=models.Memory.COLD if storage.hnsw_on_disk else None)
    vectors: dict[str, models.VectorParams] = {}
    sparse: dict[str, models.SparseVectorParams] = {}
    for slot in vector_layout(spec):
        if slot.kind in ("dense", "scored"):
            vectors[slot.name] = models.VectorParams(
                size=slot.size, distance=models.Distance.COSINE, memory=vectors_memory,
                hnsw_config=hnsw if slot.kind == "dense" else models.HnswConfigDiff(m=0),
                quantization_config=_quantization(storage.node_quantization),
            )
        elif slot.kind == "multivector":
            vectors[slot.name] = models.VectorParams(
                size=slot.size,
                distance=models.Distance.COSINE,
                multivector_config=models.MultiVectorConfig(comparator=models.MultiVectorComparator.MAX_SIM),
                hnsw_config=models.HnswConfigDiff(m=0),
                quantization_config=_quantization(storage.quantization),
                memory=vectors_memory,
            )
        else:
            sparse[slot.name] = models.SparseVectorParams(modifier=models.Modifier.IDF)
    payload = models.PayloadStorageParams(memory=models.Memory.COLD if storage.on_disk else models.Memory.CACHED)
    request: dict[str, Any] = {"collection_name": collection, "vectors_config": vectors, "payload": payload}
    if sparse:
        request["sparse_vectors_config"] = sparse
    for key, value in (
        ("shard_number", shard_number),
        ("replication_factor", replication_factor),
        ("write_consistency_factor", write_consistency_factor),
    ):
        if value is not None:
            request[key] = value
    return request


def _quantization(kind: Quantization) -> Any:
    """qdrant-client quantization config of a kind (its compressed copy pinned in RAM), or None for ``"none"``."""
    if kind == "none":
        return None
    if kind == "int8":
        return models.ScalarQuantization(scalar=models.ScalarQuantizationConfig(
            type=models.ScalarType.INT8, quantile=0.99, memory=models.Memory.PINNED))
    if kind == "turbo4":
        return models.TurboQuantization(turbo=models.TurboQuantQuantizationConfig(
            bits=models.TurboQuantBitSize.BITS4, memory=models.Memory.PINNED))
    return models.BinaryQuantization(binary=models.BinaryQuantizationConfig(memory=models.Memory.PINNED))


def _params(options: SearchOptions) -> models.SearchParams:
    """qdrant-client search parameters of a plan's dense searches and its rerank: candidates scored with a
    quantized copy are always rescored with the original vectors (Qdrant's default is not the same for every
    quantization: it returns TurboQuant's own multivector scores), or an exact search skips the copies and the HNSW
    graph."""
    if options.exact:
        return models.SearchParams(exact=True, quantization=models.QuantizationSearchParams(ignore=True))
    return models.SearchParams(hnsw_ef=options.hnsw_ef, quantization=models.QuantizationSearchParams(
        rescore=True, oversampling=options.oversampling))


def upload_request(
    collection: str, points: list[PointData], parallel: int, batch_size: int, max_retries: int
) -> dict[str, Any]:
    """Keyword arguments of ``QdrantClient.upload_points`` (batched, ``parallel`` processes, each failed batch
    retried up to ``max_retries`` times, waits for the write).

    :return: the kwargs.
    """
    return {
        "collection_name": collection,
        "points": [_native_point(p) for p in points],
        "batch_size": batch_size,
        "parallel": parallel,
        "max_retries": max_retries,
        "wait": True,
    }


def query_requests(plan: QueryPlan, local: bool = False) -> list[models.QueryRequest]:
    """The requests of ``QdrantClient.query_batch_points`` for a plan: one per scorer, each scoring the
    union of the prefetch branches (or searching the whole collection when there are none); an MMR plan's scorer
    is a nearest query with MMR (qdrant-client's ``diversity`` is ``1 - mmr_lambda``).

    :param local: for qdrant-client local mode, which searches every vector exactly and warns about search
        parameters: the requests carry none.
    :return: the requests, in scorer order (the first less the length penalty where the plan has one: a formula
        query over it), then the plan's plain search.
    """
    params = None if local else _params(plan.options)
    prefetch = [
        models.Prefetch(
            query=_query_value(branch),
            using=branch.using,
            limit=plan.prefetch_limit,
            filter=plan.filter,
            params=None if isinstance(branch.query, SparseVector) else params,
        )
        for branch in plan.prefetch
    ]
    requests = [
        models.QueryRequest(
            prefetch=prefetch or None,
            query=_query_value(scorer) if plan.mmr_lambda is None else models.NearestQuery(
                nearest=scorer.query,
                mmr=models.Mmr(diversity=1.0 - plan.mmr_lambda, candidates_limit=plan.prefetch_limit),
            ),
            using=scorer.using,
            filter=plan.filter,
            params=None if isinstance(scorer.query, SparseVector) else params,
            limit=plan.limit,
            with_payload=list(plan.payload_keys) or False,
        )
        for scorer in plan.scorers
    ]
    if plan.formula is not None:  # the first scorer's results rescored: a formula query over them
        first = requests[0]
        scored = models.Prefetch(prefetch=first.prefetch, query=first.query, using=first.using, filter=plan.filter,
                                 params=first.params, limit=plan.limit)
        requests[0] = models.QueryRequest(prefetch=[scored], query=formula(plan.formula), filter=plan.filter,
                                          limit=plan.limit, with_payload=first.with_payload)
    search = [] if plan.search is None else [models.QueryRequest(
        query=_query_value(plan.search), using=plan.search.using, filter=plan.filter, limit=plan.prefetch_limit,
        with_payload=False,  # ids and scores: see QueryPlan.search
    )]
    return requests + search


def formula(expression: Expression) -> models.FormulaQuery:
    """A backend-neutral formula as a qdrant-client formula query (its payload values' defaults gathered)."""
    defaults: dict[str, float] = {}

    def term(node: Expression) -> Any:
        if isinstance(node, Score):
            return "$score"
        if isinstance(node, Constant):
            return node.value
        if isinstance(node, PayloadValue):
            defaults[node.key] = node.default
            return node.key
        if isinstance(node, Ln):
            return models.LnExpression(ln=term(node.of))
        if isinstance(node, Sum):
            return models.SumExpression(sum=[term(child) for child in node.terms])
        return models.MultExpression(mult=[term(child) for child in node.factors])  # a Product

    root = term(expression)
    return models.FormulaQuery(formula=root, defaults=defaults)


def _query_value(branch: Branch) -> Any:
    """A branch's query as qdrant-client takes it (sparse vectors as ``models.SparseVector``)."""
    if isinstance(branch.query, SparseVector):
        return models.SparseVector(indices=branch.query.indices, values=branch.query.values)
    return branch.query


class ServerBackend(Backend):
    """A collection on a Qdrant server/cluster or in qdrant-client local mode.

    Every engine call goes through one :class:`Transport`: the sync client, or, inside
    :meth:`async_transport`, the async client's coroutine of the same name with the same request.

    :param url: server URL (or None).
    :param api_key: server API key.
    :param client: an existing ``QdrantClient`` (not closed by :meth:`close`).
    :param location: local mode: ``":memory:"`` or a folder.
    :param collection_name: the collection name.
    :param options: how to reach Qdrant and what a new collection is made with (checked by :func:`check_options`).
    :param batch_size: points per upsert request.
    """

    def __init__(
        self,
        url: str | None,
        api_key: str | None,
        client: QdrantClient | None,
        aclient: AsyncQdrantClient | None,
        location: str | None,
        collection_name: str,
        options: ServerOptions,
        batch_size: int,
    ) -> None:
        """Connect (or wrap ``client`` and ``aclient``)."""
        check_options(options, url, client, aclient, location)
        self._owned: list[Any] = []
        if aclient is not None and (location is not None or _is_local(client)):
            warnings.warn(
                "aclient= is not used: a local-mode client and async client never share their data, so the async "
                "methods use the sync client in a worker thread; give aclient= alone for async calls in local mode",
                stacklevel=4,
            )
            aclient = None
        if client is None and (url is not None or location is not None):
            client = _client(QdrantClient, url, api_key, location, options)
            self._owned.append(client)
        if aclient is None and url is not None:
            aclient = _client(AsyncQdrantClient, url, api_key, None, options)
            self._owned.append(aclient)
        self.client, self.aclient = client, aclient
        self.collection = collection_name
        self.local = _is_local(client if client is not None else aclient)
        transport = Transport(client, aclient)
        self._transport = transport
        self._api = transport if self.local else Guarded(transport, _server_error(url or "the Qdrant server"))
        self.name = "qdrant-local" if self.local else "qdrant-server"
        self.single_writer = self.local and location not in (None, ":memory:")  # a locked folder
        self._create_options = {
            "shard_number": options.shard_number,
            "replication_factor": options.replication_factor,
            "write_consistency_factor": options.write_consistency_factor,
        }
        self.cluster = {key: value for key, value in self._create_options.items() if value is not None}
        self.parallel = options.parallel or 1
        self.max_retries = 3 if options.max_retries is None else options.max_retries
        self.batch_size = batch_size
        self._conditions = ServerConditions()
        if _checks_version(url, options):
            _warn_if_incompatible(self._api.info().version)

    def async_transport(self, loop: asyncio.AbstractEventLoop) -> contextlib.AbstractContextManager[None]:
        """Within this context, this thread's engine calls are the async client's, run on ``loop``."""
        return self._transport.routed(loop)

    @property
    def builder(self) -> ConditionBuilder:
        """qdrant-client filter constructors."""
        return self._conditions

    def exists(self) -> bool:
        """Whether the collection exists."""
        return bool(self._api.collection_exists(self.collection))

    def create(self, spec: CollectionSpec) -> None:
        """Create the collection with the pass-through settings.

        :raises InvalidInputError: for vectors or an HNSW graph on disk in local mode, which holds everything in
            memory.
        """
        if self.local and not spec.storage.in_memory:
            raise InvalidInputError(
                "qdrant-client local mode holds every vector in memory: on_disk and hnsw_on_disk need Qdrant Edge "
                "(path=) or a Qdrant server (url=)"
            )
        self._api.create_collection(**create_collection_request(self.collection, spec, **self._create_options))

    def vector_names(self) -> set[str]:
        """Dense and sparse vector names of the collection."""
        params = self._api.get_collection(self.collection).config.params
        dense = params.vectors if isinstance(params.vectors, dict) else {}
        return set(dense) | set(params.sparse_vectors or {})

    def vector_sizes(self) -> dict[str, int]:
        """Dense vector sizes of the collection."""
        params = self._api.get_collection(self.collection).config.params
        dense = params.vectors if isinstance(params.vectors, dict) else {}
        return {name: vector.size for name, vector in dense.items()}

    def read_settings(self) -> dict[str, Any] | None:
        """The settings point's payload, or None."""
        if not self.exists():
            return None
        found = self._api.retrieve(self.collection, [SETTINGS_POINT_ID], with_payload=True)
        if not found:
            return None
        settings = (found[0].payload or {}).get("settings")
        if not isinstance(settings, dict):
            raise CorruptStoreError(f"collection {self.collection!r}: damaged settings point {SETTINGS_POINT_ID}")
        return settings

    def write_settings(self, settings: dict[str, Any]) -> None:
        """Upsert the settings point (no vectors)."""
        point = models.PointStruct(id=SETTINGS_POINT_ID, vector={}, payload={"kind": STORE, "settings": settings})
        self._api.upsert(self.collection, [point], wait=True)

    def create_payload_index(self, key: str, kind: IndexKind) -> None:
        """Index a payload path (nothing to do in local mode, which filters by scanning)."""
        if self.local:
            return
        self._api.create_payload_index(self.collection, key, field_schema=_INDEX_TYPES[kind], wait=True)

    def upsert(self, points: list[PointData]) -> None:
        """Upsert points, :attr:`batch_size` per request, each sent again up to :attr:`max_retries` times when the
        server cannot be reached (upserts are idempotent); with ``parallel`` > 1, ``upload_points`` in that many
        processes."""
        if not points:
            return
        try:
            if self.parallel > 1 and len(points) > self.batch_size:
                self._api.upload_points(**upload_request(self.collection, points, self.parallel, self.batch_size,
                                                         self.max_retries))
                return
            for start in range(0, len(points), self.batch_size):
                batch = [_native_point(p) for p in points[start : start + self.batch_size]]
                for attempt in range(self.max_retries + 1):
                    try:
                        self._api.upsert(self.collection, batch, wait=True)
                        break
                    except StoreUnavailableError as error:
                        if attempt == self.max_retries:
                            raise
                        pause = RETRY_PAUSE * 2**attempt
                        logger.warning("upsert failed, try %d of %d; sending it again in %.1f s (%s)", attempt + 1,
                                       self.max_retries + 1, pause, error)
                        time.sleep(pause)
        except ValueError as error:
            if "dim" in str(error).lower() or "size" in str(error).lower():
                raise VectorSizeError(f"collection {self.collection!r}: {error}") from error
            raise

    def delete(self, native_filter: Any) -> None:
        """Delete by filter."""
        self._api.delete(self.collection, points_selector=models.FilterSelector(filter=native_filter), wait=True)

    def set_payload(self, native_filter: Any, payload: dict[str, Any]) -> None:
        """Set payload keys by filter (one request)."""
        self._api.set_payload(self.collection, payload=payload, points=models.FilterSelector(filter=native_filter),
                              wait=True)

    def query(self, plan: QueryPlan) -> list[list[ScoredPointData]]:
        """One ``query_batch_points`` call (one request per scorer)."""
        responses = self._api.query_batch_points(self.collection, requests=query_requests(plan, self.local))
        return [[ScoredPointData(str(p.id), float(p.score), p.payload or {}) for p in r.points] for r in responses]

    def retrieve(self, ids: list[str], with_vectors: bool | list[str]) -> list[PointData]:
        """Points by id."""
        if not ids:
            return []
        records = self._api.retrieve(self.collection, list(ids), with_payload=True, with_vectors=with_vectors)
        return [_point(r) for r in records]

    def scroll(
        self, native_filter: Any, with_vectors: bool, limit: int, offset: str | None
    ) -> tuple[list[PointData], str | None]:
        """One page of points."""
        records, next_offset = self._api.scroll(
            self.collection,
            scroll_filter=native_filter,
            limit=limit,
            offset=offset,
            with_payload=True,
            with_vectors=with_vectors,
        )
        return [_point(r) for r in records], None if next_offset is None else str(next_offset)

    def count(self, native_filter: Any) -> int:
        """Exact count."""
        return int(self._api.count(self.collection, count_filter=native_filter, exact=True).count)

    def optimize(self) -> bool:
        """Nothing to do: servers build their indexes in the background (local mode has none)."""
        return False

    def flush(self) -> None:
        """Nothing to do: writes wait for the server (local mode persists each write)."""

    def close(self) -> None:
        """Close the clients this backend created."""
        for client in self._owned:
            self._transport.close(client)


RETRY_PAUSE = 0.5
"""Seconds before the first retry of a failed upsert request; each further retry waits twice as long."""


class Transport:
    """The engine calls of one backend: the sync client's methods, or, in a thread inside :meth:`routed`, the async
    client's coroutines of the same name and arguments run on the caller's event loop (so each request is built
    once, for both). A backend with only an async client (local mode) runs its sync calls on a private event loop.

    :param client: the ``QdrantClient``, or None.
    :param aclient: the ``AsyncQdrantClient``, or None.
    """

    def __init__(self, client: QdrantClient | None, aclient: AsyncQdrantClient | None) -> None:
        self._client = client
        self._aclient = aclient
        self._routes = threading.local()

    @contextlib.contextmanager
    def routed(self, loop: asyncio.AbstractEventLoop) -> Iterator[None]:
        """Send this thread's calls to the async client, on ``loop`` (a no-op without an async client)."""
        self._routes.loop = loop if self._aclient is not None else None
        try:
            yield
        finally:
            self._routes.loop = None

    def __getattr__(self, name: str) -> Callable[..., Any]:
        loop = getattr(self._routes, "loop", None)
        if loop is None and self._client is not None:
            return getattr(self._client, name)
        method = getattr(self._aclient, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            result = method(*args, **kwargs)
            if not inspect.iscoroutine(result):  # upload_points is a plain method of the async client
                return result
            if loop is not None:
                return asyncio.run_coroutine_threadsafe(result, loop).result()
            return _run_apart(result)

        return call

    def close(self, client: Any) -> None:
        """Close a client this transport's backend built (the async client's ``close`` is a coroutine)."""
        closing = client.close()
        if inspect.iscoroutine(closing):
            _run_apart(closing)


def _run_apart(coroutine: Any) -> Any:
    """Run a coroutine to its end on a private event loop in another thread (never inside a loop the calling thread
    may be running), and return its result."""
    with concurrent.futures.ThreadPoolExecutor(1) as apart:
        return apart.submit(asyncio.run, coroutine).result()


def _server_error(where: str) -> Callable[[str, BaseException], Exception | None]:
    """Turns a network or server failure into :class:`StoreUnavailableError` naming the server (others pass)."""

    def translate(name: str, error: BaseException) -> Exception | None:
        network = type(error).__module__.split(".")[0] in ("grpc", "httpx", "httpcore")
        if isinstance(error, (ApiException, OSError)) or network:
            return StoreUnavailableError(f"{where}: {name} failed ({error}); is the server up and the URL and API "
                                         "key right?")
        return None

    return translate


def _native_point(point: PointData) -> models.PointStruct:
    """A neutral point as a ``PointStruct``."""
    vectors: dict[str, Any] = {}
    for name, value in point.vectors.items():
        if isinstance(value, SparseVector):
            vectors[name] = models.SparseVector(indices=value.indices, values=value.values)
        else:
            vectors[name] = value.tolist() if isinstance(value, np.ndarray) else value
    return models.PointStruct(id=point.id, vector=vectors, payload=point.payload)


def _point(record: Any) -> PointData:
    """A qdrant-client record as a neutral point."""
    vectors: dict[str, Any] = {}
    if isinstance(record.vector, dict):
        for name, value in record.vector.items():
            is_sparse = isinstance(value, models.SparseVector)
            vectors[name] = SparseVector(list(value.indices), list(value.values)) if is_sparse else value
    return PointData(str(record.id), vectors, record.payload or {})
