"""Value types of the store: what callers get back (:class:`Hit`), what they may write
(:class:`NodeRecord`), and the backend-neutral shapes the facade hands to a backend."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from enum import Enum
from typing import Any, Literal

import numpy as np

from lmk_rag.checks import check_count
from lmk_rag.errors import InvalidInputError

Quantization = Literal["int8", "binary", "turbo4", "none"]
QUANTIZATIONS: tuple[Quantization, ...] = ("int8", "binary", "turbo4", "none")
"""Compressed copies Qdrant keeps of a vector: int8 scalar (4x smaller), binary (32x), 4-bit TurboQuant (8x), or
none."""
DEFAULT_COLLECTION = "lmk_rag"
"""The collection of a store on a Qdrant server or in qdrant-client local mode when none is named."""
DEFAULT_BATCH_SIZE = 64
"""Points per upsert request (``QdrantVectorStore``'s default)."""


def _given(options: Any) -> dict[str, Any]:
    """An option object's fields that were given (not None), by name."""
    return {option.name: getattr(options, option.name) for option in fields(options)
            if getattr(options, option.name) is not None}


@dataclass(frozen=True)
class ServerOptions:
    """How a store on a qdrant-client backend talks to Qdrant, and what a new collection is made with (the names
    and meanings of ``QdrantClient`` and ``QdrantVectorStore``); an Edge store refuses them. None means "not given":
    the default applies. ``LandmarkStore(url=..., server=ServerOptions(timeout=30, shard_number=2))``.

    :param prefer_grpc: use gRPC for server calls (default False).
    :param timeout: request timeout in seconds.
    :param client_kwargs: other keyword arguments of the ``QdrantClient`` (and ``AsyncQdrantClient``) the store
        builds for ``url`` or ``location``.
    :param shard_number: shards of a new collection (a cluster).
    :param replication_factor: copies of each shard of a new collection.
    :param write_consistency_factor: replicas that must confirm a write, for a new collection.
    :param parallel: processes uploading points (``upload_points(parallel=...)``; default 1: in-process).
    :param max_retries: times a failed upsert request is sent again before the error is raised (default 3).
    """

    prefer_grpc: bool | None = None
    timeout: int | None = None
    client_kwargs: Mapping[str, Any] | None = None
    shard_number: int | None = None
    replication_factor: int | None = None
    write_consistency_factor: int | None = None
    parallel: int | None = None
    max_retries: int | None = None

    def given(self) -> dict[str, Any]:
        """The options that were given (not None), by name."""
        return _given(self)


@dataclass(frozen=True)
class StorageOptions:
    """How a new store holds its vectors (Qdrant's quantization, memory placement and HNSW settings). Recorded when
    the store is created and fixed from then on: for an existing store each given option must equal the recorded
    one. None means "not given": the recorded value, or :data:`~lmk_rag.store.settings.DEFAULT_STORAGE`'s for a new
    store. ``LandmarkStore(path, storage=StorageOptions(node_quantization="int8", on_disk=True))``.

    :param quantization: compressed copy of the ``chunks`` (and ``static``) multivectors (``"int8"``, ``"binary"``,
        ``"turbo4"`` or ``"none"``), pinned in RAM; candidates are rescored with the originals, so hits do not move
        (docs/store.md, "Scale").
    :param node_quantization: the same for the node vectors, which the HNSW search then runs on (rescoring
        ``oversampling`` times the candidates with the originals).
    :param on_disk: keep the original vectors and the payloads on disk, memory-mapped and read through the OS page
        cache, instead of warming them into RAM when the store opens; pair it with ``node_quantization``.
        qdrant-client local mode, which holds everything in memory, refuses True.
    :param hnsw_on_disk: keep the node vector's HNSW graph on disk (memory-mapped).
    :param hnsw_m: HNSW ``m`` of the node vector (edges per node; 0 builds no graph: every search is a full scan).
    :param ef_construct: HNSW ``ef_construct`` of the node vector (the candidate list while building the graph).
    :raises InvalidInputError: for a value of the wrong kind.
    """

    quantization: Quantization | None = None
    node_quantization: Quantization | None = None
    on_disk: bool | None = None
    hnsw_on_disk: bool | None = None
    hnsw_m: int | None = None
    ef_construct: int | None = None

    def __post_init__(self) -> None:
        """Check each given value."""
        for name in ("quantization", "node_quantization"):
            value = getattr(self, name)
            if value is not None and value not in QUANTIZATIONS:
                raise InvalidInputError(f"{name} must be one of {list(QUANTIZATIONS)} or None (as recorded), "
                                        f"got {value!r}")
        for name in ("on_disk", "hnsw_on_disk"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, bool):
                raise InvalidInputError(f"{name} must be True, False or None (as recorded), got {value!r}")
        if self.hnsw_m is not None:
            check_count("hnsw_m", self.hnsw_m, minimum=0)
        if self.ef_construct is not None:
            check_count("ef_construct", self.ef_construct, minimum=4)

    def given(self) -> dict[str, Any]:
        """The options that were given (not None), by name."""
        return _given(self)


@dataclass(frozen=True)
class SearchOptions:
    """How a store's searches run: how many candidates the prefetch takes and how its dense searches go. They
    belong to a handle, not to the store: each open may choose its own.
    ``LandmarkStore(path, search=SearchOptions(prefetch_limit=200, hnsw_ef=128))``.

    :param prefetch_limit: candidates per prefetch branch (dense by node vector, BM25); a search of ``k`` hits takes
        at least ``4 * k``.
    :param hnsw_ef: HNSW ``ef`` of the node-vector search, or None for the backend's default.
    :param oversampling: with quantized node vectors, how many times the candidates are taken with the compressed
        copy before rescoring with the originals (from 1 to 100; None:
        :data:`~lmk_rag.store.settings.DEFAULT_OVERSAMPLING` on such a store).
    :param exact: search by brute force over the original vectors (no HNSW, no quantized copy): the reference an
        approximate search is measured against; slow on a large store.
    :param document_weight: the document cosine's share of the chunk rerank, from 0 (chunk MaxSim alone) to 1,
        which also scales the document length penalty (:func:`~lmk_rag.store.query.length_penalty`; 0: neither);
        None: the store's own measure (:attr:`~lmk_rag.store.LandmarkStore.document_weight`).
    :raises InvalidInputError: for a value of the wrong kind.
    """

    prefetch_limit: int = 100
    hnsw_ef: int | None = None
    oversampling: float | None = None
    exact: bool = False
    document_weight: float | None = None

    def __post_init__(self) -> None:
        """Check each value."""
        check_count("prefetch_limit", self.prefetch_limit)
        if self.hnsw_ef is not None:
            check_count("hnsw_ef", self.hnsw_ef)
        value = self.oversampling
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or not 1 <= value <= 100):
            raise InvalidInputError(f"oversampling must be a number from 1 to 100, got {value!r}")
        if not isinstance(self.exact, bool):
            raise InvalidInputError(f"exact must be True or False, got {self.exact!r}")
        weight = self.document_weight
        if weight is not None and (isinstance(weight, bool) or not isinstance(weight, (int, float))
                                   or not 0 <= weight <= 1):
            raise InvalidInputError(f"document_weight must be a number from 0 (chunk MaxSim alone) to 1, or None (the "
                                    f"store's own measure), got {weight!r}")


