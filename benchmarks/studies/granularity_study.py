"""Granularity study (issue 42 item 3): one ranking from the granularities one encoding pass computes.

Per query, the store's candidates (the top 100 nodes by node vector and the top 100 by BM25, Qdrant's BM25 with
code tokens at average length 256, as the store writes it) get the store's fused score from the store's own code
(``common.store_scores``: ``alpha * chunk MaxSim + (1 - alpha) * BM25 / best BM25``, ``base``). The variants
change the dense side only, so BM25 keeps its share ``1 - alpha``:

- ``node g``: ``(1 - g) * chunk MaxSim + g * node cosine`` (the node vector the dense prefetch searches);
- ``doc d``: ``(1 - d) * chunk MaxSim + d * document cosine`` (the normalised mean of the document's chunk vectors);
- ``node g doc d``: both terms;
- ``alpha a``: the store's fusion at another dense weight (``base`` is 0.7);
- ``coverage a low-high``: alpha chosen per query from the share of the query's terms (by IDF) the best BM25
  node holds: the store's 0.7 when it holds ``high`` or more, rising to ``a`` at ``low`` or less;
- ``gate``: ``g`` chosen per query from what is known at query time: how far the best candidate's chunk MaxSim
  stands above its node cosine (a buried passage: far; a node read as a whole: near);
- ``coherent d lo-hi`` / ``bonus d lo-hi``: the document cosine weighted by how far the document's chunks agree
  (its coherence: the length of the mean of its unit chunk vectors; a haystack of unrelated pages is low, one page
  high), ``g = clip((coherence - lo) / (hi - lo), 0, 1)``: ``(1 - d g) * chunk MaxSim + d g * document cosine``
  (coherent), or ``chunk MaxSim + d g * document cosine`` (bonus);
- ``question a node g``: for a query asked as a question (its text ends with ``?``, a trailing parenthesis aside),
  dense weight ``a`` and node weight ``g``; every other query keeps ``base``;
- ``product``: the store's ranking with the question gate (``query_alpha``); ``product doc d``: with the document
  cosine at ``d`` beside MaxSim; ``store``: with the store's own document weight (``document_weight`` of every
  document of the set: 0.25 on a set of whole documents, 0 on haystacks) and its document length penalty at that
  weight (chunk MaxSim less ``length_penalty(w) * ln(n)``, ``n`` the document's chunk vectors);
- ``contrast d lo-hi``: the document cosine's weight chosen per query from the candidates' documents: the median
  agreement of a document's chunks against the mean agreement between two candidates' documents (their
  *contrast*), ``d`` from a contrast of ``hi`` up, 0 below ``lo``.

On top of ``store`` (the product's ranking), each changing one thing:

- ``store pairs g``: MaxSim also over each two adjacent chunks of a node (their normalised sum, a 128-token span),
  ``(1 - g) * chunk MaxSim + g * max(chunk MaxSim, pair MaxSim)``;
- ``store z a`` / ``store minmax a``: both sides z-scored over the candidates, or the dense side min-max scaled
  (BM25 stays divided by its best), fused at ``a``;
- ``store second b``: a document scores its best node plus ``b`` times its second best (its best minus 0.2 when it
  has one candidate node);
- ``store centre t``: every chunk vector, the query's among them, less ``t`` times the mean chunk vector of the set
  and normalised again (the anisotropy of a sentence encoder's space removed), MaxSim and the document cosine from
  those (the candidates stay the store's);
- ``store hub b``: the dense side less ``b`` times the cosine of the node's best chunk with the set's mean chunk
  direction (a hub, near every query, pays);
- ``store length b``: the length penalty at ``b`` instead of the store's (0: none, the store before it); ``store
  sqrt b``: ``b * sqrt(2 ln(n))`` instead (the growth of the best of ``n`` Gaussian draws);
- ``store bm25 length c``: the BM25 side pays a length penalty too, ``c * ln(n)`` off each candidate's BM25 /
  best (a candidate with BM25 hits only), scaled with the store's document weight as the dense one is;
- ``store prf b k``: dense pseudo-relevance feedback: the dense side plus ``b`` times each candidate's document
  cosine with the normalised sum of the document vectors of the store's top ``k`` documents;
- ``store doclevel m``: fusion at document level too, as the stock pipeline fuses: each candidate's document scores
  its best dense candidate node and its best BM25 / best one fused at the query's alpha, and a node's score is
  ``(1 - s) * its own + s * its document's``, ``s = m`` scaled with the store's document weight (0 on haystacks);
  ``store question doclevel m alpha a``: for questions alone, ``s = m`` and both fusions at dense weight ``a``.
- ``store question z a`` / ``store question minmax a``: ``store z a`` / ``store minmax a`` for questions alone.

Documents rank by their best node, but in ``store second b``. Prints nDCG@10 per variant with the paired
difference to ``base`` and writes the per-query values::

    python benchmarks/studies/granularity_study.py perlfaq-answers perldoc-ref --out granularity_study.json
"""

