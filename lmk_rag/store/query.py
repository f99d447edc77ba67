"""Search planning and score fusion (pure): what the store asks a backend, and how it ranks the answer.

Everything one search does is decided here, once: :func:`plan_search` turns the caller's arguments and the store's
:class:`SearchDefaults` into a :class:`SearchPlan` (the rerank, ``alpha`` and why, the document weight, the length
penalty, the prefetch depth, the filter); :meth:`SearchPlan.request` makes its backend-neutral engine request
(:class:`~lmk_rag.store.types.QueryPlan`), which each backend translates in one function, and :func:`fuse` ranks the
engine's answer by it. Formulas the engines compute (the length penalty: :func:`penalised`) are written here once,
as backend-neutral trees (:data:`~lmk_rag.store.types.Expression`).

A search has a *dense side* (the rerank: chunk MaxSim, static MaxSim or the node vector's cosine) and a
*lexical side* (BM25 of the node). Candidates are the union of a dense prefetch by node vector and a BM25
prefetch; both sides score every candidate in one Query API call (on Qdrant Edge, the BM25 search first and the
rerank in a second call: :class:`~lmk_rag.store.types.QueryPlan`), and the final score is
``alpha * dense + (1 - alpha) * bm25``, where

- the dense score is cosine-like: a multivector MaxSim is divided by the number of query vectors, so it lies
  in [-1, 1] whatever the query length;
- the BM25 score is divided by the best BM25 score among the candidates, so it lies in [0, 1] on every
  corpus.

``alpha=1`` ranks by the dense side alone, ``alpha=0`` by BM25 alone over the whole store. See
docs/decisions.md ("store: BM25 evidence in the final score") for the measurements behind the default.

In a store of whole documents (pages, sections, answers: not unrelated texts glued together), the dense side also
weighs each candidate's *document cosine*, the query vector against the mean of its document's chunk vectors:
``(1 - w) * chunk MaxSim + w * document cosine``. ``w`` is :data:`DOCUMENT_WEIGHT` for such a store and 0 for a
store of glued texts, told apart by how far a document's chunks agree with each other beyond what chunks of two
documents do (:func:`document_weight`; docs/decisions.md, "quality: the document cosine and a coherence gate").

The same stores make a candidate's chunk MaxSim pay for the length of its document: the best of a document's ``n``
chunks scores higher by chance the more chunks it has, so a long page outranks a short one it matches no better.
The chunk scorer takes :data:`LENGTH_PENALTY` ``* ln(n)`` off each candidate's MaxSim (inside the engine: a formula
over the node's ``document.chunks`` payload), scaled like the document cosine's weight
(:func:`length_penalty`; docs/decisions.md, "quality: a document-length penalty on chunk MaxSim").

A query asked as a question (:func:`is_question`) shares fewer words with its answer than a statement does, so
when no ``alpha`` is given with it, it gives :data:`QUESTION_SHARE` of the BM25 share to the dense side
(:func:`query_alpha`: 0.7 -> 0.8; docs/decisions.md, "quality: natural questions").

Each returned hit says which passage carried its score (:func:`matched_evidence`): each query vector's best chunk
among the node's chunk vectors (the MaxSim's argmax), computed from the hits' own vectors, which the search reads
with their payloads; the node's chunk spans (its payload's ``chunk_spans``) say where it lies in the document. A
static rerank does the same over the node's static token vectors, whose spans its token encoder gives
(:meth:`~lmk_rag.encoder.protocols.TokenEncoder.document_token_spans`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from lmk_rag.checks import check_count
from lmk_rag.errors import CorruptStoreError, InvalidInputError, SettingsMismatchError
from lmk_rag.store.records import DOCUMENT_CHUNKS, DOCUMENT_KEY
from lmk_rag.store.types import (
    Branch,
    ChunkScore,
    Constant,
    Evidence,
    EvidenceKind,
    Expression,
    Ln,
    PayloadValue,
    Product,
    QueryPlan,
    Rerank,
    Score,
    ScoredPointData,
    SearchOptions,
    SparseVector,
    StoreMode,
    Sum,
)

DEFAULT_ALPHA = 0.7
"""Weight of the dense side in the final score; best mean nDCG@10 over the whole dev sets (docs/decisions.md)."""
DOCUMENT_WEIGHT = 0.25
"""The document cosine's share of the dense side in a store of whole documents (:func:`document_weight`)."""
LENGTH_PENALTY = 0.02
"""What a candidate's chunk MaxSim pays per unit of ``ln(n)``, ``n`` the chunk vectors of its document, in a store
of whole documents (at the full :data:`DOCUMENT_WEIGHT`)."""
#: The most a document's chunk count can be (a payload integer): how far below -1 a penalised MaxSim can lie.
MOST_CHUNKS = 2**31
CONTRAST_RAMP = (0.20, 0.26)
"""The contrasts over which the document cosine's weight rises from 0 to :data:`DOCUMENT_WEIGHT`."""
QUESTION_SHARE = 1 / 3
"""The share of the BM25 weight a question gives to the dense side (:func:`query_alpha`)."""
_QUESTION = re.compile(r"\?\s*(\([^()]*\))?\s*$")  # ends with "?", a closing parenthesis aside


