"""``LandmarkStore``: landmark nodes in Qdrant (Edge in-process by default, or qdrant-client), two-stage search.

The facade picks a backend once, records how the vectors were made, cuts documents into nodes,
writes them without ever losing or doubling a document (see :mod:`lmk_rag.store.records`), and
searches in one Query API call: dense and BM25 prefetch, then the candidates scored by MaxSim (the rerank) and by
BM25, fused into one score (see :mod:`lmk_rag.store.query`).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from filelock import FileLock, Timeout

from lmk_rag.errors import (
    CorruptStoreError,
    InvalidInputError,
    SettingsMismatchError,
    StoreError,
    StoreLockedError,
    VectorSizeError,
)
from lmk_rag.store import records as rec
from lmk_rag.store.base import Backend
from lmk_rag.store.bm25 import BM25_TOKENIZER, Bm25Encoder
from lmk_rag.store.filters import FilterLike, translate
from lmk_rag.store.query import DEFAULT_ALPHA, best_hits, check_alpha, fuse, plan_search
from lmk_rag.store.settings import build_meta, check_encoder, check_static, validate_meta
from lmk_rag.store.types import Branch, CollectionSpec, Hit, NodeRecord, PointData, Quantization, Rerank
from lmk_rag.vectors import l2_normalize

logger = logging.getLogger(__name__)

DEFAULT_PATH = "./lmk_store"
LOCK_FILE = "lmk_rag.lock"
RERANKS = ("landmarks", "static", "none")
Document = tuple[str, str, "dict[str, Any] | None"]


class LandmarkStore:
    """Landmark nodes of documents in Qdrant, searched in two stages.

    Exactly one of ``path`` (Qdrant Edge folder; the default ``./lmk_store``), ``url`` (a Qdrant
    server), ``client`` (an existing ``QdrantClient``) or ``location`` (qdrant-client local mode:
    ``":memory:"`` or a folder) picks the backend.

    :param path: folder of an embedded Qdrant Edge store (created if missing).
    :param url: URL of a Qdrant server or cluster.
    :param api_key: API key for ``url``.
    :param client: an existing ``qdrant_client.QdrantClient``.
    :param location: qdrant-client local mode: ``":memory:"`` or a folder.
    :param encoder: the :class:`~lmk_rag.LandmarkEncoder`; None rebuilds it from the store's recorded
        settings (or uses the defaults for a new store). Must match a store's recorded settings.
    :param static_encoder: object with ``.dim``, ``.fingerprint``, ``.encode_document_tokens(text)``
        and ``.encode_query_tokens(text)``; fills the static MaxSim slot (needed for ``rerank="static"``).
    :param node_tokens: node size in tokens when the store cuts documents; None = as recorded (256 for new stores).
    :param collection: collection name on qdrant-client backends.
    :param bm25: store a BM25 sparse vector per node, used in the prefetch and fused into the final score;
        None = as recorded (on for new stores, see docs/decisions.md).
    :param alpha: weight of the dense (rerank) side in the final score, in [0, 1]; 1 = MaxSim alone, 0 = BM25
        alone. None = as recorded (:data:`~lmk_rag.store.query.DEFAULT_ALPHA` for new stores); a value given
        for a new store is recorded, for an existing one it applies to this handle. ``search`` may override it.
    :param document_vector: store each node's document vector (normalised mean of all the document's chunk
        vectors) and add a prefetch by it, fused by RRF; None = as recorded, off for new stores
        (see docs/decisions.md).
    :param quantization: ``"int8"`` or ``"binary"`` quantization of the multivectors of a new store.
    :param create: create the store when missing; False raises :class:`StoreError` instead.
    :param prefetch_limit: dense (and BM25) candidates reranked per query (at least ``4 * k``).
    :param hnsw_ef: HNSW ``ef`` of the dense prefetch (None: Qdrant's default).
    :param batch_size: documents encoded and written per batch.
    :param server_options: pass-through for qdrant-client backends: ``prefer_grpc``, ``timeout``,
        ``shard_number``, ``replication_factor``, ``write_consistency_factor``, ``upload_parallel``,
        ``upload_batch_size`` (see :mod:`lmk_rag.store.server`).
    :raises StoreLockedError: when another process has the store open.
    :raises CorruptStoreError: when the folder or collection is damaged or not a lmk-rag store.
    :raises SettingsMismatchError: when ``encoder``/``static_encoder``/``bm25``/``document_vector`` differ from
        the store's.
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
        node_tokens: int | None = None,
        collection: str = "lmk_rag",
        bm25: bool | None = None,
        alpha: float | None = None,
        document_vector: bool | None = None,
        quantization: Quantization | None = None,
        create: bool = True,
        prefetch_limit: int = 100,
        hnsw_ef: int | None = None,
        batch_size: int = 8,
        **server_options: Any,
    ) -> None:
        """Open or create the store (see the class docstring)."""
        given = (("path", path), ("url", url), ("client", client), ("location", location))
        chosen = [name for name, value in given if value is not None]
        if len(chosen) > 1:
            raise InvalidInputError(f"give only one of path, url, client, location; got {', '.join(chosen)}")
        if server_options and (path is not None or not chosen):
            raise InvalidInputError(f"options {sorted(server_options)} only apply to qdrant-client backends")
        if quantization not in (None, "int8", "binary"):
            raise InvalidInputError(f"quantization must be None, 'int8' or 'binary', got {quantization!r}")
        self._encoder = encoder
        self.static_encoder = static_encoder
        self.prefetch_limit = prefetch_limit
        self.hnsw_ef = hnsw_ef
        self.batch_size = batch_size
        self._lock: FileLock | None = None
        self._bm25_encoder: Bm25Encoder | None = None
        self._alpha = None if alpha is None else check_alpha(alpha)
        folder = Path(path if path is not None else DEFAULT_PATH) if not chosen or path is not None else None
        self.where = str(folder) if folder is not None else f"collection {collection!r}"
        if folder is not None:
            self._backend: Backend = self._open_edge(folder, create)
        else:
            from lmk_rag.store.server import ServerBackend

            if location not in (None, ":memory:"):
                self._lock = _acquire_lock(Path(location))
            self._backend = ServerBackend(
                url=url, api_key=api_key, client=client, location=location, collection=collection, **server_options
            )
        try:
            self._meta = self._open_meta(
                create, encoder, static_encoder, node_tokens, bm25, document_vector, quantization
            )
            self._repair()
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------------ opening

    def _open_edge(self, folder: Path, create: bool) -> Backend:
        """Check the folder, take its lock and open the Edge shard."""
        from lmk_rag.store.edge import META_FILE, SHARD_DIR, EdgeBackend

        if folder.exists() and not folder.is_dir():
            raise CorruptStoreError(f"{folder}: is a file, not a lmk-rag store folder")
        if folder.is_dir():
            foreign = sorted(p.name for p in folder.iterdir() if p.name not in (META_FILE, SHARD_DIR, LOCK_FILE))
            foreign = [name for name in foreign if not name.startswith(".lmk_rag.")]
            if foreign:
                raise CorruptStoreError(f"{folder}: not a lmk-rag store (holds {', '.join(foreign[:5])})")
        elif not create:
            raise StoreError(f"no lmk-rag store at {folder}")
        folder.mkdir(parents=True, exist_ok=True)
        self._lock = _acquire_lock(folder)
        try:
            return EdgeBackend(folder)
        except BaseException:
            self._lock.release()
            self._lock = None
            raise

    def _open_meta(
        self,
        create: bool,
        encoder: Any,
        static_encoder: Any,
        node_tokens: int | None,
        bm25: bool | None,
        document_vector: bool | None,
        quantization: Quantization | None,
    ) -> dict[str, Any]:
        """Read and check the recorded settings, or create the collection and record them."""
        meta = self._backend.read_meta()
        if meta is None:
            if self._backend.exists() and self._backend.count(None) > 0:
                raise CorruptStoreError(f"{self.where}: holds points but no lmk-rag settings record (foreign data)")
            if not create:
                raise StoreError(f"no lmk-rag store at {self.where}")
            spec_options = {
                "bm25": True if bm25 is None else bm25,
                "document_vector": bool(document_vector),
                "quantization": quantization,
            }
            search = {
                "alpha": DEFAULT_ALPHA if self._alpha is None else self._alpha,
                "bm25_tokenizer": BM25_TOKENIZER,
            }
            if not spec_options["bm25"]:
                search["alpha"] = 1.0
            return self._create(static_encoder, node_tokens or 256, spec_options, search)
        meta = validate_meta(meta, self.where)
        if not self._backend.exists():
            raise CorruptStoreError(f"{self.where}: settings recorded but the vector data is missing")
        if encoder is not None:
            check_encoder(meta, encoder, self.where)
        check_static(meta, static_encoder, self.where)
        for name, given in (("bm25", bm25), ("document_vector", document_vector)):
            if given is not None and given != bool(meta.get(name)):
                raise SettingsMismatchError(
                    f"{self.where} was built with {name}={meta.get(name)}, given {name}={given}"
                )
        if node_tokens is not None and meta.get("node_tokens") != node_tokens:
            raise SettingsMismatchError(
                f"{self.where} cuts nodes of {meta.get('node_tokens')} tokens, given {node_tokens}"
            )
        expected = {"node", "chunks"} | {name for name in ("static", "bm25") if meta.get(name)}
        expected |= {"document"} if meta.get("document_vector") else set()
        found = self._backend.vector_names()
        if not expected <= found:
            raise CorruptStoreError(f"{self.where}: vectors {sorted(found)}, expected {sorted(expected)}")
        return meta

    def _create(
        self, static_encoder: Any, node_tokens: int, spec_options: dict[str, Any], search: dict[str, Any]
    ) -> dict[str, Any]:
        """Create the collection and its payload indexes, then record the settings (in that order).

        :param spec_options: ``bm25``, ``document_vector`` and ``quantization`` of the :class:`CollectionSpec`.
        :param search: the recorded search settings, ``alpha`` and ``bm25_tokenizer``.
        """
        encoder = self.encoder
        spec = CollectionSpec(
            dim=encoder.dim, static_dim=None if static_encoder is None else static_encoder.dim, **spec_options
        )
        if not self._backend.exists():
            self._backend.create(spec)
        for key, kind in (("kind", "keyword"), ("doc_id", "keyword"), ("node_id", "keyword"), ("version", "integer")):
            self._backend.create_payload_index(key, kind)
        meta = {**build_meta(encoder, static_encoder, spec, node_tokens), **search}
        self._backend.flush()
        self._backend.write_meta(meta)
        return meta

    @property
    def encoder(self) -> Any:
        """The landmark encoder; built on first use from the recorded settings (or the defaults)."""
        if self._encoder is None:
            from lmk_rag.encoder import LandmarkEncoder

            meta = getattr(self, "_meta", None)
            if meta is None:
                self._encoder = LandmarkEncoder()
            else:
                self._encoder = LandmarkEncoder(**meta["encoder"]["settings"])
                check_encoder(meta, self._encoder, self.where)
        return self._encoder

    @property
    def settings(self) -> dict[str, Any]:
        """The store's recorded settings (a copy)."""
        return dict(self._meta)

    @property
    def dim(self) -> int:
        """Size of the node and chunk vectors."""
        return int(self._meta["encoder"]["dim"])

    @property
    def node_tokens(self) -> int:
        """Node size in tokens used when the store cuts documents."""
        return int(self._meta["node_tokens"])

    @property
    def bm25(self) -> bool:
        """Whether the store holds BM25 vectors and fuses them into the prefetch."""
        return bool(self._meta.get("bm25"))

    @property
    def alpha(self) -> float:
        """Weight of the dense side in the final score: this handle's, else the recorded one."""
        if self._alpha is not None:
            return self._alpha
        return float(self._meta.get("alpha", DEFAULT_ALPHA if self.bm25 else 1.0))

    @property
    def document_vector(self) -> bool:
        """Whether the store holds document vectors and adds a prefetch by them."""
        return bool(self._meta.get("document_vector"))

    @property
    def backend(self) -> Backend:
        """The backend (for benchmarks and diagnostics)."""
        return self._backend

    # ------------------------------------------------------------------ writing

    def add_document(self, doc_id: str, text: str, metadata: dict[str, Any] | None = None) -> int:
        """Encode one document, cut it into nodes and write them (replacing an older version).

        :param doc_id: the document's id, unique in the store.
        :param text: the document text.
        :param metadata: JSON-able metadata for filters and hits.
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
    ) -> int:
        """Encode, cut and write documents in batches; each batch is flushed before the next.

        :param documents: ``(doc_id, text, metadata)`` tuples (metadata may be None).
        :param batch_size: documents per batch (default: the store's ``batch_size``).
        :param show_progress_bar: show a tqdm bar (None: only on a terminal).
        :param on_ack: called with the doc ids of each batch once it is durable.
        :return: the number of nodes written.
        """
        from tqdm.auto import tqdm

        size = batch_size or self.batch_size
        total = 0
        docs = list(documents) if not isinstance(documents, list) else documents
        disable = not show_progress_bar if show_progress_bar is not None else None
        with tqdm(total=len(docs), desc="ingest", unit="doc", disable=disable) as bar:
            for batch in _batches(docs, size):
                for doc_id, text, metadata in batch:
                    _check_doc(doc_id, text, metadata)
                encoded = self.encoder.encode_documents([text for _, text, _ in batch])
                writes = []
                for (doc_id, text, metadata), enc in zip(batch, encoded):
                    records = rec.records_from_encoding(doc_id, text, enc, self.node_tokens, metadata)
                    writes.append((doc_id, records, dict(metadata or {})))
                total += self._write(writes)
                if on_ack is not None:
                    on_ack([doc_id for doc_id, _, _ in writes])
                bar.update(len(batch))
        return total

    def upsert_nodes(self, doc_id: str, records: Sequence[NodeRecord], metadata: dict[str, Any] | None = None) -> int:
        """Write pre-encoded nodes as the new version of a document, replacing its old nodes safely.

        :param doc_id: the document; every record's ``doc_id`` must equal it.
        :param records: the document's nodes (node ids unique).
        :param metadata: the document's metadata (default: the first record's).
        :return: the number of nodes written.
        :raises VectorSizeError: when a vector's size differs from the store's.
        """
        records = list(records)
        if not records:
            raise InvalidInputError(f"upsert_nodes({doc_id!r}): no records; use delete_document to remove a document")
        bad = [r.node_id for r in records if r.doc_id != doc_id]
        if bad:
            raise InvalidInputError(f"upsert_nodes({doc_id!r}): records {bad[:3]} belong to other documents")
        if len({r.node_id for r in records}) != len(records):
            raise InvalidInputError(f"upsert_nodes({doc_id!r}): node ids are not unique")
        return self._write([(doc_id, records, dict(metadata if metadata is not None else records[0].metadata))])

    def upsert_documents(
        self,
        documents: Iterable[tuple[str, Sequence[NodeRecord]]],
        *,
        batch_size: int = 64,
        on_ack: Callable[[list[str]], None] | None = None,
    ) -> int:
        """Write many pre-encoded documents, ``batch_size`` documents per write (as :meth:`upsert_nodes`).

        :param documents: ``(doc_id, records)`` pairs; metadata comes from each document's first record.
        :param batch_size: documents per batch (one flush each).
        :param on_ack: called with the doc ids of each batch once it is durable.
        :return: the number of nodes written.
        """
        total, batch = 0, []
        for doc_id, records in documents:
            records = list(records)
            if not records or any(r.doc_id != doc_id for r in records):
                raise InvalidInputError(f"document {doc_id!r}: no records, or records of other documents")
            batch.append((doc_id, records, dict(records[0].metadata)))
            if len(batch) == batch_size:
                total += self._write(batch)
                if on_ack is not None:
                    on_ack([d for d, _, _ in batch])
                batch = []
        if batch:
            total += self._write(batch)
            if on_ack is not None:
                on_ack([d for d, _, _ in batch])
        return total

    def _write(self, writes: list[tuple[str, list[NodeRecord], dict[str, Any]]]) -> int:
        """Write documents as new versions: mark pending, add nodes, flip markers, flush, drop old nodes."""
        unique = {doc_id: (doc_id, records, metadata) for doc_id, records, metadata in writes}
        writes = list(unique.values())
        for _, records, _ in writes:
            for record in records:
                self._check_record(record)
        markers = self._backend.retrieve([rec.marker_point_id(d) for d in unique], False)
        old = {p.payload["doc_id"]: p.payload for p in markers}
        version = max([time.time_ns(), *[(m.get("version") or 0) + 1 for m in old.values()]])
        pending, nodes, committed, done = [], [], [], []
        for doc_id, records, metadata in writes:
            before = old.get(doc_id)
            slot = 0 if before is None or before.get("slot") is None else 1 - int(before["slot"])
            if before is None:
                pending.append(rec.marker_payload(doc_id, None, None, 0, metadata, pending=version))
            else:
                pending.append({**before, "pending": version})
            document = self._document_vector(records)
            nodes.extend(rec.node_point(r, version, slot, self._extra_vectors(r, document)) for r in records)
            committed.append(rec.marker_payload(doc_id, version, slot, len(records), metadata, pending=version))
            done.append(rec.marker_payload(doc_id, version, slot, len(records), metadata))
        self._backend.upsert([rec.marker_point(p) for p in pending])
        self._backend.upsert(nodes)
        self._backend.upsert([rec.marker_point(p) for p in committed])
        self._backend.flush()  # acknowledged: the new versions are durable and visible
        self._drop_other_versions(list(unique), version)
        self._backend.upsert([rec.marker_point(p) for p in done])
        return len(nodes)

    def _drop_other_versions(self, doc_ids: list[str], version: int) -> None:
        """Delete nodes of these documents whose version is not ``version``."""
        b = self._backend.builder
        self._backend.delete(
            b.combine(
                [b.match("kind", rec.NODE), b.match_any("doc_id", doc_ids)], [], [b.match("version", version)]
            )
        )

    def _document_vector(self, records: Sequence[NodeRecord]) -> np.ndarray | None:
        """A document's vector from all its nodes: the normalised mean of its chunk vectors, shape (dim,);
        None when the store holds no document vectors."""
        if not self.document_vector:
            return None
        chunks = np.concatenate([np.asarray(r.chunk_vectors, dtype=np.float32) for r in records])
        return l2_normalize(chunks.mean(axis=0))

    def _extra_vectors(self, record: NodeRecord, document: np.ndarray | None) -> dict[str, Any]:
        """The document, static and BM25 vectors of a node, as the store's settings require.

        :param record: the node.
        :param document: its document's vector (:meth:`_document_vector`), or None.
        """
        extra: dict[str, Any] = {} if document is None else {"document": document}
        if self._meta.get("static") is not None:
            static = record.static_vectors
            if static is None:
                if self.static_encoder is None:
                    raise SettingsMismatchError(
                        f"{self.where} holds static token vectors: open it with static_encoder=... to write"
                    )
                static = self.static_encoder.encode_document_tokens(record.text)
            static = np.asarray(static, dtype=np.float32)
            if static.ndim != 2 or static.shape[1] != self._meta["static"]["dim"] or len(static) == 0:
                expected = self._meta["static"]["dim"]
                raise VectorSizeError(
                    f"node {record.node_id!r}: static vectors of shape {static.shape}, store expects (m>=1, {expected})"
                )
            extra["static"] = np.ascontiguousarray(static)
        if self.bm25:
            extra["bm25"] = self._bm25().embed_document(record.text)
        return extra

    def _check_record(self, record: NodeRecord) -> None:
        """Raise :class:`VectorSizeError` for vectors of the wrong shape."""
        vector = np.asarray(record.vector)
        chunks = np.asarray(record.chunk_vectors)
        if vector.shape != (self.dim,):
            raise VectorSizeError(
                f"node {record.node_id!r}: vector of shape {vector.shape}, store expects ({self.dim},)"
            )
        if chunks.ndim != 2 or chunks.shape[1] != self.dim or len(chunks) == 0:
            raise VectorSizeError(
                f"node {record.node_id!r}: chunk_vectors of shape {chunks.shape}, store expects (n>=1, {self.dim})"
            )

    def _bm25(self) -> Bm25Encoder:
        """The store's BM25 model (the recorded tokenizer)."""
        if self._bm25_encoder is None:
            # stores written before the tokenizer was recorded used Qdrant's default word tokens
            self._bm25_encoder = Bm25Encoder(self._meta.get("bm25_tokenizer", "word"))
        return self._bm25_encoder

    def delete_document(self, doc_id: str) -> bool:
        """Delete a document and its nodes.

        :return: True if the document existed.
        """
        found = self._backend.retrieve([rec.marker_point_id(doc_id)], False)
        if not found:
            return False
        marker = found[0].payload
        self._backend.upsert([rec.marker_point({**marker, "version": None, "pending": 0})])
        self._delete_doc_points(doc_id)
        self._backend.flush()
        return True

    def _delete_doc_points(self, doc_id: str) -> None:
        """Delete a document's nodes, then its marker."""
        b = self._backend.builder
        self._backend.delete(b.combine([b.match("kind", rec.NODE), b.match("doc_id", doc_id)], [], []))
        self._backend.delete(b.combine([b.match("kind", rec.DOC), b.match("doc_id", doc_id)], [], []))

    def clear(self) -> None:
        """Delete every document (the settings stay)."""
        b = self._backend.builder
        self._backend.delete(b.combine([b.match_any("kind", [rec.NODE, rec.DOC])], [], []))
        self._backend.flush()

    def _repair(self) -> None:
        """Finish or undo writes a crash interrupted (markers with ``pending``)."""
        b = self._backend.builder
        pending_filter = b.combine([b.match("kind", rec.DOC)], [], [b.is_empty("pending")])
        markers = list(self._scroll(pending_filter, with_vectors=False))
        for marker in markers:
            payload = marker.payload
            if payload.get("version") is None:
                self._delete_doc_points(payload["doc_id"])
            else:
                self._drop_other_versions([payload["doc_id"]], int(payload["version"]))
                self._backend.upsert([rec.marker_point({k: v for k, v in payload.items() if k != "pending"})])
        if markers:
            self._backend.flush()
            logger.warning("%s: repaired %d document(s) an interrupted write left pending", self.where, len(markers))

    # ------------------------------------------------------------------ reading

    def search(
        self,
        query: str,
        k: int = 10,
        rerank: Rerank = "landmarks",
        filter: FilterLike = None,
        doc_level: bool = True,
        alpha: float | None = None,
    ) -> list[Hit]:
        """Encode a query once and search in two stages (see :meth:`search_encoded`).

        :param query: the query text.
        :param k: hits returned.
        :param rerank: ``"landmarks"`` (chunk MaxSim), ``"static"`` (static token MaxSim) or ``"none"``.
        :param filter: a :class:`~lmk_rag.store.filters.Filter` or ``{key: value}`` dict on metadata.
        :param doc_level: True: at most one hit (the best node) per document.
        :param alpha: weight of the dense side (None: the store's :attr:`alpha`).
        :return: hits, best first.
        """
        _check_rerank(rerank)
        if not isinstance(query, str) or not query.strip():
            raise InvalidInputError("query must be a non-empty string")
        encoded = self.encoder.encode_queries(query)
        static_query = None
        if rerank == "static":
            static_query = self._static_query_encoder().encode_query_tokens(query)
        return self.search_encoded(
            encoded, k=k, rerank=rerank, filter=filter, doc_level=doc_level, static_query=static_query, text=query,
            alpha=alpha,
        )

    def search_encoded(
        self,
        query: Any,
        k: int = 10,
        rerank: Rerank = "landmarks",
        filter: FilterLike = None,
        doc_level: bool = True,
        static_query: np.ndarray | None = None,
        text: str | None = None,
        alpha: float | None = None,
        prefetch_limit: int | None = None,
    ) -> list[Hit]:
        """Search with an already encoded query (one Query API call).

        Candidates come from a dense prefetch by node vector (and document vector) and a BM25 prefetch; each
        is scored by the rerank (cosine-like: MaxSim divided by the number of query vectors) and by BM25 (over
        the best candidate's BM25), and ranked by ``alpha * rerank + (1 - alpha) * bm25``.

        :param query: an :class:`~lmk_rag.EncodedText` (``.vector`` (dim,), ``.chunk_vectors`` (q, dim)).
        :param k: hits returned.
        :param rerank: ``"landmarks"``, ``"static"`` or ``"none"`` (the node vector's cosine).
        :param filter: metadata filter.
        :param doc_level: at most one hit per document.
        :param static_query: the query's static token vectors, shape (q, static_dim); needed for ``"static"``.
        :param text: the query text for BM25; None ranks by the dense side alone.
        :param alpha: weight of the dense side in [0, 1] (None: the store's :attr:`alpha`).
        :param prefetch_limit: candidates per prefetch branch (None: the store's, at least ``4 * k``).
        :return: hits, best first; scores lie in [-1, 1].
        :raises SettingsMismatchError: for ``alpha`` < 1 on a store without BM25.
        """
        _check_rerank(rerank)
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise InvalidInputError(f"k must be an integer >= 1, got {k!r}")
        alpha = self.alpha if alpha is None else check_alpha(alpha)
        if alpha < 1.0 and not self.bm25:
            raise SettingsMismatchError(f"{self.where} has no BM25 vectors: alpha must be 1, got {alpha}")
        vector = np.asarray(query.vector, dtype=np.float32)
        if vector.shape != (self.dim,):
            raise VectorSizeError(f"query vector of shape {vector.shape}, store expects ({self.dim},)")
        scorer = Branch("node", vector.tolist())
        if rerank == "landmarks":
            chunks = np.asarray(query.chunk_vectors, dtype=np.float32).reshape(-1, self.dim)
            scorer = Branch("chunks", chunks.tolist())
        elif rerank == "static":
            scorer = Branch("static", self._static_rerank_query(static_query).tolist())
        dense = [Branch(name, vector.tolist()) for name in ("node", "document") if name != "document" or self.document_vector]
        plan = plan_search(
            dense=dense,
            scorer=scorer,
            sparse=self._bm25().embed_query(text) if self.bm25 and text else None,
            alpha=alpha,
            prefetch_limit=prefetch_limit or max(self.prefetch_limit, 4 * k),
            filter=self._native_filter(filter),
            payload_keys=rec.HIT_KEYS,
            hnsw_ef=self.hnsw_ef,
        )
        results = self._backend.query(plan)
        visible = {point.id for point in self._visible([point for points in results for point in points])}
        ranked = fuse(plan, [[point for point in points if point.id in visible] for points in results], alpha)
        best = best_hits(ranked, k, doc_level)
        full = {p.id: p for p in self._backend.retrieve([pid for pid, _ in best], False)}
        return [rec.hit_from_point(full[pid], score) for pid, score in best if pid in full]

    def _static_rerank_query(self, static_query: np.ndarray | None) -> np.ndarray:
        """Check the query's static token vectors against the store's static slot."""
        if self._meta.get("static") is None:
            raise SettingsMismatchError(f"{self.where} has no static token vectors; rerank='static' is unavailable")
        if static_query is None:
            raise InvalidInputError("rerank='static' needs static_query (the query's static token vectors)")
        vectors = np.asarray(static_query, dtype=np.float32)
        expected = self._meta["static"]["dim"]
        if vectors.ndim != 2 or vectors.shape[1] != expected or len(vectors) == 0:
            raise VectorSizeError(f"static query of shape {vectors.shape}, store expects (q>=1, {expected})")
        return vectors

    def _static_query_encoder(self) -> Any:
        """The static encoder, required for static reranking of a text query."""
        if self.static_encoder is None:
            raise SettingsMismatchError("rerank='static' needs the store opened with static_encoder=...")
        return self.static_encoder

    def _native_filter(self, filter: FilterLike, node_ids: Sequence[str] | None = None) -> Any:
        """The backend filter: nodes only, the caller's filter, optionally some node ids."""
        b = self._backend.builder
        extra = [b.match("kind", rec.NODE)]
        if node_ids is not None:
            extra.append(b.match_any("node_id", list(node_ids)))
        return translate(filter, b, extra)

    def _visible(self, points: list[Any]) -> list[Any]:
        """Keep points whose version is their document's current one (hides half-written versions)."""
        doc_ids = sorted({p.payload["doc_id"] for p in points})
        markers = self._backend.retrieve([rec.marker_point_id(d) for d in doc_ids], False)
        current = {m.payload["doc_id"]: m.payload.get("version") for m in markers}
        return [p for p in points if current.get(p.payload["doc_id"]) == p.payload.get("version")]

    def _scroll(self, native_filter: Any, with_vectors: bool, page: int = 256) -> Iterator[PointData]:
        """Every point matching a native filter."""
        offset: str | None = None
        while True:
            points, offset = self._backend.scroll(native_filter, with_vectors, page, offset)
            yield from points
            if offset is None:
                return

    def get_nodes(self, node_ids: Sequence[str] | None = None, filter: FilterLike = None) -> list[NodeRecord]:
        """Nodes by id and/or metadata filter, with their vectors.

        :param node_ids: node ids to fetch (None: all matching ``filter``).
        :param filter: metadata filter.
        :return: the matching nodes (in no particular order).
        """
        points = self._visible(list(self._scroll(self._native_filter(filter, node_ids), with_vectors=True)))
        return [rec.record_from_point(p) for p in points]

    def doc_ids(self) -> list[str]:
        """The ids of the stored documents, sorted."""
        b = self._backend.builder
        markers = self._scroll(b.combine([b.match("kind", rec.DOC)], [], [b.is_empty("version")]), False)
        return sorted(m.payload["doc_id"] for m in markers)

    def count(self) -> int:
        """The number of stored nodes."""
        return self._backend.count(self._native_filter(None))

    def count_documents(self) -> int:
        """The number of stored documents."""
        b = self._backend.builder
        return self._backend.count(b.combine([b.match("kind", rec.DOC)], [], [b.is_empty("version")]))

    def info(self) -> dict[str, Any]:
        """Where the store is, its counts and recorded settings (JSON-able)."""
        return {
            "backend": self._backend.name,
            "location": self.where,
            "documents": self.count_documents(),
            "nodes": self.count(),
            **{key: value for key, value in self._meta.items() if key not in ("format",)},
        }

    def optimize(self) -> None:
        """Build indexes now (Qdrant Edge optimizes only when asked; servers do it on their own)."""
        optimize = getattr(self._backend, "optimize", None)
        if optimize is not None:
            optimize()

    # ------------------------------------------------------------------ closing

    def close(self) -> None:
        """Flush and release the backend and the lock (idempotent)."""
        backend = getattr(self, "_backend", None)
        if backend is not None:
            backend.close()
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def __enter__(self) -> LandmarkStore:
        """Use as a context manager."""
        return self

    def __exit__(self, *exc: object) -> None:
        """Close on exit."""
        self.close()

    def __repr__(self) -> str:
        """Backend and location."""
        backend = getattr(self, "_backend", None)
        return f"LandmarkStore({backend.name if backend else '?'}: {self.where})"