from __future__ import annotations

import common
import numpy as np

from lmk_rag.research import (
    DEFAULT_ALPHA,
    DOCUMENT_WEIGHT,
    LENGTH_PENALTY,
    document_weight,
    is_question,
    l2_normalize,
    length_penalty,
    maxsim_scores,
    pack_rows,
    query_alpha,
)

NODE_WEIGHTS = (0.25, 0.5, 0.75, 1.0)
DOC_WEIGHTS = (0.25, 0.5)
#: The dense side's weight, against the store's 0.7 (1: MaxSim alone over the same candidates).
ALPHAS = (0.8, 0.9, 1.0)
#: The coverage gate: alpha rises from the store's 0.7 to ``a`` as the share of the query (by IDF) that the best BM25
#: node holds falls from ``high`` to ``low``: a query the text words differently leans on the dense side.
COVERAGE_GATES = ((0.85, 0.5, 0.8), (0.9, 0.5, 0.8), (0.85, 0.6, 0.9), (0.9, 0.6, 0.9))
#: The query gate: the node weight falls from ``g`` to 0 as the best candidate's MaxSim - node cosine grows
#: from ``low`` to ``high``.
GATES = ((0.5, 0.02, 0.08), (0.5, 0.03, 0.12), (0.75, 0.02, 0.08), (0.75, 0.03, 0.12))
#: The coherence gates of the document cosine: (d, lo, hi).
COHERENCE_GATES = ((0.5, 0.55, 0.65), (0.5, 0.5, 0.6), (0.5, 0.6, 0.7), (0.25, 0.55, 0.65))
#: The question gate: (dense weight, node weight) for queries asked as questions.
QUESTION_GATES = ((0.8, 0.0), (0.85, 0.0), (0.9, 0.0), (0.8, 0.25), (0.85, 0.25), (0.8, 0.5), (0.85, 0.5))
#: The adjacent-pair MaxSim's share of the dense side (``store pairs g``).
PAIR_WEIGHTS = (0.3, 0.5)
#: The dense weights of the normalised fusions (``store z a``, ``store minmax a``).
NORMALISED_ALPHAS = (0.6, 0.7, 0.8)
#: The dense weights of the normalised fusions for questions alone (``store question minmax a``, ``... z a``).
QUESTION_NORMALISED_ALPHAS = (0.7, 0.75, 0.8, 0.85)
#: The second-best node's share of a document's score (``store second b``).
SECOND_WEIGHTS = (0.1, 0.25)
#: The share of the mean chunk vector taken off every chunk vector (``store centre t``).
CENTRES = (0.5, 1.0)
#: The weight of a node's nearness to the mean chunk direction taken off its dense side (``store hub b``).
HUB_WEIGHTS = (0.1, 0.2)
#: The length penalties tried on a set of whole documents (``store length b``, ``store sqrt b``).
LENGTH_PENALTIES = (0.0, 0.01, 0.015, 0.02, 0.025)
SQRT_PENALTIES = (0.01, 0.02)
#: The BM25 side's length penalties tried (``store bm25 length c``).
BM25_LENGTH_PENALTIES = (0.01, 0.02, 0.04)
#: The feedback weights and depths tried (``store prf b k``).
FEEDBACK = tuple((b, k) for b in (0.05, 0.1, 0.2) for k in (3, 5))
#: The document-level fusion's share of the score (``store doclevel m``, at the store's full document weight).
DOCUMENT_LEVEL = (0.25, 0.5, 1.0)
#: The document-level fusion for questions alone: (share, dense weight) (``store question doclevel m alpha a``).
QUESTION_DOCUMENT_LEVEL = tuple((m, a) for m in (0.5, 0.75, 1.0) for a in (0.75, 0.8, 0.85))