class Rerank(str, Enum):
    """How a search scores its candidates on the dense side: ``chunks`` (MaxSim over the node's chunk vectors),
    ``static`` (MaxSim over static token vectors) or ``node`` (the node vector's cosine)."""

    CHUNKS = "chunks"
    STATIC = "static"
    NODE = "node"

    @classmethod
    def _missing_(cls, value: object) -> Rerank:
        """Refuse a value that is no rerank; ``"none"``, the name of ``node`` before 0.x of issue 62 (a settings
        record, a serialised vector store, a script), by its new name.

        :raises InvalidInputError: naming the rerank modes.
        """
        choices = ", ".join(repr(mode.value) for mode in cls)
        if value == "none":
            raise InvalidInputError(f"rerank 'none' is now called 'node' (it ranks by the node vector's cosine): "
                                    f"use rerank='node' (one of {choices})")
        raise InvalidInputError(f"rerank must be one of {choices}, got {value!r}")


class StoreMode(str, Enum):
    """What makes a store's vectors: ``transformer`` (the landmark encoder: node and chunk vectors, optionally static
    token vectors beside them) or ``static`` (the static model alone: pooled static node vectors and static token
    multivectors, no ``chunks`` vector; ingest and search never run a transformer)."""

    TRANSFORMER = "transformer"
    STATIC = "static"


