"""Combiner study (issue 42 item 3): a learned ranking from the granularities one pass computes, with its weights
chosen per query, trained on sets of several kinds and scored on a domain it never saw.

Per query, the store's candidates (``common.store_candidates``) carry four scores the store can compute in its
Query API calls: chunk MaxSim, the document cosine, the node cosine and BM25 over the best candidate's BM25. The
combiner scores a candidate ``sum_j f_j * (W_j . z)``: each score's weight is a linear function of what is known
at query time, ``z`` = (1, the query is a question, the store's document weight (its contrast, scaled to [0, 1]),
both together, the query's BM25 terms, how peaked the candidates' chunk MaxSim is, how far the dense and the BM25
top 10 agree). ``W`` starts at the product's own fusion as it was before the document length penalty (``base``:
question gate and document cosine, which that ``W`` reproduces exactly) and is fitted listwise: a document scores
its best candidate node, and the loss is the softmax cross-entropy of the relevant documents among the candidates'
documents (each training set weighs the same), with ``lambda * |W - W_base|^2`` holding it near the product.

Two protocols, so that no set is scored by weights fitted on it:

- ``leave-one-domain-out``: for each dev domain (manual pages, Perl pages, perlfaq), fitted on the other two dev
  domains plus ``faq-train`` (natural questions of three other FAQs, as a set of answers), scored on the domain
  left out;
- ``all``: fitted on every dev set plus ``faq-train``, scored on the held-out sets (never used to fit or choose).

Prints nDCG@10 per set against ``base`` (the product's ranking), with paired 95% intervals, and writes the
per-query values::

    cd benchmarks/studies && python combiner_study.py --out results/combiner_study.json
"""

from __future__ import annotations

import argparse
import json
import pickle
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import common
import numpy as np
import torch

from lmk_rag.eval import BeirDataset, load_beir, per_query_metrics
from lmk_rag.research import DEFAULT_ALPHA, DOCUMENT_WEIGHT, QUESTION_SHARE, document_weight, is_question

#: The dev sets by domain (a domain is left out at a time), and the held-out sets scored by the ``all`` fit.
DOMAINS = {
    "manpages": ("manpages-short", "manpages-longdoc", "manpages-needle/L2048", "manpages-needle/L8192"),
    "perldoc": ("perldoc-longdoc", "perldoc-ref"),
    "perlfaq": ("perlfaq-answers", "perlfaq-longdoc"),
}
HELD_OUT = ("unixfaq-answers", "unixfaq-longdoc")
#: The training pairs every fit sees: natural questions over short answers of other domains.
FAQ_TRAIN = common.BENCHMARKS / "data" / "faq-train" / "pairs.jsonl"
SCORES = ("chunk MaxSim", "document cosine", "node cosine", "BM25 / best", "MaxSim min-max", "document breadth",
          "second node MaxSim")
#: The combiners fitted: the columns of :data:`SCORES` each weighs, and which of those columns' weights are fitted
#: (None: all; the others stay the product's). The four scores the store computes, then those with three more made
#: from them (MaxSim min-max scaled over the candidates; how many candidate nodes the node's document has,
#: ``log(1 + n) / log(201)``; the document's second-best candidate MaxSim, the candidates' lowest for a document
#: with one); then one weight at a time: BM25's (an alpha per query), the document cosine's, the node cosine's.
COMBINERS: dict[str, tuple[tuple[int, ...], tuple[int, ...] | None]] = {
    "combiner": ((0, 1, 2, 3), None),
    "combiner+": ((0, 1, 2, 3, 4, 5, 6), None),
    "BM25 gate": ((0, 1, 2, 3), (3,)),
    "document gate": ((0, 1, 2, 3), (1,)),
    "node gate": ((0, 1, 2, 3), (2,)),
}
CONTEXT = ("1", "question", "store document weight", "question x document weight", "BM25 terms / 16",
           "MaxSim peak", "dense-BM25 top-10 agreement")
#: The strengths of the pull towards the product's weights.
LAMBDAS = (0.1, 0.01, 0.001)
#: The scale of the product's scores in the softmax (a cosine gap of 0.05 is a factor of e).
TEMPERATURE = 0.05