def _acquire_lock(folder: Path) -> FileLock:
    """Take the folder's write lock without waiting.

    :raises StoreLockedError: when another process holds it.
    """
    folder.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(folder / LOCK_FILE), timeout=0)
    try:
        lock.acquire()
    except Timeout as error:
        raise StoreLockedError(
            f"{folder} is open in another process (lock {folder / LOCK_FILE}); close it first"
        ) from error
    return lock


def _batches(items: list[Document], size: int) -> Iterator[list[Document]]:
    """Consecutive slices of ``size`` items."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _check_doc(doc_id: Any, text: Any, metadata: Any) -> None:
    """Reject documents the store cannot hold, naming the document."""
    if not isinstance(doc_id, str) or not doc_id:
        raise InvalidInputError(f"doc_id must be a non-empty string, got {doc_id!r}")
    if not isinstance(text, str):
        raise InvalidInputError(f"document {doc_id!r}: text must be a str, got {type(text).__name__}")
    if metadata is not None and not isinstance(metadata, dict):
        raise InvalidInputError(f"document {doc_id!r}: metadata must be a dict, got {type(metadata).__name__}")


def _check_rerank(rerank: str) -> None:
    """Reject unknown rerank modes."""
    if rerank not in RERANKS:
        raise InvalidInputError(f"rerank must be one of {RERANKS}, got {rerank!r}")