def is_question(text: str | None) -> bool:
    """Whether a query is asked as a question: its text ends with ``?`` (or with ``?`` and a parenthesis, as in
    "How do I trap errors? (Exception handling)")."""
    return text is not None and _QUESTION.search(text) is not None


def query_alpha(alpha: float, text: str | None) -> float:
    """The dense weight one query is ranked with when the caller gives none: the store's ``alpha``, or for a
    question (:func:`is_question`) ``alpha + (1 - alpha) * QUESTION_SHARE``. ``alpha`` 0 and 1 (one side alone)
    stay as they are.

    :param alpha: the store's (or the handle's) weight of the dense side.
    :param text: the query text (None: an encoded query without text, ranked by ``alpha``).
    """
    if 0.0 < alpha < 1.0 and is_question(text):
        return alpha + (1.0 - alpha) * QUESTION_SHARE
    return alpha


def document_weight(means: np.ndarray, chunks: np.ndarray) -> float:
    """The weight of the document cosine in a store's dense side, from a sample of its documents.

    A document's *agreement* is the mean cosine between two of its chunk vectors (from the length of their mean);
    the *baseline* is the mean cosine between chunk vectors of two different documents of the sample (from the
    dot products of their means). Their *contrast*, ``(median agreement - baseline) / (1 - baseline)``, is the
    same whatever cosine a model gives unrelated texts. Pages of manuals and FAQ sections measure 0.29-0.31,
    documents of one chunk 1, haystacks of unrelated pages glued together 0.17: the weight rises from 0 at a
    contrast of :data:`CONTRAST_RAMP` ``[0]`` to :data:`DOCUMENT_WEIGHT` at ``[1]``.

    :param means: ``(n, dim)``: each sampled document's mean of its unit chunk vectors.
    :param chunks: ``(n,)``: each one's number of chunk vectors.
    :return: the weight; 0 for fewer than two documents (nothing to compare).
    """
    if len(means) < 2:
        return 0.0
    means, chunks = np.asarray(means, dtype=np.float64), np.asarray(chunks, dtype=np.float64)
    lengths = np.einsum("ij,ij->i", means, means)
    agreement = np.where(chunks > 1, (chunks * lengths - 1) / np.maximum(chunks - 1, 1), 1.0)
    baseline = (means.sum(axis=0) @ means.sum(axis=0) - lengths.sum()) / (len(means) * (len(means) - 1))
    contrast = (np.median(agreement) - baseline) / max(1.0 - baseline, 1e-6)
    low, high = CONTRAST_RAMP
    return DOCUMENT_WEIGHT * float(np.clip((contrast - low) / (high - low), 0.0, 1.0))


def length_penalty(document_weight: float) -> float:
    """What a candidate's chunk MaxSim pays per unit of ``ln(n)`` (``n``: its document's chunk vectors) at a store's
    document weight: :data:`LENGTH_PENALTY` at :data:`DOCUMENT_WEIGHT` or above, scaled down with the weight below
    it (0 in a store of glued texts, whose haystacks are no documents)."""
    return LENGTH_PENALTY * min(1.0, max(0.0, document_weight) / DOCUMENT_WEIGHT)