@dataclass
class QuerySet:
    """One set's queries, each query's candidates packed one after the other."""

    name: str
    data: BeirDataset
    nodes: list[np.ndarray]  # each query's candidate nodes
    node_doc: np.ndarray  # the set's node -> document index
    scores: np.ndarray  # (all candidates, len(SCORES))
    context: np.ndarray  # (queries, len(CONTEXT))
    starts: np.ndarray  # (queries + 1,) each query's first candidate row
    relevant: np.ndarray  # (all candidates,) whether the candidate's document is relevant

    @property
    def n_queries(self) -> int:
        """Number of queries."""
        return len(self.nodes)


def product_weights(columns: Sequence[int] = (0, 1, 2, 3)) -> np.ndarray:
    """``W`` (len(columns), len(CONTEXT)) over the ``columns`` of :data:`SCORES` that scores as the product does:
    ``alpha * ((1 - w) MaxSim + w document cosine) + (1 - alpha) BM25 / best``, alpha 0.7 (a question 0.8), ``w``
    the store's document weight (the context holds ``w / DOCUMENT_WEIGHT``)."""
    weights = np.zeros((len(SCORES), len(CONTEXT)))
    question = (1 - DEFAULT_ALPHA) * QUESTION_SHARE  # what a question adds to alpha
    # alpha (1 - w) = (a + q Q)(1 - D s) with s the scaled weight: a - a D s + Q q - Q D q s
    weights[0, :4] = [DEFAULT_ALPHA, question, -DEFAULT_ALPHA * DOCUMENT_WEIGHT, -question * DOCUMENT_WEIGHT]
    weights[1, :4] = [0.0, 0.0, DEFAULT_ALPHA * DOCUMENT_WEIGHT, question * DOCUMENT_WEIGHT]
    weights[3, :2] = [1 - DEFAULT_ALPHA, -question]
    return weights[list(columns)]


def query_set(name: str, data: BeirDataset) -> QuerySet:
    """Encode (or load from the eval cache) a set and compute every query's candidates, scores and context."""
    corpus = common.corpus_of(data)
    bm25 = common.Bm25Index.of_store(corpus.node_texts)
    terms = common.query_terms(data.query_texts)
    sums, counts = common.document_chunk_sums(corpus)
    doc_weight = document_weight(sums / np.maximum(counts, 1)[:, None], counts)
    doc_vectors = sums / np.maximum(np.linalg.norm(sums, axis=1), 1e-12)[:, None]
    doc_index = {doc_id: i for i, doc_id in enumerate(data.doc_ids)}
    nodes_of, rows, contexts, relevant = [], [], [], []
    for query, qid in enumerate(data.query_ids):
        vector, chunks = corpus.query_vectors[query], corpus.query_chunks[query]
        lexical_all = bm25.scores(terms[query])
        nodes = common.store_candidates(corpus.node_vectors, vector, lexical_all)
        chunk = common.chunk_maxsim(corpus, chunks)[nodes]
        lexical = lexical_all[nodes]
        top = lexical.max() if lexical.max() > 0 else 1.0
        docs = corpus.node_doc[nodes]
        spread = max(float(chunk.max() - chunk.min()), 1e-6)
        _, inverse, per_doc = np.unique(docs, return_inverse=True, return_counts=True)
        second = np.full(len(per_doc), chunk.min())
        for group in np.flatnonzero(per_doc > 1):
            second[group] = np.sort(chunk[inverse == group])[-2]
        scores = np.column_stack([chunk, doc_vectors[docs] @ vector, corpus.node_vectors[nodes] @ vector,
                                  lexical / top, (chunk - chunk.min()) / spread,
                                  np.log1p(per_doc[inverse]) / np.log(201), second[inverse]])
        asked = float(is_question(data.query_texts[query]))
        scaled = doc_weight / DOCUMENT_WEIGHT
        dense_top = np.argsort(-chunk, kind="stable")[:10]
        lexical_top = np.argsort(-lexical, kind="stable")[:10]
        peak = float(chunk[dense_top[0]] - chunk[dense_top].mean())
        agreement = len(np.intersect1d(dense_top, lexical_top[lexical[lexical_top] > 0])) / 10
        contexts.append([1.0, asked, scaled, asked * scaled, min(len(terms[query]), 16) / 16, peak, agreement])
        wanted = {doc_index[d] for d, rel in data.qrels.get(qid, {}).items() if rel > 0 and d in doc_index}
        relevant.append(np.isin(corpus.node_doc[nodes], list(wanted)))
        nodes_of.append(nodes)
        rows.append(scores)
    starts = np.cumsum([0] + [len(n) for n in nodes_of])
    print(f"{name}: {len(data.doc_ids)} docs, {len(corpus.node_doc)} nodes, {len(data.query_ids)} queries, "
          f"document weight {doc_weight:.3f}", flush=True)
    return QuerySet(name, data, nodes_of, corpus.node_doc, np.concatenate(rows), np.asarray(contexts),
                    starts, np.concatenate(relevant))


