"""The reader of a store: searches (fused, MMR) and look-ups; it changes nothing in the store.

A fused search is one Query API call (the rerank and BM25 over the union of the prefetches; on Qdrant Edge two, the
BM25 search first: :class:`~lmk_rag.store.types.QueryPlan`): the query shows only committed nodes
(:func:`~lmk_rag.store.records.searched_filter`) and returns the payloads hits need with the scored points; the
store keeps each document's highest version among them (:func:`~lmk_rag.store.records.latest`) and fuses the
scores. Where no other process writes (Qdrant Edge, a local-mode folder), the query returns ids and scores only, and
the hits' payloads are read by id after ranking, under the same read lock (:meth:`Reader._read_hits`).

The full verification of a store (``lmk-rag check``, :func:`verify`) reads every point: markers against their
nodes, nodes without a current marker, and every vector (finite, and unit length where the store wrote unit
vectors); a handle's first search checks a sample of them (:func:`sample_problem`). Opening a store compares its
committed counts with the engine's (:class:`~lmk_rag.store.writes.CommittedCounts`).
"""

from __future__ import annotations

import math
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from lmk_rag.checks import check_text
from lmk_rag.errors import CorruptStoreError, InvalidInputError, VectorSizeError
from lmk_rag.store import records as rec
from lmk_rag.store.base import Backend
from lmk_rag.store.filters import FilterLike
from lmk_rag.store.query import (
    SearchDefaults,
    SearchPlan,
    best_hits,
    carry_payloads,
    checked_score,
    document_weight,
    fuse,
    keyword_evidence,
    matched_evidence,
    plan_mmr,
    vector_cosines,
)
from lmk_rag.store.read_write_lock import ReadWriteLock
from lmk_rag.store.records import every, scroll
from lmk_rag.store.store_encoder import StoreEncoder
from lmk_rag.store.types import (
    Branch,
    ChunkScore,
    EncodedQuery,
    Evidence,
    Hit,
    NodeRecord,
    Rerank,
    ScoredPointData,
    SearchOptions,
    StoreMode,
)
from lmk_rag.store.vectors import QueryVectors, check_directions


