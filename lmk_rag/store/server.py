"""qdrant-client backend: a Qdrant server or cluster, or qdrant-client local mode. The only module
importing ``qdrant_client``.

The request builders (:func:`client_kwargs`, :func:`create_collection_request`,
:func:`upload_request`, :func:`query_requests`) are pure functions, so the pass-through settings
(shards, replication, gRPC, parallel upload) are testable without a server.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from qdrant_client import QdrantClient, models
from qdrant_client.http.exceptions import ApiException
from qdrant_client.local.qdrant_local import QdrantLocal

from lmk_rag.checks import check_count
from lmk_rag.errors import CorruptStoreError, InvalidInputError, StoreUnavailableError, VectorSizeError
from lmk_rag.store.base import Backend, Guarded, IndexKind
from lmk_rag.store.filters import ConditionBuilder
from lmk_rag.store.layout import vector_layout
from lmk_rag.store.records import META_POINT_ID, STORE
from lmk_rag.store.types import (
    DEFAULT_COLLECTION,
    Branch,
    CollectionSpec,
    PointData,
    QueryPlan,
    ScoredPointData,
    SparseVector,
)

_INDEX_TYPES = {
    "keyword": models.PayloadSchemaType.KEYWORD,
    "integer": models.PayloadSchemaType.INTEGER,
    "float": models.PayloadSchemaType.FLOAT,
    "text": models.TextIndexParams(
        type=models.TextIndexType.TEXT, tokenizer=models.TokenizerType.PREFIX, lowercase=True
    ),
    "bool": models.PayloadSchemaType.BOOL,
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


def client_kwargs(
    url: str | None, api_key: str | None, location: str | None, prefer_grpc: bool, timeout: int | None
) -> dict[str, Any]:
    """Keyword arguments of ``QdrantClient`` for a server (``url``) or local mode (``location``).

    :return: the kwargs; gRPC and timeout only apply to servers.
    """
    if url is not None:
        kwargs: dict[str, Any] = {"url": url, "api_key": api_key, "prefer_grpc": prefer_grpc}
        if timeout is not None:
            kwargs["timeout"] = timeout
        return kwargs
    if location == ":memory:":
        return {"location": ":memory:"}
    return {"path": location}


#: Characters Qdrant refuses in a collection name.
FORBIDDEN_COLLECTION_CHARS = '<>:"/\\|?*\0'


def check_collection(collection: str) -> None:
    """Refuse a collection name Qdrant would refuse (checked before anything is opened).

    :raises InvalidInputError: for a name that is not a non-empty str of at most 255 characters without
        any of :data:`FORBIDDEN_COLLECTION_CHARS`.
    """
    if not isinstance(collection, str) or not collection or len(collection) > 255:
        raise InvalidInputError(f"collection must be a name of 1 to 255 characters, got {collection!r}")
    bad = sorted({char for char in collection if char in FORBIDDEN_COLLECTION_CHARS})
    if bad:
        raise InvalidInputError(
            f"collection {collection!r} holds {', '.join(map(repr, bad))}, which Qdrant refuses in collection names; "
            "use letters, digits, '-' and '_'"
        )


def _client(
    url: str | None, api_key: str | None, location: str | None, prefer_grpc: bool, timeout: int | None
) -> QdrantClient:
    """A new ``QdrantClient`` (see :func:`client_kwargs`).

    :raises InvalidInputError: for a URL or location qdrant-client cannot parse.
    """
    try:
        return QdrantClient(**client_kwargs(url, api_key, location, prefer_grpc, timeout))
    except ValueError as error:
        given, fix = (
            (f"url {url!r}", "give a URL such as http://localhost:6333")
            if url is not None else (f"location {location!r}", "give a folder or ':memory:'")
        )
        raise InvalidInputError(f"qdrant-client cannot use {given} ({error}); {fix}") from None


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
    hnsw = models.HnswConfigDiff(m=spec.hnsw_m, ef_construct=spec.ef_construct)
    vectors: dict[str, models.VectorParams] = {}
    sparse: dict[str, models.SparseVectorParams] = {}
    for slot in vector_layout(spec):
        if slot.kind == "dense":
            vectors[slot.name] = models.VectorParams(size=slot.size, distance=models.Distance.COSINE, hnsw_config=hnsw)
        elif slot.kind == "multivector":
            vectors[slot.name] = models.VectorParams(
                size=slot.size,
                distance=models.Distance.COSINE,
                multivector_config=models.MultiVectorConfig(comparator=models.MultiVectorComparator.MAX_SIM),
                hnsw_config=models.HnswConfigDiff(m=0),
                quantization_config=_quantization(spec.quantization),
            )
        else:
            sparse[slot.name] = models.SparseVectorParams(modifier=models.Modifier.IDF)
    request: dict[str, Any] = {"collection_name": collection, "vectors_config": vectors}
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


def _quantization(kind: str | None) -> Any:
    """qdrant-client quantization config for ``"int8"``, ``"binary"`` or None."""
    if kind is None:
        return None
    if kind == "int8":
        return models.ScalarQuantization(
            scalar=models.ScalarQuantizationConfig(type=models.ScalarType.INT8, quantile=0.99, always_ram=True)
        )
    return models.BinaryQuantization(binary=models.BinaryQuantizationConfig(always_ram=True))


def upload_request(collection: str, points: list[PointData], parallel: int, batch_size: int) -> dict[str, Any]:
    """Keyword arguments of ``QdrantClient.upload_points`` (batched, ``parallel`` processes, waits for the write).

    :return: the kwargs.
    """
    return {
        "collection_name": collection,
        "points": [_native_point(p) for p in points],
        "batch_size": batch_size,
        "parallel": parallel,
        "wait": True,
    }


def query_requests(plan: QueryPlan) -> list[models.QueryRequest]:
    """The requests of ``QdrantClient.query_batch_points`` for a plan: one per scorer, each scoring the
    union of the prefetch branches (or searching the whole collection when there are none); an MMR plan's scorer
    is a nearest query with MMR (qdrant-client's ``diversity`` is ``1 - mmr_lambda``).

    :return: the requests, in scorer order, then the plan's plain search.
    """
    params = models.SearchParams(hnsw_ef=plan.hnsw_ef) if plan.hnsw_ef else None
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
    search = [] if plan.search is None else [models.QueryRequest(
        query=_query_value(plan.search), using=plan.search.using, filter=plan.filter, limit=plan.prefetch_limit,
        with_payload=list(plan.payload_keys),
    )]
    return [
        models.QueryRequest(
            prefetch=prefetch or None,
            query=_query_value(scorer) if plan.mmr_lambda is None else models.NearestQuery(
                nearest=scorer.query,
                mmr=models.Mmr(diversity=1.0 - plan.mmr_lambda, candidates_limit=plan.prefetch_limit),
            ),
            using=scorer.using,
            filter=plan.filter,
            params=None if prefetch or isinstance(scorer.query, SparseVector) else params,
            limit=plan.limit,
            with_payload=list(plan.payload_keys),
        )
        for scorer in plan.scorers
    ] + search


def _query_value(branch: Branch) -> Any:
    """A branch's query as qdrant-client takes it (sparse vectors as ``models.SparseVector``)."""
    if isinstance(branch.query, SparseVector):
        return models.SparseVector(indices=branch.query.indices, values=branch.query.values)
    return branch.query


class ServerBackend(Backend):
    """A collection on a Qdrant server/cluster or in qdrant-client local mode.

    :param url: server URL (or None).
    :param api_key: server API key.
    :param client: an existing ``QdrantClient`` (not closed by :meth:`close`).
    :param location: local mode: ``":memory:"`` or a folder.
    :param collection: the collection name.
    :param prefer_grpc: use gRPC for server calls.
    :param timeout: request timeout in seconds.
    :param shard_number: shards on creation (cluster).
    :param replication_factor: replicas on creation.
    :param write_consistency_factor: write confirmations on creation.
    :param upload_parallel: processes for uploads (``upload_points(parallel=...)``); 1 = in-process.
    :param upload_batch_size: points per upload request.
    """

    def __init__(
        self,
        url: str | None = None,
        api_key: str | None = None,
        client: QdrantClient | None = None,
        location: str | None = None,
        collection: str = DEFAULT_COLLECTION,
        prefer_grpc: bool = False,
        timeout: int | None = None,
        shard_number: int | None = None,
        replication_factor: int | None = None,
        write_consistency_factor: int | None = None,
        upload_parallel: int = 1,
        upload_batch_size: int = 64,
    ) -> None:
        """Connect (or wrap ``client``)."""
        check_count("upload_parallel", upload_parallel)
        check_count("upload_batch_size", upload_batch_size)
        self._owns_client = client is None
        self.client = client if client is not None else _client(url, api_key, location, prefer_grpc, timeout)
        self.collection = collection
        self.local = isinstance(getattr(self.client, "_client", None), QdrantLocal)
        self._api = self.client if self.local else Guarded(self.client, _server_error(url or "the Qdrant server"))
        self.name = "qdrant-local" if self.local else "qdrant-server"
        self.single_writer = self.local and location != ":memory:"  # a locked folder
        self._create_options = {
            "shard_number": shard_number,
            "replication_factor": replication_factor,
            "write_consistency_factor": write_consistency_factor,
        }
        self.upload_parallel = upload_parallel
        self.upload_batch_size = upload_batch_size
        self._conditions = ServerConditions()

    @property
    def builder(self) -> ConditionBuilder:
        """qdrant-client filter constructors."""
        return self._conditions

    def exists(self) -> bool:
        """Whether the collection exists."""
        return bool(self._api.collection_exists(self.collection))

    def create(self, spec: CollectionSpec) -> None:
        """Create the collection with the pass-through settings."""
        self._api.create_collection(**create_collection_request(self.collection, spec, **self._create_options))

    def vector_names(self) -> set[str]:
        """Dense and sparse vector names of the collection."""
        params = self._api.get_collection(self.collection).config.params
        dense = params.vectors if isinstance(params.vectors, dict) else {}
        return set(dense) | set(params.sparse_vectors or {})

    def read_meta(self) -> dict[str, Any] | None:
        """The settings point's payload, or None."""
        if not self.exists():
            return None
        found = self._api.retrieve(self.collection, [META_POINT_ID], with_payload=True)
        if not found:
            return None
        settings = (found[0].payload or {}).get("settings")
        if not isinstance(settings, dict):
            raise CorruptStoreError(f"collection {self.collection!r}: damaged settings point {META_POINT_ID}")
        return settings

    def write_meta(self, meta: dict[str, Any]) -> None:
        """Upsert the settings point (no vectors)."""
        point = models.PointStruct(id=META_POINT_ID, vector={}, payload={"kind": STORE, "settings": meta})
        self._api.upsert(self.collection, [point], wait=True)

    def create_payload_index(self, key: str, kind: IndexKind) -> None:
        """Index a payload path (nothing to do in local mode, which filters by scanning)."""
        if self.local:
            return
        self._api.create_payload_index(self.collection, key, field_schema=_INDEX_TYPES[kind], wait=True)

    def upsert(self, points: list[PointData]) -> None:
        """Upsert points: one request, or batched parallel uploads when ``upload_parallel`` > 1."""
        if not points:
            return
        try:
            if self.upload_parallel > 1 and len(points) > self.upload_batch_size:
                self._api.upload_points(
                    **upload_request(self.collection, points, self.upload_parallel, self.upload_batch_size)
                )
            else:
                for start in range(0, len(points), self.upload_batch_size):
                    batch = [_native_point(p) for p in points[start : start + self.upload_batch_size]]
                    self._api.upsert(self.collection, batch, wait=True)
        except ValueError as error:
            if "dim" in str(error).lower() or "size" in str(error).lower():
                raise VectorSizeError(f"collection {self.collection!r}: {error}") from error
            raise

    def delete(self, native_filter: Any) -> None:
        """Delete by filter."""
        self._api.delete(self.collection, points_selector=models.FilterSelector(filter=native_filter), wait=True)

    def query(self, plan: QueryPlan) -> list[list[ScoredPointData]]:
        """One ``query_batch_points`` call (one request per scorer)."""
        responses = self._api.query_batch_points(self.collection, requests=query_requests(plan))
        return [[ScoredPointData(str(p.id), float(p.score), p.payload or {}) for p in r.points] for r in responses]

    def retrieve(self, ids: list[str], with_vectors: bool) -> list[PointData]:
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
        """Close the client if this backend created it."""
        if self._owns_client:
            self.client.close()


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
