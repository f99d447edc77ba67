"""Qdrant Edge backend: an in-process shard in a folder, and the free disk space it needs. The only module importing
the ``qdrant_edge`` engine (:mod:`~lmk_rag.store.bm25` imports its BM25 model alone).

Qdrant Edge is beta; keep every use of its API in this file.

Free disk space is checked before the engine needs it. Edge keeps its vectors, payloads and WAL in memory-mapped
files it creates at full size but sparse (32 MB chunks), then fills page by page. A page it touches on a full file
system cannot be backed, and the process dies with SIGBUS: no exception, no error line, and opening the store again
touches the same pages. So the store asks for the space first and raises :class:`~lmk_rag.errors.StoreFullError`
while nothing has been written.

What a shard may still fill without asking is its *debt*: the apparent size of its files minus the space they
hold. Measured on a tmpfs (docs/decisions.md, "Free space before the engine needs it"): opening a store after a
write filled up to 107 MB of that debt (a WAL replay into the sparse chunks), writing 14.2 MB of points allocated
32 MB (2.25x: vectors, payload, WAL), and ``optimize()`` allocated 0.6x of what the shard held. Hence the rules:
an open needs the debt plus :data:`RESERVE`, a write the debt plus :data:`WRITE_FACTOR` times its bytes plus
:data:`RESERVE`, an optimize the debt plus what the shard holds plus :data:`RESERVE`.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import qdrant_edge as qe

from lmk_rag.errors import CorruptStoreError, StoreFullError, StoreLockedError, StoreReadOnlyError, VectorSizeError
from lmk_rag.jsonl import read_json_object
from lmk_rag.store.base import Backend, IndexKind
from lmk_rag.store.engine_errors import Guarded
from lmk_rag.store.filters import ConditionBuilder
from lmk_rag.store.folder_locks import CommitLock
from lmk_rag.store.records import vector_layout
from lmk_rag.store.types import (
    DEFAULT_BATCH_SIZE,
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
    SparseVector,
    Sum,
)

SETTINGS_FILE = "lmk_rag.json"
SHARD_DIR = "shard"
_NO_HNSW = qe.HnswIndexConfig(m=0, ef_construct=100, full_scan_threshold=10_000)
_INDEX_TYPES = {
    "keyword": qe.PayloadSchemaType.Keyword,
    "integer": qe.PayloadSchemaType.Integer,
    "float": qe.PayloadSchemaType.Float,
    "text": qe.TextIndexParams(tokenizer=qe.TokenizerType.Prefix, lowercase=True),
    "bool": qe.PayloadSchemaType.Bool,
    "datetime": qe.PayloadSchemaType.Datetime,
    "uuid": qe.PayloadSchemaType.Uuid,
}


class EdgeConditions:
    """Native Qdrant Edge filter constructors for :func:`lmk_rag.store.filters.translate`."""

    def match(self, key: str, value: Any) -> Any:
        """Exact match of one value (a Python bool is passed as ``numpy.bool_``: the binding would read it as 1)."""
        return qe.FieldCondition(key=key, match=qe.MatchValue(np.bool_(value) if isinstance(value, bool) else value))

    def match_any(self, key: str, values: list[Any]) -> Any:
        """Match any of the values."""
        return qe.FieldCondition(key=key, match=qe.MatchAny(values))

    def match_text(self, key: str, text: str) -> Any:
        """Full-text match."""
        return qe.FieldCondition(key=key, match=qe.MatchText(text))

    def match_substring(self, key: str, text: str) -> Any:
        """The string (or a string element of the list) holds ``text`` (case-sensitive)."""
        return qe.FieldCondition(key=key, match=qe.MatchSubstring(text))

    def range(self, key: str, bounds: dict[str, float]) -> Any:
        """Numeric range."""
        return qe.FieldCondition(key=key, range=qe.RangeFloat(**bounds))

    def datetime_range(self, key: str, bounds: dict[str, str]) -> Any:
        """Range of points in time."""
        return qe.FieldCondition(key=key, range=qe.RangeDateTime(**bounds))

    def is_empty(self, key: str) -> Any:
        """Missing, null or empty."""
        return qe.IsEmptyCondition(key)

    def combine(self, must: list[Any], should: list[Any], must_not: list[Any]) -> Any:
        """A native filter."""
        return qe.Filter(must=must or None, should=should or None, must_not=must_not or None)


def edge_config(spec: CollectionSpec) -> qe.EdgeConfig:
    """The Edge shard configuration of a collection spec (pure; tested on its own).

    :param spec: what the store holds (see :mod:`lmk_rag.store.records`).
    :return: the config: dense vectors with HNSW, scored ones and multivectors (MaxSim) without, each quantized
        and placed as ``spec.storage`` says; sparse vectors with the IDF modifier; the payloads warmed into the page
        cache when the shard loads (Edge's default reads them from disk at a search's first touch), or left on disk
        with the vectors (``storage.on_disk``).
    """
    storage = spec.storage
    vectors_memory = qe.Memory.Cold if storage.on_disk else None
    hnsw = qe.HnswIndexConfig(m=spec.storage.hnsw_m, ef_construct=spec.storage.ef_construct, full_scan_threshold=10_000,
                              memory=qe.Memory.Cold if storage.hnsw_on_disk else None)
    vectors, sparse = {}, {}
    for slot in vector_layout(spec):
        if slot.kind in ("dense", "scored"):
            vectors[slot.name] = qe.EdgeVectorParams(
                size=slot.size, distance=qe.Distance.Cosine, hnsw_config=hnsw if slot.kind == "dense" else _NO_HNSW,
                memory=vectors_memory, quantization_config=_quantization(storage.node_quantization),
            )
        elif slot.kind == "multivector":
            vectors[slot.name] = qe.EdgeVectorParams(
                size=slot.size,
                distance=qe.Distance.Cosine,
                multivector_config=qe.MultiVectorConfig(qe.MultiVectorComparator.MaxSim),
                hnsw_config=_NO_HNSW,
                quantization_config=_quantization(storage.quantization),
                memory=vectors_memory,
            )
        else:
            sparse[slot.name] = qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)
    return qe.EdgeConfig(vectors=vectors, sparse_vectors=sparse or None,
                         payload_memory=qe.Memory.Cold if storage.on_disk else qe.Memory.Cached)


def _quantization(kind: Quantization) -> Any:
    """The Edge quantization config of a kind (its compressed copy pinned in RAM), or None for ``"none"``."""
    if kind == "none":
        return None
    if kind == "int8":
        return qe.ScalarQuantizationConfig(qe.ScalarType.Int8, quantile=0.99, memory=qe.Memory.Pinned)
    if kind == "turbo4":
        return qe.TurboQuantQuantizationConfig(bits=qe.TurboQuantBitSize.Bits4, memory=qe.Memory.Pinned)
    return qe.BinaryQuantizationConfig(memory=qe.Memory.Pinned)


def _params(options: SearchOptions) -> Any:
    """The Edge search parameters of a plan's dense searches and its rerank: candidates scored with a quantized copy
    are always rescored with the original vectors (Qdrant's default is not the same for every quantization: it
    returns TurboQuant's own multivector scores), or an exact search skips the copies and the HNSW graph."""
    if options.exact:
        return qe.SearchParams(exact=True, quantization=qe.QuantizationSearchParams(ignore=True))
    return qe.SearchParams(hnsw_ef=options.hnsw_ef, quantization=qe.QuantizationSearchParams(
        rescore=True, oversampling=options.oversampling))


class EdgeBackend(Backend):
    """A Qdrant Edge shard in ``<folder>/shard`` with the store's settings in ``<folder>/lmk_rag.json``.

    :param folder: the store folder.
    :param batch_size: points per update operation of an upsert.
    :param commits: the folder's commit lock, taken around every call that changes its files (see
        :mod:`~lmk_rag.store.folder_locks`); None when no other process can read the folder (a reader's copy).
    """

    name = "qdrant-edge"
    single_writer = True
    ordered_upserts = True  # update operations go through the shard's write-ahead log, one record each, in order

    def __init__(self, folder: str | os.PathLike[str], batch_size: int = DEFAULT_BATCH_SIZE,
                 commits: CommitLock | None = None) -> None:
        """Open the shard if the folder holds one; :meth:`create` makes a new one."""
        self.folder = Path(folder)
        self.batch_size = batch_size
        self.commits = commits
        self._shard: qe.EdgeShard | None = None
        self._conditions = EdgeConditions()
        if (self.folder / SHARD_DIR).exists():
            require_space(self.folder, "open the store")  # loading replays the WAL into sparse pages
            with self._changing():  # loading rewrites files, not what the store holds
                self._shard = self._load()

    def _changing(self, changes: bool = False) -> contextlib.AbstractContextManager[None]:
        """The commit lock held alone around a call that writes the folder's files (nothing without one).

        :param changes: the call changes what the store holds.
        """
        return contextlib.nullcontext() if self.commits is None else self.commits.exclusive(changes)

    @property
    def builder(self) -> ConditionBuilder:
        """Edge filter constructors."""
        return self._conditions

    @property
    def shard(self) -> Any:
        """The open shard; an engine failure in any call (an exception or a Rust panic) is a
        :class:`CorruptStoreError` naming the folder, with the engine's error chained."""
        if self._shard is None:
            raise CorruptStoreError(f"{self.folder}: no Qdrant Edge shard in {self.folder / SHARD_DIR}")
        return Guarded(self._shard, self._engine_error)

    def _engine_error(self, name: str, error: BaseException) -> Exception:
        """An engine failure as :class:`CorruptStoreError` naming the folder and the call (a full disk as
        :class:`StoreFullError`: the data is intact, the advice is to free space)."""
        if "No space left" in str(error):
            return StoreFullError(
                f"{self.folder}: the disk is full ({name}: {error}); the documents acknowledged before are intact: "
                "free space and retry"
            )
        return CorruptStoreError(
            f"{self.folder}: Qdrant Edge failed in {name} ({error}); the store may be damaged: run "
            f"lmk-rag check --store {self.folder}"
        )

    def _load(self) -> qe.EdgeShard:
        """Load the shard, turning Edge's errors (and its Rust panics) into typed ones."""
        try:
            return qe.EdgeShard.load(str(self.folder / SHARD_DIR))
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as error:  # Edge raises plain Exception, or pyo3's PanicException (a BaseException)
            message = str(error)
            if "WouldBlock" in message:
                raise StoreLockedError(f"{self.folder}: the shard is open in another process ({error})") from error
            if "Permission denied" in message or "Read-only file system" in message:
                raise StoreReadOnlyError(
                    f"{self.folder}: Qdrant Edge cannot open a store it may not write (it maps its storage "
                    "writable); copy the folder somewhere writable, or serve the data from a Qdrant server"
                ) from error
            raise CorruptStoreError(
                f"{self.folder}: cannot load the Qdrant Edge shard ({message}); the store is damaged: re-ingest "
                "into a new store (lmk-rag ingest ... --store NEW_FOLDER)"
            ) from error

    def exists(self) -> bool:
        """Whether the folder holds a shard."""
        return self._shard is not None

    def create(self, spec: CollectionSpec) -> None:
        """Create the shard with the spec's named vectors."""
        require_space(self.folder, "create a store", NEW_SHARD)
        with self._changing(True):
            self._shard = qe.EdgeShard.create(str(self.folder / SHARD_DIR), edge_config(spec))

    def vector_names(self) -> set[str]:
        """Names from the persisted shard config."""
        config = self._shard_config()
        return set(config.get("vectors", {})) | set(config.get("sparse_vectors", {}))

    def vector_sizes(self) -> dict[str, int]:
        """Dense vector sizes from the persisted shard config."""
        return {name: vector["size"] for name, vector in self._shard_config().get("vectors", {}).items()}

    def _shard_config(self) -> dict[str, Any]:
        """The persisted shard config (``edge_config.json``).

        :raises CorruptStoreError: when it cannot be read.
        """
        try:
            return json.loads((self.folder / SHARD_DIR / "edge_config.json").read_text())
        except (OSError, ValueError) as error:
            raise CorruptStoreError(f"{self.folder}: unreadable shard config: {error}") from error

    def read_settings(self) -> dict[str, Any] | None:
        """Read ``lmk_rag.json``; None when absent."""
        path = self.folder / SETTINGS_FILE
        if not path.exists():
            return None
        return read_json_object(path, CorruptStoreError, "store settings", "the folder is damaged")

    def write_settings(self, settings: dict[str, Any]) -> None:
        """Write ``lmk_rag.json`` atomically (temp file, fsync, rename)."""
        with self._changing(True):
            self._write_settings(settings)

    def _write_settings(self, settings: dict[str, Any]) -> None:
        """Write the record (see :meth:`write_settings`)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=".lmk_rag.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as handle:
                json.dump(settings, handle, indent=2, sort_keys=True)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, self.folder / SETTINGS_FILE)
        except OSError as error:
            Path(tmp).unlink(missing_ok=True)
            if error.errno == errno.ENOSPC:
                raise StoreFullError(
                    f"{self.folder}: the disk is full (writing the settings record); the previous record and the "
                    "documents are intact: free space and retry"
                ) from error
            raise

    def reserve(self, points: Sequence[PointData], what: str) -> None:
        """Check the free space a change needs (see :func:`require_space`) before any of it is written."""
        require_space(self.folder, what, WRITE_FACTOR * points_bytes(points))

    def create_payload_index(self, key: str, kind: IndexKind) -> None:
        """Index a payload path."""
        with self._changing(True):
            self.shard.update(qe.UpdateOperation.create_field_index(key, _INDEX_TYPES[kind]))

    def upsert(self, points: list[PointData]) -> None:
        """Upsert points, :attr:`batch_size` per update operation (one WAL record each)."""
        try:
            with self._changing(True):
                for start in range(0, len(points), self.batch_size):
                    native = [qe.Point(id=p.id, vector=_native_vectors(p.vectors), payload=p.payload)
                              for p in points[start : start + self.batch_size]]
                    self.shard.update(qe.UpdateOperation.upsert_points(native))
        except Exception as error:
            if "dimension" in str(error).lower():
                raise VectorSizeError(f"{self.folder}: {error}") from error
            raise

    def delete(self, native_filter: Any) -> None:
        """Delete by filter."""
        with self._changing(True):
            self.shard.update(qe.UpdateOperation.delete_points_by_filter(native_filter))

    def set_payload(self, native_filter: Any, payload: dict[str, Any]) -> None:
        """Set payload keys by filter (one update operation)."""
        with self._changing(True):
            self.shard.update(qe.UpdateOperation.set_payload_by_filter(native_filter, payload))

    def query(self, plan: QueryPlan) -> list[list[ScoredPointData]]:
        """A plan's Query API calls: one (a batch of one request per scorer, each scoring the union of the
        prefetches) or, for a plan with a plain search, two, so that its sparse search runs once: the plain search
        first (ids and scores), then the scorers, whose prefetch takes its points by id instead of searching BM25
        again (:func:`query_requests`). Both calls see one state of the shard: this process is its only writer, and
        the store holds its read lock across them (:meth:`~lmk_rag.store.read_write_lock.ReadWriteLock.reading`)."""
        searched = None if plan.search is None else self.shard.query(_plain_search(plan))
        requests = query_requests(plan, searched)
        if len(requests) == 1:
            results = [self.shard.query(requests[0])]
        else:
            results = self.shard.query_batch(qe.QueryBatchRequest(requests))
        if searched is not None:
            results = [*results, searched]
        return [_scored(points) for points in results]

    def retrieve(self, ids: list[str], with_vectors: bool | list[str]) -> list[PointData]:
        """Points by id."""
        if not ids:
            return []
        records = self.shard.retrieve(list(ids), True, with_vectors)
        return [_point(r) for r in records]

    def scroll(
        self, native_filter: Any, with_vectors: bool, limit: int, offset: str | None
    ) -> tuple[list[PointData], str | None]:
        """One page of points."""
        request = qe.ScrollRequest(
            offset=offset, limit=limit, filter=native_filter, with_payload=True, with_vector=with_vectors
        )
        records, next_offset = self.shard.scroll(request)
        return [_point(r) for r in records], None if next_offset is None else str(next_offset)

    def count(self, native_filter: Any) -> int:
        """Exact count."""
        return int(self.shard.count(qe.CountRequest(exact=True, filter=native_filter)))

    def optimize(self) -> bool:
        """Build the HNSW index and merge segments in-process (blocking: Edge has no background optimizer)."""
        require_space(self.folder, "optimize the store", shard_bytes(self.folder / SHARD_DIR)[1])  # rewritten
        with self._changing():  # new segments, the same points
            return bool(self.shard.optimize())

    def flush(self) -> None:
        """Flush the shard to disk."""
        with self._changing():
            self.shard.flush()

    def close(self) -> None:
        """Flush and close the shard (idempotent)."""
        if self._shard is not None:
            shard, self._shard = self.shard, None
            with self._changing():
                try:
                    shard.flush()
                finally:
                    shard.close()


def query_requests(plan: QueryPlan, searched: list[Any] | None = None) -> list[Any]:
    """The Edge requests of a plan's scorers: shared prefetch branches, a plain search without them, or an MMR pick;
    the first scorer's results rescored by the plan's formula where it has one (a prefetch of that scorer under a
    formula query, :func:`formula`).

    :param plan: the plan.
    :param searched: the plan's plain search, already run (:func:`_plain_search`): its points' ids replace its
        prefetch branch.
    :return: one request per scorer, in scorer order.
    """
    params = _params(plan.options)
    prefetches = [
        qe.Prefetch(
            limit=plan.prefetch_limit,
            query=_nearest(branch),
            filter=plan.filter,
            params=None if isinstance(branch.query, SparseVector) else params,
        )
        for branch in plan.prefetch
        if searched is None or branch != plan.search
    ]
    if searched:
        prefetches.append(qe.Prefetch(limit=len(searched), filter=qe.Filter(
            must=[qe.HasIdCondition({point.id for point in searched})])))
    payload = qe.PayloadSelector.Include(plan.payload_keys) if plan.payload_keys else False
    requests = [
        qe.QueryRequest(
            limit=plan.limit,
            prefetches=prefetches or None,
            query=_nearest(scorer) if plan.mmr_lambda is None else qe.Mmr(
                scorer.query, plan.mmr_lambda, plan.prefetch_limit, using=scorer.using
            ),
            filter=plan.filter,
            params=None if isinstance(scorer.query, SparseVector) else params,
            with_payload=payload,
        )
        for scorer in plan.scorers
    ]
    if plan.formula is not None:
        scorer = plan.scorers[0]
        scored = qe.Prefetch(limit=plan.limit, query=_nearest(scorer), prefetches=prefetches or None,
                             filter=plan.filter, params=params)
        requests[0] = qe.QueryRequest(limit=plan.limit, prefetches=[scored], query=formula(plan.formula),
                                      filter=plan.filter, with_payload=payload)
    return requests


def formula(expression: Expression) -> Any:
    """A backend-neutral formula as an Edge formula query (its payload values' defaults gathered)."""
    defaults: dict[str, float] = {}

    def term(node: Expression) -> Any:
        if isinstance(node, Score):
            return qe.Expression.Variable("$score")
        if isinstance(node, Constant):
            return qe.Expression.Constant(node.value)
        if isinstance(node, PayloadValue):
            defaults[node.key] = node.default
            return qe.Expression.Variable(node.key)
        if isinstance(node, Ln):
            return qe.Expression.Ln(term(node.of))
        if isinstance(node, Sum):
            return qe.Expression.Sum([term(child) for child in node.terms])
        return qe.Expression.Mult([term(child) for child in node.factors])  # a Product

    root = term(expression)
    return qe.Formula(root, defaults=defaults)


def _plain_search(plan: QueryPlan) -> Any:
    """The Edge request of a plan's plain search: ids and scores only (see :attr:`QueryPlan.search`)."""
    return qe.QueryRequest(limit=plan.prefetch_limit, query=_nearest(plan.search), filter=plan.filter,
                           with_payload=False)


def _scored(points: list[Any]) -> list[ScoredPointData]:
    """Edge's scored points as neutral ones."""
    return [ScoredPointData(str(p.id), float(p.score), p.payload or {}) for p in points]


def _nearest(branch: Branch) -> Any:
    """A nearest-neighbour query on one named vector (dense, multivector or sparse)."""
    query = branch.query
    if isinstance(query, SparseVector):
        query = qe.SparseVector(query.indices, query.values)
    return qe.Query.Nearest(query, using=branch.using)


def _native_vectors(vectors: dict[str, Any]) -> dict[str, Any]:
    """Neutral named vectors to Edge ones (sparse vectors become ``qe.SparseVector``)."""
    return {
        name: qe.SparseVector(v.indices, v.values) if isinstance(v, SparseVector) else v for name, v in vectors.items()
    }


def _point(record: Any) -> PointData:
    """An Edge record as a neutral point (``record.vector`` read once: each read builds its Python lists anew)."""
    vectors: dict[str, Any] = {}
    named = record.vector
    if isinstance(named, dict):
        for name, value in named.items():
            is_sparse = hasattr(value, "indices")
            vectors[name] = SparseVector(list(value.indices), list(value.values)) if is_sparse else value
    return PointData(str(record.id), vectors, record.payload or {})


#: The apparent size of a new, empty shard (measured: 128.2 MB of sparse files, 10 MB of them allocated).
NEW_SHARD = 129 * 2**20
#: Headroom for the files a shard creates as it grows (one 32 MB WAL segment and one 32 MB storage chunk).
RESERVE = 64 * 2**20
#: Bytes allocated per byte of points written (measured 2.25x, rounded up).
WRITE_FACTOR = 3
#: Bytes of a float in the engine's vector storages.
FLOAT_BYTES = 4


def shard_bytes(folder: Path) -> tuple[int, int]:
    """``(apparent, allocated)`` bytes of the files under ``folder``."""
    apparent = allocated = 0
    for root, _, files in os.walk(folder):
        for name in files:
            try:
                stat = os.stat(os.path.join(root, name))
            except FileNotFoundError:  # the engine replaced it meanwhile
                continue
            apparent += stat.st_size
            allocated += stat.st_blocks * 512
    return apparent, allocated


def points_bytes(points: Iterable[PointData]) -> int:
    """About the bytes the points take in the engine's storages: their floats and their JSON payloads."""
    total = 0
    for point in points:
        for vector in point.vectors.values():
            if isinstance(vector, SparseVector):
                total += 2 * FLOAT_BYTES * len(vector.indices)
            else:
                rows = vector if len(vector) and hasattr(vector[0], "__len__") else [vector]
                total += FLOAT_BYTES * sum(len(row) for row in rows)
        total += len(json.dumps(point.payload, ensure_ascii=False))
    return total


def require_space(folder: Path, what: str, extra: int = 0) -> None:
    """Raise unless the file system of ``folder`` has room for the shard's debt, ``extra`` bytes and the reserve.

    :param folder: the store folder (it exists).
    :param what: what is about to happen (``"open"``, ``"write 120 nodes"``), for the message.
    :param extra: bytes the operation adds beyond the debt.
    :raises StoreFullError: naming the space needed and free, and that freeing space and retrying is safe.
    """
    apparent, allocated = shard_bytes(folder)
    needed = max(apparent - allocated, 0) + extra + RESERVE
    free = shutil.disk_usage(folder).free
    if free < needed:
        raise StoreFullError(
            f"{folder}: not enough free disk space to {what}: about {needed / 2**20:.0f} MB needed, "
            f"{free / 2**20:.0f} MB free. Nothing was written and the stored documents are intact: free space "
            "and retry"
        )