def candidate_scores(query_set: QuerySet, weights: np.ndarray, columns: Sequence[int]) -> np.ndarray:
    """Every candidate's combined score: ``sum_j f_j * (W_j . z)`` with its query's ``z``, over the ``columns``
    of :data:`SCORES`."""
    per_query = query_set.context @ weights.T  # (queries, len(columns)): each score's weight for each query
    lengths = np.diff(query_set.starts)
    return (query_set.scores[:, list(columns)] * np.repeat(per_query, lengths, axis=0)).sum(axis=1)


class Packed:
    """The training sets as tensors: candidates, their (query, document) group, their query and set."""

    def __init__(self, sets: Sequence[QuerySet], columns: Sequence[int]) -> None:
        scores, context, group_of, query_of, relevant_groups, group_query = [], [], [], [], [], []
        set_of_query: list[int] = []
        groups = queries = 0
        for index, qs in enumerate(sets):
            for q in range(qs.n_queries):
                rows = slice(qs.starts[q], qs.starts[q + 1])
                docs = qs.node_doc[qs.nodes[q]]
                local, inverse = np.unique(docs, return_inverse=True)
                relevant = np.zeros(len(local), dtype=bool)
                relevant[inverse[qs.relevant[rows]]] = True
                if not relevant.any():
                    continue  # no relevant document among the candidates: nothing to learn
                scores.append(qs.scores[rows][:, list(columns)])
                context.append(np.repeat(qs.context[q][None, :], len(docs), axis=0))
                group_of.append(groups + inverse)
                query_of.append(np.full(len(docs), queries))
                relevant_groups.append(relevant)
                group_query.append(np.full(len(local), queries))
                set_of_query.append(index)
                groups += len(local)
                queries += 1
        self.scores = torch.tensor(np.concatenate(scores), dtype=torch.float64)
        self.context = torch.tensor(np.concatenate(context), dtype=torch.float64)
        self.group = torch.tensor(np.concatenate(group_of))
        self.relevant = torch.tensor(np.concatenate(relevant_groups))
        self.group_query = torch.tensor(np.concatenate(group_query))
        self.n_groups, self.n_queries = groups, queries
        set_sizes = np.bincount(set_of_query, minlength=len(sets))
        #: Each query's weight in the loss: every set weighs the same.
        self.query_weight = torch.tensor(1.0 / (len(sets) * set_sizes[set_of_query]), dtype=torch.float64)

    def loss(self, weights: torch.Tensor) -> torch.Tensor:
        """The listwise loss: per query, ``-log`` of the softmax mass of its relevant documents, a document
        scoring its best candidate node."""
        per_candidate = (self.scores * (self.context @ weights.T)).sum(dim=1) / TEMPERATURE
        doc = torch.full((self.n_groups,), -torch.inf, dtype=torch.float64)
        doc = doc.scatter_reduce(0, self.group, per_candidate, reduce="amax", include_self=True)
        top = torch.full((self.n_queries,), -torch.inf, dtype=torch.float64)
        top = top.scatter_reduce(0, self.group_query, doc, reduce="amax", include_self=True).detach()
        mass = torch.exp(doc - top[self.group_query])
        everything = torch.zeros(self.n_queries, dtype=torch.float64).index_add(0, self.group_query, mass)
        wanted = torch.zeros(self.n_queries, dtype=torch.float64).index_add(
            0, self.group_query, mass * self.relevant)
        return -(self.query_weight * torch.log(wanted / everything)).sum()