EvidenceKind = Literal["chunk", "token", "node", "bm25"]
"""Where a hit's :class:`Evidence` comes from (see :class:`Evidence`)."""


@dataclass(frozen=True)
class Evidence:
    """The passage of a hit that carried its score: a span of its document and that passage's share of the score.

    A hit's evidence is computed from its node's own stored vectors, for the returned hits only
    (:func:`~lmk_rag.store.query.matched_evidence`): each query vector's best chunk (its argmax over the node's chunk
    vectors) is evidence, and a chunk that is the best of several query vectors is one piece of evidence with their
    summed share.

    :param start: the passage's first char in the document (as :attr:`Hit.span`).
    :param end: the char after its last.
    :param score: the passage's share of the node's rerank score: the summed cosines of the query vectors whose best
        match it is, over the number of query vectors, so that a hit's pieces of evidence add up to its MaxSim
        (chunk or static, before the document cosine, the length penalty and BM25 are mixed in); None for ``bm25``.
    :param kind: ``"chunk"`` (a landmark chunk, by chunk MaxSim), ``"token"`` (a static token, by static MaxSim),
        ``"node"`` (the whole node: its chunks' spans are unknown, as for nodes written pre-encoded without them, or
        its rerank scored the node vector alone; ``score`` is still its best chunk's cosine share) or ``"bm25"``
        (a BM25-only search, ``alpha=0``: no rerank score, so no passage is singled out; the span is the node's).
    """

    start: int
    end: int
    score: float | None
    kind: EvidenceKind

    @property
    def span(self) -> tuple[int, int]:
        """``(start, end)``."""
        return self.start, self.end

    def as_dict(self) -> dict[str, Any]:
        """The evidence as JSON values (what ``lmk-rag query --json`` and the LlamaIndex metadata carry)."""
        return {"start": self.start, "end": self.end, "score": self.score, "kind": self.kind}


@dataclass(frozen=True)
class ChunkScore:
    """One landmark chunk of a hit's node and the query's score of it alone: the chunk's MaxSim with the query (the
    mean, over the query vectors, of their cosines with the chunk vector), what the node would score were it this
    one chunk. A hit's chunk scores, in document order, say where in the node the match is strong and where it fades
    (:class:`~llama_index.vector_stores.landmark.EvidenceContext` grows a cut toward the stronger side).

    :param start: the chunk's first char in the document (as :attr:`Hit.span`).
    :param end: the char after its last.
    :param score: its cosine with the query, averaged over the query vectors, in [-1, 1].
    """

    start: int
    end: int
    score: float

    @property
    def span(self) -> tuple[int, int]:
        """``(start, end)``."""
        return self.start, self.end

    def as_dict(self) -> dict[str, Any]:
        """The chunk score as JSON values (what the LlamaIndex metadata carries)."""
        return {"start": self.start, "end": self.end, "score": self.score}