def check_alpha(alpha: Any, name: str = "alpha") -> float:
    """Return a weight (``alpha``, or MMR's ``lambda_``) as a float in [0, 1].

    :param name: the argument's name, for the message.
    :raises InvalidInputError: for anything else (bools, strings, NaN, out of range).
    """
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0.0 <= alpha <= 1.0:
        meaning = "1 = dense only, 0 = BM25 only" if name == "alpha" else "1 = relevance only, 0 = diversity only"
        raise InvalidInputError(f"{name} must be a number in [0, 1] ({meaning}), got {alpha!r}")
    return float(alpha)


def check_rerank(rerank: Any) -> Rerank:
    """Return a rerank mode as :class:`Rerank`.

    :raises InvalidInputError: for an unknown mode (``"none"``: naming its new name, ``"node"``).
    """
    return Rerank(rerank)


def check_depth(k: Any, given: Any, name: str, default: int) -> int:
    """Check ``k`` and return how many candidates a search takes: ``given`` (checked, named ``name``), else
    ``default`` (the handle's ``prefetch_limit``), at least ``4 * k``.

    :raises InvalidInputError: for a ``k`` or ``given`` that is not a positive integer.
    """
    check_count("k", k)
    return max(default, 4 * k) if given is None else check_count(name, given)


AlphaSource = Literal["given", "store", "question"]
"""Why a search's ``alpha`` is what it is: given by the caller, the store's (this handle's, else the recorded one),
or the store's moved toward the dense side for a question (:func:`query_alpha`)."""


@dataclass(frozen=True)
class SearchDefaults:
    """What a store brings to each of its searches' plans (:func:`plan_search`).

    :param where: the store, for messages.
    :param bm25: whether the store holds BM25 vectors.
    :param alpha: the store's weight of the dense side: this handle's, else the recorded one (:meth:`of`).
    :param rerank: the rerank of a search that names none (:meth:`of`).
    :param options: this handle's search options (prefetch depth, HNSW ``ef``, oversampling, exact search).
    :param document_weight: measures the store's document weight (the reader's
        :meth:`~lmk_rag.store.reads.Reader.document_weight`); called only for a chunk rerank.
    """

    where: str
    bm25: bool
    alpha: float
    rerank: Rerank
    options: SearchOptions
    document_weight: Callable[[], float]

    @classmethod
    def of(cls, where: str, settings: dict[str, Any], mode: StoreMode, options: SearchOptions, alpha: float | None,
           document_weight: Callable[[], float]) -> SearchDefaults:
        """A store's search defaults from its settings record and this handle's options.

        :param settings: the store's settings record (its ``bm25`` and ``alpha``, which every record holds).
        :param mode: the store's mode: a static store reranks by static MaxSim, a transformer store by chunk MaxSim.
        :param alpha: this handle's weight of the dense side (checked), or None: the recorded one.
        """
        rerank = Rerank.STATIC if mode == StoreMode.STATIC else Rerank.CHUNKS
        alpha = float(settings["alpha"]) if alpha is None else alpha
        return cls(where, bool(settings["bm25"]), alpha, rerank, options, document_weight)