class Reader:
    """Searches and look-ups of one store: :class:`~lmk_rag.store.LandmarkStore`'s methods, on the arguments the
    store has checked (its public methods document them); a search runs the plan the store made of its arguments
    (:func:`~lmk_rag.store.query.plan_search` over :attr:`defaults`).

    :param backend: the store's backend.
    :param where: the store, for messages.
    :param settings: the store's settings record.
    :param queries: makes a query's vectors for the store's rerank and BM25.
    :param encoder: the store's encoder (built on first use).
    :param committed: the ``(documents, nodes)`` the store committed, or None where it records none (for
        :meth:`check`).
    :param mode: the store's mode.
    :param options: this handle's search options (prefetch depth, HNSW ``ef``, oversampling, exact search).
    :param alpha: this handle's weight of the rerank (None: the recorded one).
    :param access: keeps each search's engine calls apart from a write's, between threads.
    """

    def __init__(self, backend: Backend, where: str, settings: dict[str, Any], queries: QueryVectors,
                 encoder: StoreEncoder, committed: Callable[[], tuple[int, int] | None], mode: StoreMode,
                 options: SearchOptions, alpha: float | None, access: ReadWriteLock) -> None:
        """Keep the store's collaborators."""
        self.access = access
        self.backend = backend
        self.where = where
        self.settings = settings
        self.queries = queries
        self.encoder = encoder
        self.committed = committed
        self.options = options
        self.mode = mode
        #: what the store brings to each search's plan
        self.defaults = SearchDefaults.of(where, settings, mode, options, alpha, self._measured_weight)
        self.dim = int(settings["encoder"]["dim"])
        self._sampled = False  # whether this handle has sampled the stored vectors (:meth:`_check_sample`)
        self.documents_held = "document" in rec.recorded_vectors(settings)
        self._document_weight: tuple[Any, float] | None = None  # (the committed entry it was measured at, weight)

    def _measured_weight(self) -> float:
        """The document weight a search's plan takes (:meth:`document_weight`), measured under the read lock, once
        the stored vectors are sampled (:meth:`_check_sample`)."""
        self._check_sample()
        with self.access.reading():
            return self.document_weight()

    def search(self, plan: SearchPlan, query: EncodedQuery | None = None) -> list[Hit]:
        """Run a search's plan: one Query API call (on Edge, its BM25 search first) and, where this process is the
        store's only writer, the look-up of its hits' payloads (:meth:`_read_hits`): its only engine calls once this
        handle has sampled the stored vectors. At ``alpha`` 0 (BM25 alone) a text without BM25 terms (stop words
        only) finds nothing: the rerank never answers for BM25.

        :param plan: the search (:func:`~lmk_rag.store.query.plan_search`).
        :param query: the encoded query (its text the plan's), or None: the plan's text, encoded here (with its
            static token vectors for a static rerank).
        """
        if query is None:
            static = self.queries.static_query(plan.text) if plan.rerank == Rerank.STATIC else None
            with self.encoder.lock:
                encoded = self.encoder.get().encode_queries(plan.text)
            query = EncodedQuery(encoded.vector, encoded.chunk_vectors, plan.text, static)
        self._check_sample()
        sparse = self.queries.sparse_query(plan.text)
        if plan.alpha == 0.0 and plan.text is not None and (sparse is None or not sparse.indices):
            return []  # BM25 alone, and no BM25 term (stop words only): nothing matches, as for unknown words
        scorer = self.queries.scorer(plan.rerank, query)
        matched = self._matched_vector(scorer) if plan.alpha > 0.0 else None
        vector = np.asarray(query.vector, dtype=np.float32).tolist()
        k, one = plan.k, plan.one_per_document
        with self.access.reading():
            request = plan.request(vector, scorer, sparse, self._search_filter(plan.filter),
                                   [] if self.backend.single_writer else rec.HIT_KEYS)
            results = carry_payloads(request, self.backend.query(request))
            if self.backend.single_writer:
                best, vectors = self._read_hits(fuse(request, results), k, one, matched)
            else:
                best = best_hits(fuse(request, rec.latest(results)), k, one)
                vectors = self._read_vectors([point.id for point in best], matched)
        if matched is None:
            return [rec.hit_from_point(point, point.score, keyword_evidence(_span(point))) for point in best]
        queries = _unit(np.asarray(scorer.query if matched == scorer.using else query.chunk_vectors, dtype=np.float32))
        return [rec.hit_from_point(point, point.score, *evidence)
                for point, evidence in zip(best, self._evidence(best, queries, vectors, matched))]

    def _matched_vector(self, scorer: Branch) -> str:
        """The named vector a search's evidence is found in: the static token vectors for a static rerank, else the
        chunk vectors (also for a node-vector rerank, whose one query vector then finds its best chunk), or the node
        vector in a static store searched by its node vectors (no finer vectors to find a passage in)."""
        if scorer.using == "static":
            return "static"
        return "chunks" if self.mode == StoreMode.TRANSFORMER else "node"

    def _read_vectors(self, ids: list[str], name: str | None) -> dict[str, dict[str, Any]]:
        """The named vector ``name`` of points by id, for their evidence (none without a name: BM25 alone)."""
        if name is None or not ids:
            return {}
        return {point.id: point.vectors for point in self.backend.retrieve(ids, [name])}

    def _evidence(self, points: list[ScoredPointData], queries: np.ndarray, vectors: dict[str, dict[str, Any]],
                  name: str) -> list[tuple[tuple[Evidence, ...], tuple[ChunkScore, ...]]]:
        """Each hit's evidence and chunk scores (:func:`~lmk_rag.store.query.matched_evidence`) from its point's
        vector ``name`` (``vectors``, by point id): its chunk vectors and their spans, or its static token vectors and
        their spans (its token encoder's, over its text); the whole node where the vectors or their spans cannot be
        read (a point replaced since the search), or ``name`` is the node vector. The cosines of every hit come from
        one product (:func:`~lmk_rag.store.query.vector_cosines`)."""
        found = [None if name == "node" else vectors.get(point.id, {}).get(name) for point in points]
        read = [rows for rows in found if rows is not None]
        cosines = iter(vector_cosines(queries, read) if read else [])
        out: list[tuple[tuple[Evidence, ...], tuple[ChunkScore, ...]]] = []
        for point, rows in zip(points, found):
            span = _span(point)
            if rows is None:
                out.append(((Evidence(span[0], span[1], None, "node"),), ()))
            elif name == "chunks":
                out.append(matched_evidence(next(cosines), rec.chunk_spans(point.payload), span, "chunk"))
            else:
                tokens = self.queries.static_encoder
                offsets = None if tokens is None else (
                    tokens.document_token_spans(point.payload.get("text", "")) + span[0]).tolist()
                out.append(matched_evidence(next(cosines), offsets, span, "token"))
        return out

    def document_weight(self) -> float:
        """The document cosine's share of the chunk rerank in this store
        (:func:`~lmk_rag.store.query.document_weight`), measured on the first :data:`DOCUMENT_SAMPLE` live nodes
        in id order (ids are hashes: a spread of the documents). Kept until the store commits a change (a new
        ``committed`` entry in its settings record); where none is recorded (a server), for good once the sample is
        full. 0 for a store without document vectors; this handle's ``SearchOptions.document_weight`` when set.
        """
        if not self.documents_held:
            return 0.0
        if self.options.document_weight is not None:
            return float(self.options.document_weight)
        committed = self.settings.get("committed")  # a new entry with every change (writes.CommittedCounts)
        if self._document_weight is not None and self._document_weight[0] is committed:
            return self._document_weight[1]
        points, _ = self.backend.scroll(self._nodes_filter(None), True, DOCUMENT_SAMPLE, None)
        documents = {point.payload.get("doc_id"): self._document_mean(point) for point in points}
        means = np.asarray([mean for mean, _ in documents.values()]).reshape(len(documents), self.dim)
        weight = document_weight(means, np.asarray([chunks for _, chunks in documents.values()]))
        if committed is not None or len(points) == DOCUMENT_SAMPLE:
            self._document_weight = (committed, weight)
        return weight

    def _document_mean(self, point: Any) -> tuple[np.ndarray, int]:
        """A node's document mean (its ``document`` vector times its coherence) and chunk count.

        :raises CorruptStoreError: when either is missing or holds values the store never writes.
        """
        stats, vector = point.payload.get(rec.DOCUMENT_KEY), point.vectors.get("document")
        try:
            chunks, coherence = int(stats["chunks"]), float(stats["coherence"])
            mean = np.asarray(vector, dtype=np.float64).reshape(self.dim) * coherence
        except (TypeError, KeyError, ValueError):
            chunks, coherence, mean = 0, math.nan, np.zeros(0)
        if chunks < 1 or not 0.0 <= coherence <= 1.001 or not np.all(np.isfinite(mean)):
            raise CorruptStoreError(
                f"{self.where}: node {point.payload.get('node_id')!r} holds damaged document statistics or vector "
                f"({rec.DOCUMENT_KEY}={stats!r}); run lmk-rag check --store {self.where}, and re-ingest its document"
            )
        return mean, chunks

    def _read_hits(self, ranked: list[ScoredPointData], k: int, one_per_document: bool,
                   matched: str | None) -> tuple[list[ScoredPointData], dict[str, dict[str, Any]]]:
        """The first ``k`` hits of a ranking of points without payloads, their payloads (and their vector
        ``matched``, for their evidence) read by id: the best ``k`` points first (``2 * k`` for document-level
        hits), then twice as many more each time until ``k`` hits are found. Reading every candidate's payload in
        the query cost about 4 ms of a 26 ms fused search at a million nodes (docs/decisions.md, "store: a search
        reads the payloads of its hits alone, and filters on `live` alone").

        Called under the search's read lock, where no other process writes
        (:attr:`~lmk_rag.store.base.Backend.single_writer`): nothing has replaced a point since the ranking. Of a
        document with two live versions among the points read (a write interrupted before it dropped the old one),
        the higher version's nodes stay (:func:`~lmk_rag.store.records.latest`).

        :raises CorruptStoreError: when a ranked point cannot be read back (the engine lost it).
        """
        read: list[ScoredPointData] = []
        vectors: dict[str, dict[str, Any]] = {}
        page = 2 * k if one_per_document else k
        while True:
            batch = ranked[len(read) : len(read) + page]
            points = self.backend.retrieve([point.id for point in batch], [matched] if matched else False)
            found = {point.id: point.payload for point in points}
            vectors.update((point.id, point.vectors) for point in points)
            lost = next((point.id for point in batch if point.id not in found), None)
            if lost is not None:
                raise CorruptStoreError(
                    f"{self.where}: point {lost} was ranked but cannot be read back; run lmk-rag check --store "
                    f"{self.where}"
                )
            read += [ScoredPointData(point.id, point.score, found[point.id]) for point in batch]
            (shown,) = rec.latest([read])
            best = best_hits(shown, k, one_per_document)
            if len(best) == k or len(read) == len(ranked):
                return best, vectors
            page *= 2

    def _nodes_filter(self, filter: FilterLike, node_ids: Sequence[str] | None = None) -> Any:
        """The native filter of the nodes a reader may see that a caller's filter (and node ids) select."""
        return rec.shown_filter(self.backend, filter, node_ids)

    def _search_filter(self, filter: FilterLike) -> Any:
        """:meth:`_nodes_filter` for a search by vector (:func:`~lmk_rag.store.records.searched_filter`)."""
        return rec.searched_filter(self.backend, filter)

    def _check_sample(self) -> None:
        """Before this handle's first search, look for damaged vectors in a sample of the stored nodes
        (:func:`sample_problem`): damaged vectors would give wrong hits without an error.

        :raises CorruptStoreError: naming a damaged node and ``lmk-rag check``, which lists them all.
        """
        if self._sampled:
            return
        damaged = sample_problem(self.backend)
        if damaged:
            raise CorruptStoreError(
                f"{self.where}: stored vectors are damaged (node {damaged}); run lmk-rag check --store "
                f"{self.where} to list every damaged node, then re-ingest those documents"
            )
        self._sampled = True

    def search_mmr(self, query: str | np.ndarray, k: int, lambda_: float, filter: FilterLike,
                   candidates: int) -> list[Hit]:
        """Diverse results by maximal marginal relevance, from ``candidates`` nearest nodes."""
        self._check_sample()
        if isinstance(query, str):
            check_text(query, "query")
            with self.encoder.lock:
                query = self.encoder.get().encode_queries(query).vector
        try:
            vector = np.asarray(query, dtype=np.float32)
        except (TypeError, ValueError):
            raise InvalidInputError(
                f"query must be a string or a vector of {self.dim} numbers, got {query!r}"
            ) from None
        if vector.shape != (self.dim,):
            raise VectorSizeError(f"query vector of shape {vector.shape}, store expects ({self.dim},)")
        check_directions(vector, "query vector")
        plan = plan_mmr(vector.tolist(), lambda_, candidates, k, self._search_filter(filter),
                        rec.HIT_KEYS, self.options)
        with self.access.reading():
            (picked,) = self.backend.query(plan)
        for point in picked:
            checked_score(point, point.score)  # a cosine outside [-1, 1] comes from damaged vectors
        (shown,) = rec.latest([picked])
        return [rec.hit_from_point(point, point.score) for point in shown]

    def get_nodes(self, node_ids: Sequence[str] | None, filter: FilterLike) -> list[NodeRecord]:
        """Nodes by id and/or metadata filter, with their vectors."""
        wanted = self._nodes_filter(filter, node_ids)
        with self.access.reading():
            (points,) = rec.latest([list(rec.scroll(self.backend, wanted, with_vectors=True))])
        return [rec.record_from_point(p) for p in points]

    def doc_ids(self) -> list[str]:
        """The stored documents' ids, sorted."""
        return sorted(self.documents())

    def documents(self) -> dict[str, dict[str, Any]]:
        """Every stored document's metadata, by doc id."""
        markers = rec.scroll(self.backend, rec.documents_filter(self.backend), False)
        return {m.payload["doc_id"]: m.payload.get("meta") or {} for m in markers}

    def sources(self) -> dict[str, str]:
        """The file each document was read from, by doc id."""
        markers = rec.scroll(self.backend, rec.documents_filter(self.backend), False)
        return {m.payload["doc_id"]: m.payload["source"] for m in markers if isinstance(m.payload.get("source"), str)}

    def count(self) -> int:
        """The number of stored nodes."""
        return self.backend.count(rec.nodes_filter(self.backend, None))

    def count_documents(self) -> int:
        """The number of stored documents."""
        return self.backend.count(rec.documents_filter(self.backend))

    def info(self) -> dict[str, Any]:
        """Where the store is, its counts and recorded settings."""
        with self.access.reading():
            weight = self.document_weight()
        return {
            "backend": self.backend.name,
            "location": self.where,
            "documents": self.count_documents(),
            "nodes": self.count(),
            "document_weight": weight,
            **{key: value for key, value in self.settings.items() if key != "format"},
        }

    def check(self) -> list[str]:
        """What is wrong with the store, from a read of every point."""
        return verify(self.backend, self.committed())