def second_node_ranking(nodes: np.ndarray, scores: np.ndarray, node_doc: np.ndarray, weight: float,
                        k: int = 10) -> list[int]:
    """Documents by their best node plus ``weight`` times their second best (best - 0.2 for a document with one
    candidate node); ties go by node."""
    best: dict[int, float] = {}
    second: dict[int, float] = {}
    for i in np.lexsort((nodes, -scores)):
        doc = int(node_doc[nodes[i]])
        (second if doc in best else best).setdefault(doc, float(scores[i]))
    total = {doc: score + weight * second.get(doc, score - 0.2) for doc, score in best.items()}
    return sorted(total, key=lambda doc: -total[doc])[:k]


class Study:
    """A set's nodes with their BM25 index and document vectors."""

    def __init__(self, corpus: common.Corpus) -> None:
        self.corpus = corpus
        self.bm25 = common.Bm25Index.of_store(corpus.node_texts)
        self.query_terms = common.query_terms(corpus.data.query_texts)
        sums, counts = common.document_chunk_sums(corpus)
        self.coherence = np.linalg.norm(sums, axis=1) / np.maximum(counts, 1)
        self.counts = counts
        self.pair = np.where(counts > 1, (counts * self.coherence**2 - 1) / np.maximum(counts - 1, 1), 1.0)
        self.contrasts: list[float] = []
        self.document_weight = document_weight(sums / np.maximum(counts, 1)[:, None], counts)
        self.rows = self.bm25.weights.tocsr()
        self.coverages: list[float] = []
        self.doc_vectors = sums / np.maximum(np.linalg.norm(sums, axis=1), 1e-12)[:, None]
        ends = np.append(corpus.chunk_starts[1:], len(corpus.chunk_vectors))
        pairs = [corpus.chunk_vectors[start : end - 1] + corpus.chunk_vectors[start + 1 : end]
                 for start, end in zip(corpus.chunk_starts, ends)]
        self.paired_nodes = np.array([node for node, rows in enumerate(pairs) if len(rows)], dtype=np.int64)
        self.pair_vectors, self.pair_starts = pack_rows([l2_normalize(rows) for rows in pairs if len(rows)])
        self.mean_chunk = corpus.chunk_vectors.mean(axis=0)
        mean_direction = self.mean_chunk / np.linalg.norm(self.mean_chunk)
        self.hub = np.maximum.reduceat(corpus.chunk_vectors @ mean_direction, corpus.chunk_starts)  # best chunk
        self.centred: dict[float, tuple[np.ndarray, np.ndarray]] = {}
        for t in CENTRES:
            vectors = l2_normalize(corpus.chunk_vectors - t * self.mean_chunk)
            self.centred[t] = vectors, l2_normalize(common.document_chunk_sums(corpus, vectors)[0])

    def coverage(self, query: int, node: int) -> float:
        """How much of the query the best BM25 node holds: the IDF of the query's distinct terms it contains over
        the IDF of them all (a term no node holds gets the highest IDF)."""
        bm25 = self.bm25
        most = float(np.log(1 + (bm25.weights.shape[0] + 0.5) / 0.5))
        held = total = 0.0
        present = set(self.rows.indices[self.rows.indptr[node] : self.rows.indptr[node + 1]])
        for term in self.query_terms[query]:
            column = bm25.vocab.get(term)
            idf = most if column is None else float(bm25.idf[column])
            total += idf
            held += idf if column in present else 0.0
        return held / total if total > 0 else 0.0

    def scores(self, query: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Every variant's candidates and scores for one query."""
        corpus = self.corpus
        vector, chunks = corpus.query_vectors[query], corpus.query_chunks[query]
        bm25 = self.bm25.scores(self.query_terms[query])
        nodes = common.store_candidates(corpus.node_vectors, vector, bm25)
        chunk = common.chunk_maxsim(corpus, chunks)[nodes]
        lexical = bm25[nodes]
        base = common.store_scores(nodes, chunk, lexical, chunks, DEFAULT_ALPHA, corpus.node_doc)
        node = corpus.node_vectors[nodes] @ vector
        doc = self.doc_vectors[corpus.node_doc[nodes]] @ vector
        top_bm25 = lexical.max() if lexical.max() > 0 else 1.0

        def mixed(dense: np.ndarray, alpha: float = DEFAULT_ALPHA) -> np.ndarray:
            """A dense side fused with BM25 as the store fuses them, at ``alpha``."""
            return alpha * dense + (1 - alpha) * lexical / top_bm25

        out = {"base": base}
        for g in NODE_WEIGHTS:
            out[f"node {g}"] = mixed((1 - g) * chunk + g * node)
        for d in DOC_WEIGHTS:
            out[f"doc {d}"] = mixed((1 - d) * chunk + d * doc)
            for g in (0.25, 0.5):
                out[f"node {g} doc {d}"] = mixed((1 - g - d) * chunk + g * node + d * doc) if g + d <= 1 else base
        for alpha in ALPHAS:
            out[f"alpha {alpha}"] = mixed(chunk, alpha)
        best_bm25 = int(np.argmax(bm25))  # the first of the best, as the BM25 prefetch ranks them
        coverage = self.coverage(query, best_bm25) if bm25[best_bm25] > 0 else 0.0
        self.coverages.append(coverage)
        for high_alpha, low, high in COVERAGE_GATES:
            lean = float(np.clip((high - coverage) / (high - low), 0, 1))
            alpha = DEFAULT_ALPHA + (high_alpha - DEFAULT_ALPHA) * lean
            out[f"coverage {high_alpha} {low}-{high}"] = mixed(chunk, alpha)
        top = int(np.argmax(base))
        gap = float(chunk[top] - node[top])
        for g, low, high in GATES:
            weight = g * float(np.clip((high - gap) / (high - low), 0, 1))
            out[f"gate {g} {low}-{high}"] = mixed((1 - weight) * chunk + weight * node)
        coherence = self.coherence[corpus.node_doc[nodes]]
        for d, low, high in COHERENCE_GATES:
            weight = d * np.clip((coherence - low) / (high - low), 0, 1)
            out[f"coherent {d} {low}-{high}"] = mixed((1 - weight) * chunk + weight * doc)
            out[f"bonus {d} {low}-{high}"] = mixed(chunk + weight * doc)
        asked = is_question(corpus.data.query_texts[query])
        product_alpha = query_alpha(DEFAULT_ALPHA, corpus.data.query_texts[query])
        for d in (0.2, 0.25, 0.3, 0.35, 0.5):
            out[f"product doc {d}"] = mixed((1 - d) * chunk + d * doc, product_alpha)
        out["product"] = mixed(chunk, product_alpha)
        w = self.document_weight
        log_chunks = np.log(np.maximum(self.counts[corpus.node_doc[nodes]], 1))
        for b in LENGTH_PENALTIES:
            out[f"store length {b}"] = mixed((1 - w) * (chunk - b * log_chunks) + w * doc, product_alpha)
        for b in SQRT_PENALTIES:
            out[f"store sqrt {b}"] = mixed((1 - w) * (chunk - b * np.sqrt(2 * log_chunks)) + w * doc, product_alpha)
        paid = length_penalty(w) * log_chunks  # what the store takes off each candidate's chunk MaxSim
        out["store"] = mixed((1 - w) * (chunk - paid) + w * doc, product_alpha)
        docs = np.unique(corpus.node_doc[nodes])
        means = self.doc_vectors[docs] * self.coherence[docs][:, None]
        cross = means @ means.T
        between = (cross.sum() - np.trace(cross)) / max(len(docs) * (len(docs) - 1), 1)
        contrast = float((np.median(self.pair[docs]) - between) / (1 - between))
        self.contrasts.append(contrast)
        for d in (0.25, 0.35, 0.5):
            for low, high in ((0.2, 0.2), (0.18, 0.22), (0.17, 0.23), (0.19, 0.25)):
                weight = d * float(np.clip((contrast - low) / (high - low), 0, 1)) if high > low else \
                    d * float(contrast >= low)
                out[f"contrast {d} {low}-{high}"] = mixed((1 - weight) * chunk + weight * doc, product_alpha)
        for alpha, g in QUESTION_GATES:
            out[f"question {alpha} node {g}"] = mixed((1 - g) * chunk + g * node, alpha) if asked else base
        dense = (1 - w) * (chunk - paid) + w * doc
        pair = np.full(len(corpus.node_doc), -1.0)  # a node of one chunk has no pair
        pair[self.paired_nodes] = maxsim_scores([chunks], self.pair_vectors, self.pair_starts, mean=True)[0]
        for g in PAIR_WEIGHTS:
            out[f"store pairs {g}"] = mixed((1 - w) * ((1 - g) * chunk + g * np.maximum(chunk, pair[nodes]) - paid)
                                            + w * doc, product_alpha)
        for t, (vectors, doc_vectors) in self.centred.items():
            centred_chunk = maxsim_scores([l2_normalize(chunks - t * self.mean_chunk)], vectors, corpus.chunk_starts,
                                          mean=True)[0][nodes]
            centred_doc = doc_vectors[corpus.node_doc[nodes]] @ l2_normalize(vector - t * self.mean_chunk)
            out[f"store centre {t}"] = mixed((1 - w) * (centred_chunk - paid) + w * centred_doc, product_alpha)
        for b in HUB_WEIGHTS:
            out[f"store hub {b}"] = mixed(dense - b * self.hub[nodes], product_alpha)
        for c in BM25_LENGTH_PENALTIES:
            paid_lexical = c * length_penalty(w) / LENGTH_PENALTY * log_chunks * (lexical > 0)
            out[f"store bm25 length {c}"] = product_alpha * dense + (1 - product_alpha) * (lexical / top_bm25
                                                                                           - paid_lexical)
        top_docs = common.doc_ranking(nodes, np.round(out["store"], 6), corpus.node_doc)
        for b, k in FEEDBACK:
            feedback = l2_normalize(self.doc_vectors[top_docs[:k]].sum(axis=0))
            out[f"store prf {b} {k}"] = mixed(dense + b * self.doc_vectors[corpus.node_doc[nodes]] @ feedback,
                                              product_alpha)
        doc_of = corpus.node_doc[nodes]
        dense_best = np.full(len(self.counts), -np.inf)
        lexical_best = np.zeros(len(self.counts))
        np.maximum.at(dense_best, doc_of, dense)
        np.maximum.at(lexical_best, doc_of, lexical / top_bm25)

        def document_mixed(alpha: float) -> np.ndarray:
            """Each candidate's document: its best dense and best BM25 candidate node fused at ``alpha``."""
            return alpha * dense_best[doc_of] + (1 - alpha) * lexical_best[doc_of]

        for m in DOCUMENT_LEVEL:
            share = m * w / DOCUMENT_WEIGHT
            out[f"store doclevel {m}"] = (1 - share) * out["store"] + share * document_mixed(product_alpha)
        for m, a in QUESTION_DOCUMENT_LEVEL:
            out[f"store question doclevel {m} alpha {a}"] = \
                (1 - m) * mixed(dense, a) + m * document_mixed(a) if asked else out["store"]
        z_dense, z_lexical = ((x - x.mean()) / max(float(x.std()), 1e-6) for x in (dense, lexical))
        scaled = (dense - dense.min()) / max(float(dense.max() - dense.min()), 1e-6)
        for alpha in NORMALISED_ALPHAS:
            out[f"store z {alpha}"] = alpha * z_dense + (1 - alpha) * z_lexical
            out[f"store minmax {alpha}"] = mixed(scaled, alpha)
        for alpha in QUESTION_NORMALISED_ALPHAS:
            out[f"store question minmax {alpha}"] = mixed(scaled, alpha) if asked else out["store"]
            out[f"store question z {alpha}"] = alpha * z_dense + (1 - alpha) * z_lexical if asked else out["store"]
        return {name: (nodes, values) for name, values in out.items()}


def study(corpus: common.Corpus) -> dict[str, dict[str, float]]:
    """Every variant's per-query nDCG@10, by query id."""
    scorer = Study(corpus)
    rankings: dict[str, list[list[int]]] = {}
    for query in range(len(corpus.data.query_ids)):
        for name, (nodes, values) in scorer.scores(query).items():
            rankings.setdefault(name, []).append(common.doc_ranking(nodes, np.round(values, 6), corpus.node_doc))
            if name == "store":
                for weight in SECOND_WEIGHTS:
                    rankings.setdefault(f"store second {weight}", []).append(
                        second_node_ranking(nodes, np.round(values, 6), corpus.node_doc, weight))
    print(f"  the store's document weight: {scorer.document_weight}; per-query contrast percentiles 10/25/50/75/90:",
          np.percentile(scorer.contrasts, [10, 25, 50, 75, 90]).round(3), flush=True)
    print("  coverage of the best BM25 node, percentiles 10/25/50/75/90:",
          np.percentile(scorer.coverages, [10, 25, 50, 75, 90]).round(3), flush=True)
    return common.ndcg_per_query(corpus, rankings)


if __name__ == "__main__":
    common.run_study(__doc__.split("\n")[0], study)
