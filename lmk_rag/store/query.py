"""Search planning and score fusion (pure): what the store asks a backend, and how it ranks the answer.

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
from collections.abc import Sequence
from typing import Any

import numpy as np

from lmk_rag.errors import CorruptStoreError, InvalidInputError
from lmk_rag.store.types import (
    Branch,
    ChunkScore,
    Evidence,
    EvidenceKind,
    QueryPlan,
    Rerank,
    ScoredPointData,
    SearchOptions,
    SparseVector,
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

    :raises InvalidInputError: for an unknown mode.
    """
    try:
        return Rerank(rerank)
    except ValueError:
        choices = ", ".join(repr(mode.value) for mode in Rerank)
        raise InvalidInputError(f"rerank must be one of {choices}, got {rerank!r}") from None


def plan_search(
    *,
    dense: Sequence[Branch],
    scorer: Branch,
    sparse: SparseVector | None,
    alpha: float,
    prefetch_limit: int,
    filter: Any,
    payload_keys: list[str],
    options: SearchOptions = SearchOptions(),
    document: Branch | None = None,
    document_weight: float = 0.0,
) -> QueryPlan:
    """The plan of one search.

    :param dense: the dense prefetch branches (by node vector).
    :param scorer: the dense side's scoring query (chunk or static MaxSim, or the node vector).
    :param sparse: the query's BM25 vector, or None when there is no lexical side (no BM25, no query text, or
        only stop words).
    :param alpha: weight of the dense side (see :func:`fuse`).
    :param prefetch_limit: candidates per prefetch branch.
    :param filter: the backend-native filter.
    :param payload_keys: payload keys returned with each scored point.
    :param options: how the dense searches run.
    :param document: the query vector against the ``document`` vectors: a second scorer of the dense side (see
        :func:`fuse`) when ``document_weight`` is above 0 and the search has a dense side.
    :param document_weight: the document cosine's share of the dense side; a chunk scorer also pays the document
        length penalty at that weight (:func:`length_penalty`).
    :return: the plan; BM25 widens the prefetch whenever the query has BM25 terms; unless ``alpha`` is 1, a plain
        BM25 search of the same depth runs in the same call and gives the BM25 scores (a candidate outside its
        top scores 0); ``alpha`` 0 is a plain BM25 search of the whole store.
    """
    lexical = Branch("bm25", sparse) if sparse is not None and sparse.indices else None
    scorers: tuple[Branch, ...] = (scorer,)
    if lexical is None:
        prefetch = tuple(dense) if scorer.using != "node" or len(dense) > 1 else ()  # else a plain search
    elif alpha == 0.0:
        prefetch, scorers = (), (lexical,)
    else:
        prefetch = (*dense, lexical)
    blended = document is not None and document_weight > 0.0 and scorers == (scorer,)
    if blended:
        scorers = (scorer, document)
    return QueryPlan(
        prefetch=prefetch,
        scorers=scorers,
        prefetch_limit=prefetch_limit,
        limit=prefetch_limit * max(1, len(prefetch)),
        filter=filter,
        payload_keys=payload_keys,
        options=options,
        search=lexical if lexical is not None and 0.0 < alpha < 1.0 else None,
        document_weight=document_weight if blended else 0.0,
        length_penalty=length_penalty(document_weight) * _query_vectors(scorer) if blended and
        scorer.using == "chunks" else 0.0,
    )


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


def fuse(plan: QueryPlan, results: list[list[ScoredPointData]], alpha: float) -> list[ScoredPointData]:
    """The final scores of a plan's candidates, best first (ties by point id).

    Scores are rounded to 6 decimals: float32 noise of the engine (two stores written alike can differ in the
    last bits) never decides an order, the point id does.

    :param plan: the plan the results answer.
    :param results: one scored list per scorer of the plan (then the plain search's).
    :param alpha: weight of the dense side; a plan without one of the two sides ranks by the other alone. The dense
        side is the first scorer's score (less the document length penalty where the plan has one), blended with the
        document cosine when the plan has one (:attr:`~lmk_rag.store.types.QueryPlan.document_weight`).
    :return: every candidate once, with its final score.
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
        lowest = COSINE_RANGE[0] - plan.length_penalty / vectors * math.log(MOST_CHUNKS)
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
        weight = alpha
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


def best_hits(points: Sequence[ScoredPointData], k: int, doc_level: bool) -> list[ScoredPointData]:
    """The first ``k`` points of a ranked list, at most one per document when ``doc_level``.

    :return: the points, best first.
    """
    best: list[ScoredPointData] = []
    seen: set[str] = set()
    for point in points:
        key = point.payload["doc_id"] if doc_level else point.id
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