@dataclass(frozen=True)
class SearchPlan:
    """What one search does, decided once (:func:`plan_search`) from the caller's arguments and the store's
    defaults; the reader runs it (:meth:`~lmk_rag.store.reads.Reader.search`) and its engine request comes from it
    (:meth:`request`).

    :param k: hits returned.
    :param rerank: the dense side's scorer.
    :param alpha: the dense side's weight in the fused score, in [0, 1].
    :param alpha_source: why ``alpha`` is what it is (:data:`AlphaSource`).
    :param document_weight: the document cosine's share of the dense side (0 unless a chunk rerank in a store of
        whole documents: :func:`document_weight`).
    :param length_penalty: what a candidate's chunk MaxSim pays per unit of ``ln(n)`` (:func:`length_penalty`).
    :param prefetch_limit: candidates per prefetch branch.
    :param one_per_document: at most one hit (the best node) per document.
    :param filter: the caller's metadata filter.
    :param text: the query text (BM25's query); None ranks by the rerank alone.
    :param options: how the dense searches run.
    """

    k: int
    rerank: Rerank
    alpha: float
    alpha_source: AlphaSource
    document_weight: float
    length_penalty: float
    prefetch_limit: int
    one_per_document: bool
    filter: Any
    text: str | None
    options: SearchOptions

    def request(self, vector: list[float], scorer: Branch, sparse: SparseVector | None, native_filter: Any,
                payload_keys: list[str]) -> QueryPlan:
        """The engine request of this search: what each backend translates into its engine's requests.

        :param vector: the query vector, (dim,): the dense prefetch's query, and the document cosine's.
        :param scorer: the dense side's scoring query (:meth:`~lmk_rag.store.vectors.QueryVectors.scorer`).
        :param sparse: the query's BM25 vector, or None when there is no lexical side (no BM25, no query text).
        :param native_filter: the backend-native filter of the nodes the search may find.
        :param payload_keys: payload keys returned with each scored point.
        :return: the request; BM25 widens the prefetch whenever the query has BM25 terms; unless ``alpha`` is 1,
            a plain BM25 search of the same depth runs in the same call and gives the BM25 scores (a candidate
            outside its top scores 0); ``alpha`` 0 is a plain BM25 search of the whole store. Where the document
            weight is above 0 the document cosine is a second scorer, and a chunk scorer pays the length penalty
            (:func:`penalised`, times the query vectors its MaxSim sums over).
        """
        dense = (Branch("node", vector),)
        lexical = Branch("bm25", sparse) if sparse is not None and sparse.indices else None
        scorers: tuple[Branch, ...] = (scorer,)
        if lexical is None:
            prefetch = dense if scorer.using != "node" else ()  # else a plain search
        elif self.alpha == 0.0:
            prefetch, scorers = (), (lexical,)
        else:
            prefetch = (*dense, lexical)
        blended = self.document_weight > 0.0 and scorers == (scorer,)
        if blended:
            scorers = (scorer, Branch("document", vector))
        penalty = self.length_penalty * _query_vectors(scorer) if blended and scorer.using == "chunks" else 0.0
        return QueryPlan(
            prefetch=prefetch,
            scorers=scorers,
            prefetch_limit=self.prefetch_limit,
            limit=self.prefetch_limit * max(1, len(prefetch)),
            filter=native_filter,
            payload_keys=payload_keys,
            options=self.options,
            search=lexical if lexical is not None and 0.0 < self.alpha < 1.0 else None,
            document_weight=self.document_weight if blended else 0.0,
            formula=penalised(penalty) if penalty > 0 else None,
            alpha=self.alpha,
        )


def plan_search(
    defaults: SearchDefaults,
    *,
    k: Any = 10,
    rerank: Rerank | str | None = None,
    alpha: Any = None,
    prefetch_limit: Any = None,
    one_per_document: bool = True,
    filter: Any = None,
    text: str | None = None,
) -> SearchPlan:
    """The plan of one search: the caller's arguments checked, and every value they leave open decided from the
    store's defaults, here and nowhere else.

    :param defaults: the store's (:class:`SearchDefaults`).
    :param k: hits returned.
    :param rerank: the dense side's scorer; None: the store's.
    :param alpha: the dense side's weight; None: the store's, moved toward the dense side for a ``text`` asked as a
        question (:func:`query_alpha`).
    :param prefetch_limit: candidates per prefetch branch; None: the store's, at least ``4 * k``.
    :param one_per_document: at most one hit per document.
    :param filter: the caller's metadata filter.
    :param text: the query text, or None.
    :return: the plan.
    :raises InvalidInputError: for a bad ``k``, ``rerank``, ``alpha`` or ``prefetch_limit``.
    :raises SettingsMismatchError: for ``alpha`` < 1 on a store without BM25.
    """
    depth = check_depth(k, prefetch_limit, "prefetch_limit", defaults.options.prefetch_limit)
    rerank = defaults.rerank if rerank is None else check_rerank(rerank)
    if alpha is not None:
        alpha, source = check_alpha(alpha), "given"
    else:
        alpha = query_alpha(defaults.alpha, text)
        source = "question" if alpha != defaults.alpha else "store"
    if alpha < 1.0 and not defaults.bm25:
        raise SettingsMismatchError(
            f"{defaults.where} was built without BM25 keyword vectors, so it cannot rank by keywords (alpha={alpha} "
            "asks for BM25): search with alpha=1 (the rerank alone, what the store does by default), or ingest "
            "into a new store with BM25 (bm25=True, enable_hybrid=True or lmk-rag ingest --bm25)"
        )
    weight = defaults.document_weight() if rerank == Rerank.CHUNKS else 0.0
    return SearchPlan(k=k, rerank=rerank, alpha=alpha, alpha_source=source, document_weight=weight,
                      length_penalty=length_penalty(weight), prefetch_limit=depth,
                      one_per_document=one_per_document, filter=filter, text=text, options=defaults.options)