@dataclass(frozen=True)
class Hit:
    """One search result.

    :param doc_id: the document the node belongs to.
    :param node_id: the node's id (``"<doc_id>#<index>"`` for nodes the store cut itself).
    :param score: the final score in [-1, 1]: ``alpha`` times the rerank score (chunk or static MaxSim divided by
        the number of query vectors, or the node vector's cosine) plus ``1 - alpha`` times the node's BM25 over the
        best candidate's (see :mod:`lmk_rag.store.query`).
    :param text: the node's text.
    :param span: the node's char span ``(start, end)`` in its document.
    :param metadata: the document's metadata as given at ingest.
    :param evidence: the passages that carried the score, best first (:class:`Evidence`); empty for a hit of a
        diverse search (:meth:`~lmk_rag.store.LandmarkStore.search_mmr`), which has no rerank.
    :param chunk_scores: every chunk of the node with the query's score of it (:class:`ChunkScore`), in document
        order, computed with the ``"chunk"`` evidence from the same vectors; empty where the evidence is of another
        kind (a static rerank's tokens, a node whose chunk spans are unknown, BM25 alone, a diverse search).
    """

    doc_id: str
    node_id: str
    score: float
    text: str
    span: tuple[int, int]
    metadata: dict[str, Any] = field(default_factory=dict)
    evidence: tuple[Evidence, ...] = ()
    chunk_scores: tuple[ChunkScore, ...] = ()

    def passage(self, evidence: Evidence | None = None) -> str:
        """The text of a piece of this hit's evidence (the best one by default), cut from :attr:`text`; ``""``
        for a hit without evidence."""
        if evidence is None:
            if not self.evidence:
                return ""
            evidence = self.evidence[0]
        return self.text[max(evidence.start - self.span[0], 0) : max(evidence.end - self.span[0], 0)]


@dataclass(frozen=True)
class NodeRecord:
    """One pre-encoded node, as written by :meth:`LandmarkStore.upsert_encoded_document` and read by ``get_nodes``.

    :param node_id: the caller's id for the node, unique in the store.
    :param doc_id: the document the node belongs to.
    :param text: the node's text.
    :param span: the node's char span ``(start, end)`` in its document.
    :param vector: the node vector, shape (dim,).
    :param chunk_vectors: the node's landmark chunk vectors, shape (n_chunks, dim); None when writing: the store's
        encoder encodes them from the text (see :func:`~lmk_rag.store.documents.fill_chunk_vectors`).
    :param metadata: JSON-able metadata; filters match its keys.
    :param static_vectors: static token vectors, shape (n_tokens, static_dim), or None.
    :param chunk_spans: each chunk vector's char span ``(start, end)`` in the document, or None where unknown (a hit
        of such a node has ``"node"`` evidence); filled when the store encodes the chunk vectors itself.
    """

    node_id: str
    doc_id: str
    text: str
    span: tuple[int, int]
    vector: np.ndarray
    chunk_vectors: np.ndarray | None
    metadata: dict[str, Any] = field(default_factory=dict)
    static_vectors: np.ndarray | None = None
    chunk_spans: tuple[tuple[int, int], ...] | None = None


@dataclass(frozen=True)
class SparseVector:
    """A sparse vector (BM25 term weights): parallel lists of term ids and weights."""

    indices: list[int]
    values: list[float]


@dataclass(frozen=True)
class PointData:
    """A backend-neutral point: id (uuid string), named vectors and payload.

    Vector values are float32 arrays, shape (dim,) (dense) or (n, dim) (multivector), lists of the
    same shapes, or a :class:`SparseVector`.
    """

    id: str
    vectors: dict[str, Any]
    payload: dict[str, Any]


@dataclass(slots=True)
class ScoredPointData:
    """A backend-neutral query result: point id, score and (selected) payload.

    Built for every candidate of every search (hundreds each): slots, not frozen, since a frozen dataclass takes
    three times as long to build.
    """

    id: str
    score: float
    payload: dict[str, Any]