#: How far a stored unit vector's norm may drift (float32 storage, cosine normalisation).
NORM_TOLERANCE = 1e-2
#: Problems listed per kind at most (the count is always given).
SHOWN = 5
#: Nodes an open reads from each of two places in the id order to look for damaged vectors.
SAMPLE = 32
#: Nodes read to measure how far a store's documents agree with themselves (:meth:`Reader.document_weight`).
DOCUMENT_SAMPLE = 256


def verify(backend: Backend, committed: tuple[int, int] | None) -> list[str]:
    """Every problem found in a store, one line each (empty: the store is sound).

    :param backend: the store's backend.
    :param committed: the ``(documents, nodes)`` the store recorded, or None when it records none.
    """
    b = backend.builder
    problems: list[str] = []
    markers = {m.payload["doc_id"]: m.payload for m in scroll(backend, every(b, b.match("kind", rec.DOC)), False)}
    current = {doc_id: payload.get("version") for doc_id, payload in markers.items()}
    pending = sorted(doc_id for doc_id, payload in markers.items() if payload.get("pending") is not None)
    _add(problems, "documents with an interrupted write (opening the store to write repairs them)", pending)
    nodes: Counter[str] = Counter()
    orphans, damaged = [], []
    for point in scroll(backend, every(b, b.match("kind", rec.NODE)), True):
        doc_id = point.payload.get("doc_id")
        if doc_id not in current or current[doc_id] != point.payload.get("version"):
            orphans.append(point.payload.get("node_id", point.id))
            continue
        nodes[doc_id] += 1
        problem = _vector_problem(point.vectors)
        if problem:
            damaged.append(f"{point.payload.get('node_id')} ({problem})")
    _add(problems, "nodes without a current document version", orphans)
    _add(problems, "nodes with damaged vectors", damaged)
    wrong = [f"{doc_id} (records {payload.get('n_nodes')}, holds {nodes[doc_id]})"
             for doc_id, payload in sorted(markers.items())
             if payload.get("version") is not None and payload.get("n_nodes") != nodes[doc_id]]
    _add(problems, "documents whose node count differs from their record", wrong)
    if committed is not None:
        held = (sum(1 for version in current.values() if version is not None), sum(nodes.values()))
        if held != committed:
            problems.append(f"the store committed {committed[0]} documents and {committed[1]} nodes, "
                            f"it holds {held[0]} and {held[1]}")
    return problems