def penalised(penalty: float) -> Expression:
    """The document length penalty as a formula over a chunk scorer's results: the score less
    ``penalty * ln(n)``, ``n`` the scored node's document chunk count (its payload's ``document.chunks``; 1 where a
    node has none, so no penalty).

    :param penalty: per unit of ``ln(n)``, times the query vectors the MaxSim sums over.
    """
    return Sum((Score(), Product((Constant(-penalty), Ln(PayloadValue(DOCUMENT_CHUNKS, 1.0))))))


def evaluate(formula: Expression, score: float, payload: dict[str, Any]) -> float:
    """A formula's value for one point (what an engine computes from the formula's translation).

    :param formula: the formula.
    :param score: the point's score from the scorer the formula rescores.
    :param payload: the point's payload; a dotted key reads nested objects.
    """
    if isinstance(formula, Score):
        return score
    if isinstance(formula, Constant):
        return formula.value
    if isinstance(formula, PayloadValue):
        value: Any = payload
        for part in formula.key.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        return formula.default if value is None else float(value)
    if isinstance(formula, Ln):
        return math.log(evaluate(formula.of, score, payload))
    if isinstance(formula, Sum):
        return math.fsum(evaluate(term, score, payload) for term in formula.terms)
    return math.prod(evaluate(factor, score, payload) for factor in formula.factors)


def plan_mmr(
    vector: list[float], lambda_: float, candidates: int, k: int, filter: Any, payload_keys: list[str],
    options: SearchOptions = SearchOptions(),
) -> QueryPlan:
    """The plan of a diverse search: maximal marginal relevance over the node vectors (no rerank, no BM25).

    :param vector: the query vector, (dim,).
    :param lambda_: weight of relevance against diversity, in [0, 1] (1 = the plain nearest nodes).
    :param candidates: how many nearest nodes MMR chooses from (at least ``k``).
    :param k: results.
    :param filter: the backend-native filter.
    :param payload_keys: payload keys returned with each scored point.
    :param options: how the candidate search runs.
    :return: the plan; its results come in MMR order (see :attr:`QueryPlan.mmr_lambda`), not sorted by score.
    """
    return QueryPlan(
        prefetch=(),
        scorers=(Branch("node", vector),),
        prefetch_limit=max(candidates, k),
        limit=k,
        filter=filter,
        payload_keys=payload_keys,
        options=options,
        mmr_lambda=check_alpha(lambda_, "lambda_"),
    )


def carry_payloads(plan: QueryPlan, results: list[list[ScoredPointData]]) -> list[list[ScoredPointData]]:
    """A backend's answer to a plan with the plain search's points given the payloads the scorers returned for them.

    The plain search asks for no payloads (reading them was a fifth of a fused search's time at 300k nodes,
    docs/decisions.md): its top is the BM25 prefetch branch's, so the scorers, which return every candidate,
    return the same points. A point no scorer returned (a tie at the last place, broken the other way) is left out.

    :param plan: the plan the results answer.
    :param results: one scored list per scorer, then the plain search's (when the plan has one).
    :return: the lists, the plain search's with payloads.
    """
    if plan.search is None:
        return results
    *scored, searched = results
    payloads = {point.id: point.payload for points in scored for point in points}
    carried = [ScoredPointData(p.id, p.score, payloads[p.id]) for p in searched if p.id in payloads]
    return [*scored, carried]