@dataclass(frozen=True)
class Storage:
    """How a new store holds its vectors; recorded when the store is created and fixed from then on.

    Qdrant keeps a quantized copy in RAM (pinned) and scores candidates with it, then rescores them with the
    original vectors, so quantization changes memory, not the ranking (see docs/store.md, "Scale").

    :param quantization: compressed copy of the ``chunks`` (and ``static``) multivectors, or ``"none"``.
    :param node_quantization: compressed copy of the ``node`` vector: the HNSW search runs on it and rescores
        ``oversampling`` times the candidates with the originals; ``"none"`` searches the originals.
    :param on_disk: the original vectors (node, chunks, static) and the payloads are memory-mapped from disk and
        read on demand through the OS page cache (Qdrant's ``cold`` tier) instead of being warmed into it when the
        store opens (``cached``); quantized copies, the BM25 index and payload indexes are not covered.
    :param hnsw_on_disk: the node vector's HNSW graph is memory-mapped from disk (``cold``) instead of being held
        in RAM.
    :param hnsw_m: HNSW ``m`` of the node vector.
    :param ef_construct: HNSW ``ef_construct`` of the node vector.
    """

    quantization: Quantization = "none"
    node_quantization: Quantization = "none"
    on_disk: bool = False
    hnsw_on_disk: bool = False
    hnsw_m: int = 16
    ef_construct: int = 100

    @property
    def node_quantized(self) -> bool:
        """Whether the node vectors have a compressed copy (the search then oversamples)."""
        return self.node_quantization != "none"

    @property
    def in_memory(self) -> bool:
        """Whether every original vector and the HNSW graph stay in RAM (Qdrant's defaults)."""
        return not (self.on_disk or self.hnsw_on_disk)


@dataclass(frozen=True)
class CollectionSpec:
    """What a backend creates: the named vectors and their index settings.

    :param dim: size of the node and chunk vectors.
    :param static_dim: size of the static token vectors, or None for no static slot.
    :param chunks: whether to create the ``chunks`` multivector (not in a static store).
    :param bm25: whether to create the BM25 sparse vector (IDF modifier).
    :param storage: compression, memory placement and HNSW settings of the vectors.
    """

    dim: int
    static_dim: int | None = None
    chunks: bool = True
    bm25: bool = False
    storage: Storage = Storage()


@dataclass(frozen=True)
class EncodedQuery:
    """A query encoded outside the store, as :meth:`~lmk_rag.store.LandmarkStore.search_encoded` takes it: its
    vectors and, for the parts of a search that need them, its text and static token vectors.

    ``EncodedQuery.of(store.encoder.encode_queries(text), text)`` makes one from the encoder's output.

    :param vector: the query vector, (dim,).
    :param chunk_vectors: the query's chunk vectors, (q, dim): the chunk rerank's query.
    :param text: the query text: BM25's query and the question rule of ``alpha``
        (:func:`~lmk_rag.store.query.query_alpha`); None ranks by the rerank alone.
    :param static_vectors: the query's static token vectors, (q, static_dim); needed for ``rerank="static"``.
    """

    vector: np.ndarray
    chunk_vectors: np.ndarray
    text: str | None = None
    static_vectors: np.ndarray | None = None

    @classmethod
    def of(cls, encoded: Any, text: str | None = None, static_vectors: np.ndarray | None = None) -> EncodedQuery:
        """An encoder's query (an :class:`~lmk_rag.EncodedText`: ``.vector``, ``.chunk_vectors``) with its text and
        static token vectors.

        :raises InvalidInputError: for an object without those vectors.
        """
        if not (hasattr(encoded, "vector") and hasattr(encoded, "chunk_vectors")):
            raise InvalidInputError(
                f"EncodedQuery.of takes an encoded query (store.encoder.encode_queries(text)), got {encoded!r}"
            )
        return cls(encoded.vector, encoded.chunk_vectors, text, static_vectors)


@dataclass(frozen=True)
class Score:
    """A formula's term: the score the scorer gave the point."""


@dataclass(frozen=True)
class Constant:
    """A formula's term: a number."""

    value: float