def sample_problem(backend: Backend, size: int = SAMPLE) -> str | None:
    """The first damaged vector among a sample of stored nodes (``size`` from the start of the id order and
    ``size`` from a random id on), or None: the cheap check of an open, where :func:`verify` reads every point.

    :return: ``"<node id>: <problem>"``, or None when the sample is sound.
    """
    b = backend.builder
    nodes = every(b, b.match("kind", rec.NODE))
    for offset in (None, str(uuid.uuid4())):
        points, _ = backend.scroll(nodes, True, size, offset)
        for point in points:
            problem = _vector_problem(point.vectors)
            if problem:
                return f"{point.payload.get('node_id', point.id)}: {problem}"
    return None


def _vector_problem(vectors: dict[str, Any]) -> str | None:
    """What is wrong with a node's vectors, or None."""
    if vectors.get("node") is None:
        return "no node vector"
    dim = len(np.asarray(vectors["node"]))
    for name in ("node", "chunks", "document"):
        if vectors.get(name) is None:
            continue
        array = np.asarray(vectors[name], dtype=np.float64).reshape(-1, dim)
        if not np.all(np.isfinite(array)):
            return f"{name}: not finite"
        norms = np.linalg.norm(array, axis=1)
        if np.any(np.abs(norms - 1.0) > NORM_TOLERANCE):
            return f"{name}: norm {norms[np.argmax(np.abs(norms - 1.0))]:.3g} where 1 was written"
    static = vectors.get("static")
    if static is not None and not np.all(np.isfinite(np.asarray(static, dtype=np.float64))):
        return "static: not finite"
    sparse = vectors.get("bm25")
    if sparse is not None and not all(np.isfinite(v) and v >= 0 for v in sparse.values):
        return "bm25: not finite or negative"
    return None


def _add(problems: list[str], what: str, items: list[str]) -> None:
    """One line for a kind of problem: how many, and the first few."""
    if items:
        shown = ", ".join(map(str, items[:SHOWN])) + (", ..." if len(items) > SHOWN else "")
        problems.append(f"{len(items)} {what}: {shown}")


def _span(point: ScoredPointData) -> tuple[int, int]:
    """A node point's span in its document."""
    start, end = point.payload["span"]
    return int(start), int(end)


def _unit(rows: np.ndarray) -> np.ndarray:
    """Query vectors as unit rows, (q, dim) (a zero row stays zero)."""
    rows = rows.reshape(len(rows), -1)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return rows / np.where(norms > 0, norms, 1.0)