def fuse(plan: QueryPlan, results: list[list[ScoredPointData]]) -> list[ScoredPointData]:
    """The final scores of a plan's candidates, best first (ties by point id).

    Scores are rounded to 6 decimals: float32 noise of the engine (two stores written alike can differ in the
    last bits) never decides an order, the point id does.

    :param plan: the plan the results answer.
    :param results: one scored list per scorer of the plan (then the plain search's).
    :return: every candidate once, with its final score: the plan's ``alpha`` times the dense side plus ``1 - alpha``
        times the lexical side (a plan without one of the two sides ranks by the other alone). The dense side is the
        first scorer's score (rescored by the plan's formula, the document length penalty, where it has one), blended
        with the document cosine when the plan has one (:attr:`~lmk_rag.store.types.QueryPlan.document_weight`).
    """
    sides = dict(zip([scorer.using for scorer in plan.scorers] + ([plan.search.using] if plan.search else []), results))
    lexical = sides.pop("bm25", None)
    document = sides.pop("document", None) if plan.document_weight > 0 else None
    dense = next(iter(sides.values()), None)
    scorer = next((s for s in plan.scorers if s.using not in ("bm25", "document")), None)
    points: dict[str, ScoredPointData] = {}
    dense_scores: dict[str, float] = {}
    if dense is not None and scorer is not None:
        vectors = _query_vectors(scorer)
        lowest = COSINE_RANGE[0] if plan.formula is None else \
            evaluate(plan.formula, COSINE_RANGE[0] * vectors, {DOCUMENT_KEY: {"chunks": MOST_CHUNKS}}) / vectors
        for point in dense:
            points[point.id] = point
            dense_scores[point.id] = checked_score(point, point.score / vectors, (lowest, COSINE_RANGE[1]))
    if document is not None:
        share = plan.document_weight
        cosines = {point.id: checked_score(point, point.score, COSINE_RANGE) for point in document}
        floor = min(cosines.values(), default=0.0)  # a candidate the document scorer did not return
        dense_scores = {point_id: (1 - share) * score + share * cosines.get(point_id, floor)
                        for point_id, score in dense_scores.items()}
    lexical_scores: dict[str, float] = {}
    if lexical is not None:
        top = max((checked_score(point, point.score, (0.0, math.inf)) for point in lexical), default=0.0)
        for point in lexical:
            points.setdefault(point.id, point)
            lexical_scores[point.id] = point.score / top if top > 0 else 0.0
    if dense is None:
        weight = 0.0
    elif lexical is None:
        weight = 1.0
    else:
        weight = plan.alpha
    floor = min(dense_scores.values(), default=0.0)  # a candidate the dense scorer did not return
    fused = [
        ScoredPointData(
            point_id,
            round(weight * dense_scores.get(point_id, floor) + (1 - weight) * lexical_scores.get(point_id, 0.0), 6),
            point.payload,
        )
        for point_id, point in points.items()
    ]
    return sorted(fused, key=lambda point: (-point.score, point.id))


#: Where a cosine-like score must lie (float32 rounding aside); anything else comes from damaged vectors.
COSINE_RANGE = (-1.001, 1.001)


def checked_score(point: ScoredPointData, score: float, bounds: tuple[float, float] = COSINE_RANGE) -> float:
    """A score, or :class:`CorruptStoreError` when it is not finite or outside its range (damaged vectors)."""
    if not (math.isfinite(score) and bounds[0] <= score <= bounds[1]):
        node = point.payload.get("node_id")
        raise CorruptStoreError(
            f"point {point.id}{'' if node is None else f' (node {node!r})'} scored {score}: its stored vectors are "
            "damaged; run lmk-rag check --store FOLDER, and re-ingest that document"
        )
    return score


def _query_vectors(scorer: Branch) -> int:
    """How many query vectors a MaxSim sums over (1 for a single vector)."""
    query = scorer.query
    if isinstance(query, list) and query and isinstance(query[0], list):
        return len(query)
    return 1