@dataclass(frozen=True)
class PayloadValue:
    """A formula's term: a number in the point's payload (a dotted key), or ``default`` where it has none."""

    key: str
    default: float


@dataclass(frozen=True)
class Ln:
    """A formula's term: the natural logarithm of another."""

    of: Expression


@dataclass(frozen=True)
class Sum:
    """A formula's term: the sum of others."""

    terms: tuple[Expression, ...]


@dataclass(frozen=True)
class Product:
    """A formula's term: the product of others."""

    factors: tuple[Expression, ...]


Expression = Score | Constant | PayloadValue | Ln | Sum | Product
"""A score formula, backend-neutral: a tree each backend translates term by term into its engine's formula query
(:func:`~lmk_rag.store.edge.formula`, :func:`~lmk_rag.store.server.formula`) and
:func:`~lmk_rag.store.query.evaluate` computes in Python. The store writes each formula once, in
:mod:`~lmk_rag.store.query`."""


@dataclass(frozen=True)
class Branch:
    """One scoring query of a plan: a named vector and the query's value for it.

    :param using: the named vector (``"node"``, ``"chunks"``, ``"static"`` or ``"bm25"``).
    :param query: a dense vector (dim,), a multivector (q, dim) as nested lists, or a :class:`SparseVector`.
    """

    using: str
    query: list[float] | list[list[float]] | SparseVector


@dataclass(frozen=True)
class QueryPlan:
    """A search, backend-neutral; a backend runs it as one Query API call (a batch of one request per scorer), or
    Qdrant Edge, whose process is its only writer, as two when it has a plain search
    (:meth:`~lmk_rag.store.edge.EdgeBackend.query`: the plain search first, then the scorers with its points as a
    prefetch branch by id, so that the same BM25 search does not run twice).

    The candidates are the union of the ``prefetch`` branches' results (``prefetch_limit`` each); every scorer
    scores all of them and returns its own list. Without prefetch branches a scorer searches the whole store.

    :param prefetch: the candidate branches (dense by node vector, BM25).
    :param scorers: the scoring queries (e.g. chunk MaxSim and BM25), one result list each.
    :param prefetch_limit: candidates per prefetch branch.
    :param limit: results per scorer.
    :param filter: a backend-native filter (already translated), or None.
    :param payload_keys: payload keys to return with each scorer's result (none: ids and scores only).
    :param options: how the dense searches run (HNSW ``ef``, oversampling, exact search).
    :param search: a plain search of the whole store (``prefetch_limit`` points) in the same call, its list after
        the scorers'. It is also a prefetch branch, so the scorers already return each of its points with a
        payload: it returns ids and scores only (:func:`~lmk_rag.store.query.carry_payloads` gives them theirs).
    :param mmr_lambda: when set, the (single, dense) scorer picks its results by maximal marginal relevance among
        its ``prefetch_limit`` nearest points: each next point maximises ``mmr_lambda * similarity to the query -
        (1 - mmr_lambda) * its highest similarity to a point already picked`` (1 = relevance only). Results come
        in pick order, scored by their similarity to the query.
    :param document_weight: when above 0, the second scorer is the document cosine (``document``), and the dense
        side is ``(1 - document_weight) * the first scorer + document_weight * the document cosine``
        (:func:`~lmk_rag.store.query.fuse`).
    :param formula: when set, the first scorer's results are scored again by this formula over their own score and
        payload, in the same request (the document length penalty: :func:`~lmk_rag.store.query.penalised`).
    :param alpha: the dense side's weight in the fused score (:func:`~lmk_rag.store.query.fuse`).
    """

    prefetch: tuple[Branch, ...]
    scorers: tuple[Branch, ...]
    prefetch_limit: int
    limit: int
    filter: Any
    payload_keys: list[str]
    options: SearchOptions = SearchOptions()
    search: Branch | None = None
    mmr_lambda: float | None = None
    document_weight: float = 0.0
    formula: Expression | None = None
    alpha: float = 1.0