def fit(sets: Sequence[QuerySet], lam: float, columns: Sequence[int], rows: Sequence[int] | None = None
        ) -> np.ndarray:
    """``W`` over the ``columns`` of :data:`SCORES` fitted on the sets (L-BFGS from the product's weights, pulled
    towards them at ``lam``); only the weights of the ``rows`` of ``W`` (None: all) move."""
    packed = Packed(sets, columns)
    start = torch.tensor(product_weights(columns), dtype=torch.float64)
    moving = torch.zeros_like(start)
    moving[list(range(len(columns))) if rows is None else list(rows)] = 1.0
    delta = torch.zeros_like(start).requires_grad_(True)
    optimizer = torch.optim.LBFGS([delta], max_iter=200, line_search_fn="strong_wolfe")

    def closure() -> torch.Tensor:
        optimizer.zero_grad()
        loss = packed.loss(start + moving * delta) + lam * ((moving * delta) ** 2).sum()
        loss.backward()
        return loss

    optimizer.step(closure)
    return (start + moving * delta).detach().numpy()


def per_query(query_set: QuerySet, weights: np.ndarray, columns: Sequence[int] = (0, 1, 2, 3)) -> dict[str, float]:
    """nDCG@10 of every query of a set ranked by the combined scores."""
    combined = candidate_scores(query_set, weights, columns)
    rankings = [common.doc_ranking(nodes, np.round(combined[query_set.starts[q]:query_set.starts[q + 1]], 6),
                                   query_set.node_doc)
                for q, nodes in enumerate(query_set.nodes)]
    run = {qid: [query_set.data.doc_ids[d] for d in ranking] for qid, ranking in zip(query_set.data.query_ids,
                                                                                     rankings)}
    return {qid: row["ndcg@10"] for qid, row in per_query_metrics(query_set.data.qrels, run).items()}


def describe(weights: np.ndarray, columns: Sequence[int]) -> str:
    """The fitted weights minus the product's, one line per score."""
    delta = weights - product_weights(columns)
    return "\n".join(f"    {SCORES[c]:18s} " + " ".join(f"{name}={v:+.3f}" for name, v in zip(CONTEXT, row))
                     for c, row in zip(columns, delta))


def cached_query_set(name: str, data: BeirDataset, folder: Path | None) -> QuerySet:
    """:func:`query_set`, kept as a pickle in ``folder`` (None: computed each time)."""
    path = None if folder is None else folder / f"{name.replace('/', '_')}.pickle"
    if path is not None and path.exists():
        return pickle.loads(path.read_bytes())
    computed = query_set(name, data)
    if path is not None:
        folder.mkdir(parents=True, exist_ok=True)
        path.write_bytes(pickle.dumps(computed))
    return computed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--cache", type=Path, default=None, help="a folder keeping each set's candidates and scores")
    args = parser.parse_args()
    sets = {name: cached_query_set(name, load_beir(common.SETS[name]), args.cache)
            for names in DOMAINS.values() for name in names}
    faq = cached_query_set("faq-train", common.training_set("faq-train", FAQ_TRAIN), args.cache)
    held_out = {name: cached_query_set(name, load_beir(common.SETS[name]), args.cache) for name in HELD_OUT}
    results: dict[str, dict[str, dict[str, float]]] = {}
    for name, qs in {**sets, **held_out}.items():
        results[name] = {"base": per_query(qs, product_weights())}
    for combiner, (columns, rows) in COMBINERS.items():
        for lam in LAMBDAS:
            variant = f"{combiner} lambda {lam}"
            for left_out, names in DOMAINS.items():
                train = [qs for name, qs in sets.items() if name not in names] + [faq]
                weights = fit(train, lam, columns, rows)
                print(f"{variant}, without {left_out}: W - product\n{describe(weights, columns)}", flush=True)
                for name in names:
                    results[name][variant] = per_query(sets[name], weights, columns)
            weights = fit([*sets.values(), faq], lam, columns, rows)
            print(f"{variant}, every dev set: W - product\n{describe(weights, columns)}", flush=True)
            for name in HELD_OUT:
                results[name][variant] = per_query(held_out[name], weights, columns)
    args.out.write_text(json.dumps({name: {variant: {qid: round(value, 4) for qid, value in values.items()}
                                           for variant, values in variants.items()}
                                    for name, variants in results.items()}))
    for name, variants in results.items():
        print(name, flush=True)
        common.print_against_base(variants)


if __name__ == "__main__":
    main()