def best_hits(points: Sequence[ScoredPointData], k: int, one_per_document: bool) -> list[ScoredPointData]:
    """The first ``k`` points of a ranked list, at most one per document when ``one_per_document``.

    :return: the points, best first.
    """
    best: list[ScoredPointData] = []
    seen: set[str] = set()
    for point in points:
        key = point.payload["doc_id"] if one_per_document else point.id
        if key not in seen:
            seen.add(key)
            best.append(point)
            if len(best) == k:
                break
    return best


def matched_evidence(cosines: np.ndarray, spans: Sequence[tuple[int, int]] | None, node_span: tuple[int, int],
                     kind: EvidenceKind) -> tuple[tuple[Evidence, ...], tuple[ChunkScore, ...]]:
    """The pieces of a node that carried its MaxSim, best first (ties: document order), and, for chunks, the query's
    score of each of them.

    :param cosines: the query vectors' cosines with the node's chunk (or static token) vectors, (q, n): unit query
        vectors (as the store's scorers take them) times the node's stored unit vectors (:func:`vector_cosines`).
    :param spans: each vector's char span in the document, (n,), or None where unknown.
    :param node_span: the node's span in the document.
    :param kind: what one vector is (``"chunk"`` or ``"token"``).
    :return: one :class:`Evidence` per vector that is some query vector's best, its score the share of the MaxSim it
        carried (the scores add up to the MaxSim over ``q``); where ``spans`` is None or does not match the vectors
        (n spans), one ``"node"`` evidence spanning the node with the whole MaxSim. With them, for ``"chunk"``
        evidence, every chunk's :class:`ChunkScore` (its column's mean), in document order; none otherwise.
    """
    queries, n = cosines.shape
    if queries == 0 or n == 0:
        return (Evidence(node_span[0], node_span[1], None, "node"),), ()
    if queries == 1:  # one query vector (every query of at most one chunk): its best vector carries all
        row = cosines[0].tolist()
        best = max(range(n), key=row.__getitem__)
        shares, rows = {best: row[best]}, [best]
    else:
        argmax = cosines.argmax(axis=1)
        summed = np.bincount(argmax, weights=cosines[np.arange(queries), argmax], minlength=n) / queries
        rows = np.unique(argmax).tolist()
        shares = {index: float(summed[index]) for index in rows}
    if spans is None or len(spans) != n:
        return (Evidence(node_span[0], node_span[1], round(sum(shares.values()), 6), "node"),), ()
    order = sorted(rows, key=lambda index: (-shares[index], spans[index][0]))
    evidence = tuple(Evidence(int(spans[index][0]), int(spans[index][1]), round(shares[index], 6), kind)
                     for index in order)
    if kind != "chunk":
        return evidence, ()
    means = cosines[0].tolist() if queries == 1 else cosines.mean(axis=0).tolist()
    scores = sorted(zip(spans, means))
    return evidence, tuple(ChunkScore(int(start), int(end), round(score, 6)) for (start, end), score in scores)


def vector_cosines(queries: np.ndarray, vectors: Sequence[Any]) -> list[np.ndarray]:
    """The cosines of unit query vectors with each of several nodes' stored vectors, in one product.

    :param queries: the query vectors, (q, dim), unit length.
    :param vectors: each node's vectors as the engine returns them: rows of ``dim`` numbers, (n_i, dim).
    :return: one (q, n_i) array per node.
    """
    counts = [len(rows) for rows in vectors]
    stacked = np.array([row for rows in vectors for row in rows], dtype=np.float32).reshape(-1, queries.shape[1])
    cosines = queries.astype(np.float32, copy=False) @ stacked.T
    bounds = np.cumsum([0, *counts]).tolist()
    return [cosines[:, bounds[i] : bounds[i + 1]] for i in range(len(counts))]


def keyword_evidence(node_span: tuple[int, int]) -> tuple[Evidence, ...]:
    """The evidence of a hit of a BM25-only search: the whole node, no rerank score."""
    return (Evidence(node_span[0], node_span[1], None, "bm25"),)
