"""Fusion study: which BM25 (tokenisation, node or document level) and which score fusion to build into the store.

The store's search at the product's query settings (k=10: 100 candidates per prefetch branch), on whole dev sets,
from the eval harness's cached encodings (the states ``lmk-rag eval`` caches; a cold set is encoded first). Per
query: dense prefetch by node vector and BM25 prefetch (top ``--prefetch`` nodes each), chunk MaxSim of every
candidate (numpy, for the engine) and BM25 (numpy, over each tokenisation compared); the store's own fusion
(``max``) runs the store's code (``lmk_rag.store.query``: the plan, ``fuse``, the best node per document), the
alternatives (``minmax``, ``z``) are computed here; documents ranked by their best node. Prints one nDCG@10 / R@1
row per variant and writes the per-query nDCG@10 to a JSON (for paired bootstrap intervals)::

    python benchmarks/fusion_study.py manpages-needle/L2048 manpages-short --out results/fusion_study.json

The MaxSim and BM25 scores stand in for the engine's; tests/report/test_fusion_study.py checks that
:func:`store_ranking` hands them to the store's fusion as the engine's answers.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from lmk_rag.encoder import LandmarkEncoder
from lmk_rag.eval.beir import BeirDataset, load_beir
from lmk_rag.eval.intervals import paired_difference
from lmk_rag.eval.metrics import per_query_metrics
from lmk_rag.eval.states import encode_states_cached
from lmk_rag.nodes import group_chunks
from lmk_rag.paths import user_cache_dir
from lmk_rag.store.query import best_hits, plan_search
from lmk_rag.store.query import fuse as fuse_scores
from lmk_rag.store.types import Branch, ScoredPointData, SparseVector
from lmk_rag.vectors import maxsim_scores

DATA = Path("/work/shared/data") if Path("/work/shared/data").is_dir() else Path("../shared/data")


# ---------------------------------------------------------------------------------------------- tokenisers


def _edge_tokenizer(**config: object) -> Callable[[str], dict[int, float]]:
    """Term counts from Qdrant Edge's BM25 tokenisation (k huge and b=0 make its weights the raw counts)."""
    import qdrant_edge as qe

    model = qe.Bm25(qe.Bm25Config(k=1e9, b=0.0, **config))

    def counts(text: str) -> dict[int, float]:
        vector = model.embed_document(text)
        return dict(zip(vector.indices, np.round(vector.values)))

    return counts


def _regex_tokenizer(pattern: str, stopwords: frozenset[str]) -> Callable[[str], dict[str, float]]:
    """Lower-cased regex tokens minus stop words (the ``bm25`` eval pipeline's bm25s tokenisation)."""
    regex = re.compile(pattern)

    def counts(text: str) -> dict[str, float]:
        out: dict[str, float] = {}
        for token in regex.findall(text.lower()):
            if token not in stopwords:
                out[token] = out.get(token, 0.0) + 1.0
        return out

    return counts


def tokenizers() -> dict[str, Callable[[str], dict]]:
    """The tokenisations compared."""
    import qdrant_edge as qe
    from bm25s.stopwords import STOPWORDS_EN

    plain = {"stemmer": qe.DisabledStemmer(), "stopwords": qe.StopwordsSet(languages=set(), custom=set())}
    return {
        "edge-english": _edge_tokenizer(),  # today's store: word tokens, English stop words and stemming
        "edge-code": _edge_tokenizer(tokenizer=qe.TokenizerType.Code),
        "word-plain": _edge_tokenizer(**plain),  # Qdrant's default text index (word, lower case)
        "code-plain": _edge_tokenizer(tokenizer=qe.TokenizerType.Code, **plain),
        "bm25s": _regex_tokenizer(r"(?u)\b\w\w+\b", frozenset(STOPWORDS_EN)),
    }


class Bm25Index:
    """BM25 (Lucene IDF, as Qdrant's text index and IDF modifier) over term counts, true average length."""

    def __init__(self, counts: Sequence[dict], k1: float = 1.2, b: float = 0.75, avg_len: float | None = None):
        vocab: dict = {}
        rows, cols, vals = [], [], []
        for row, doc in enumerate(counts):
            for term, count in doc.items():
                rows.append(row)
                cols.append(vocab.setdefault(term, len(vocab)))
                vals.append(count)
        tf = sp.csr_matrix((vals, (rows, cols)), shape=(len(counts), max(1, len(vocab))), dtype=np.float64)
        lengths = np.asarray(tf.sum(axis=1)).ravel()
        avg = avg_len or max(1.0, lengths.mean())
        norm = k1 * (1 - b + b * lengths / avg)
        weights = tf.tocoo()
        weights.data = weights.data * (k1 + 1) / (weights.data + norm[weights.row])
        self.weights = weights.tocsc()
        df = np.diff(self.weights.indptr)
        n = len(counts)
        self.idf = np.log(1 + (n - df + 0.5) / (df + 0.5))
        self.vocab = vocab

    def scores(self, query_terms: dict) -> np.ndarray:
        """BM25 of every row for a query (each distinct query term once)."""
        cols = [self.vocab[t] for t in query_terms if t in self.vocab]
        return self.column_scores(np.asarray(cols, dtype=np.int64), np.ones(len(cols)))

    def column_scores(self, cols: np.ndarray, query_weights: np.ndarray) -> np.ndarray:
        """BM25 of every row for the vocabulary columns ``cols``, each term's score times its query weight."""
        if not len(cols):
            return np.zeros(self.weights.shape[0])
        return np.asarray(self.weights[:, cols] @ (self.idf[cols] * query_weights)).ravel()


# ---------------------------------------------------------------------------------------------- the corpus


@dataclass
class Corpus:
    """Nodes of a dev set as the store cuts them, and the encoded queries."""

    data: BeirDataset
    node_doc: np.ndarray  # (n_nodes,) doc index
    node_vectors: np.ndarray  # (n_nodes, dim)
    node_texts: list[str]
    node_spans: list[tuple[int, int]]  # each node's char span in its document
    context_texts: dict[int, list[str]]  # node texts widened by c chunks on each side, by c
    pair_texts: list[str]  # each node's text with the next node's
    chunk_vectors: np.ndarray  # (n_chunks, dim)
    chunk_starts: np.ndarray  # (n_nodes,) first chunk row of each node
    query_vectors: np.ndarray  # (n_queries, dim)
    query_chunks: list[np.ndarray]  # (q, dim) each


def load_corpus(name: str, node_tokens: int = 256, **encoder_settings: object) -> Corpus:
    """Encode (or load from the eval cache) a whole dev set and cut its nodes."""
    return corpus_of(load_beir(DATA / name), node_tokens, **encoder_settings)


def corpus_of(data: BeirDataset, node_tokens: int = 256, **encoder_settings: object) -> Corpus:
    """Encode (or load from the eval cache) a set's documents and queries and cut its nodes."""
    encoder = LandmarkEncoder(show_progress_bar=True, **encoder_settings)
    states = encode_states_cached(encoder, data.doc_texts, user_cache_dir("eval"))
    node_doc, node_vectors, node_texts, node_spans, chunks, starts = [], [], [], [], [], []
    context_texts: dict[int, list[str]] = {1: [], 2: []}
    pair_texts: list[str] = []
    row = 0
    for index, (text, encoded) in enumerate(zip(data.doc_texts, encoder.pool(states.states))):
        nodes = group_chunks(encoded, node_tokens)
        for node in nodes:
            node_doc.append(index)
            node_vectors.append(node.vector)
            node_texts.append(text[node.span[0] : node.span[1]])
            node_spans.append((node.span[0], node.span[1]))
            for c in context_texts:
                first = max(0, node.chunk_range[0] - c)
                last = min(encoded.n_chunks, node.chunk_range[1] + c) - 1
                context_texts[c].append(text[encoded.spans[first][0] : encoded.spans[last][1]])
            starts.append(row)
            chunks.append(node.chunk_vectors)
            row += len(node.chunk_vectors)
        pair_texts.extend(  # each node with the next one (the last node alone)
            text[a.span[0] : b.span[1]] for a, b in zip(nodes, nodes[1:] + nodes[-1:])
        )
    queries = encoder.encode_queries(list(data.query_texts))
    return Corpus(
        data=data,
        node_doc=np.asarray(node_doc),
        node_vectors=np.asarray(node_vectors, dtype=np.float32),
        node_texts=node_texts,
        node_spans=node_spans,
        context_texts=context_texts,
        pair_texts=pair_texts,
        chunk_vectors=np.concatenate(chunks).astype(np.float32),
        chunk_starts=np.asarray(starts),
        query_vectors=np.asarray([q.vector for q in queries], dtype=np.float32),
        query_chunks=[np.asarray(q.chunk_vectors, dtype=np.float32) for q in queries],
    )


def document_chunk_sums(corpus: Corpus) -> tuple[np.ndarray, np.ndarray]:
    """Each document's sum of its chunk vectors, (n_docs, dim), and its number of chunks, (n_docs,)."""
    n_docs = len(corpus.data.doc_texts)
    sums = np.zeros((n_docs, corpus.chunk_vectors.shape[1]), dtype=np.float32)
    ends = np.append(corpus.chunk_starts[1:], len(corpus.chunk_vectors))
    for node, (start, end) in enumerate(zip(corpus.chunk_starts, ends)):
        sums[corpus.node_doc[node]] += corpus.chunk_vectors[start:end].sum(axis=0)
    counts = np.bincount(corpus.node_doc, weights=ends - corpus.chunk_starts, minlength=n_docs)
    return sums, counts


def maxsim(corpus: Corpus, query: int) -> np.ndarray:
    """Chunk MaxSim of every node for one query, divided by the query's chunk count (cosine-like)."""
    return maxsim_scores([corpus.query_chunks[query]], corpus.chunk_vectors, corpus.chunk_starts, mean=True)[0]


# ---------------------------------------------------------------------------------------------- fusion


def minmax(x: np.ndarray) -> np.ndarray:
    """Scale to [0, 1] (all equal: zeros)."""
    span = x.max() - x.min()
    return (x - x.min()) / span if span > 0 else np.zeros_like(x)


def fuse(kind: str, alpha: float, dense: np.ndarray, bm25: np.ndarray) -> np.ndarray:
    """Fused candidate scores of the alternatives the store does not use (``alpha`` weighs the dense side); the
    store's own fusion (``max``: the cosine-like dense side as it is, BM25 over the best candidate's) is
    :func:`store_ranking`, which calls the store's code."""
    if kind == "minmax":
        return alpha * minmax(dense) + (1 - alpha) * minmax(bm25)
    if kind == "z":  # DBSF-like: (x - mean) / 3 sd
        def z(x: np.ndarray) -> np.ndarray:
            sd = x.std()
            return (x - x.mean()) / (3 * sd) if sd > 0 else np.zeros_like(x)

        return alpha * z(dense) + (1 - alpha) * z(bm25)
    raise ValueError(kind)


def store_scores(
    candidates: np.ndarray, dense: np.ndarray, lexical: np.ndarray, query_chunks: np.ndarray, alpha: float,
    node_doc: np.ndarray,
) -> np.ndarray:
    """The candidates' final scores as the store's own code (:mod:`lmk_rag.store.query`) fuses them: the plan of a
    fused search and :func:`~lmk_rag.store.query.fuse` over the engine's answers (the candidates' chunk MaxSim and
    the BM25 scores of the plain BM25 search).

    :param candidates: node indices, the union of the prefetch branches.
    :param dense: each candidate's chunk MaxSim divided by the query's chunk count (what the engine's MaxSim over
        the query's chunks is, divided back by :func:`~lmk_rag.store.query.fuse`).
    :param lexical: each candidate's BM25 score from the plain BM25 search (0 outside its top).
    :param query_chunks: the query's chunk vectors, (q, dim): the scorer's query.
    :return: the fused score of each candidate, in the order of ``candidates``.
    """
    plan = plan_search(dense=[Branch("node", [0.0])], scorer=Branch("chunks", query_chunks.tolist()),
                       sparse=SparseVector([0], [1.0]), alpha=alpha, prefetch_limit=len(candidates), filter=None,
                       payload_keys=[])
    ids = [f"{node:09d}" for node in candidates]  # point ids in node order: ties go by node, as in doc_ranking
    payloads = [{"doc_id": int(node_doc[node])} for node in candidates]
    scorer = [ScoredPointData(i, float(score) * len(query_chunks), p) for i, score, p in zip(ids, dense, payloads)]
    bm25 = [ScoredPointData(i, float(score), p) for i, score, p in zip(ids, lexical, payloads) if score > 0]
    answers = [bm25 if branch.using == "bm25" else scorer for branch in plan.scorers]
    answers += [bm25] if plan.search is not None else []
    fused = {point.id: point.score for point in fuse_scores(plan, answers, alpha)}
    return np.array([fused[point_id] for point_id in ids])


def store_ranking(
    candidates: np.ndarray, dense: np.ndarray, lexical: np.ndarray, query_chunks: np.ndarray, alpha: float,
    node_doc: np.ndarray, k: int = 10,
) -> list[int]:
    """Documents ranked as the store ranks them: :func:`store_scores`, then the best node per document (the
    store's ``best_hits``)."""
    scores = store_scores(candidates, dense, lexical, query_chunks, alpha, node_doc)
    points = [ScoredPointData(f"{node:09d}", float(score), {"doc_id": int(node_doc[node])})
              for node, score in zip(candidates, scores)]
    points.sort(key=lambda point: (-point.score, point.id))
    best = best_hits(points, k, doc_level=True)
    return [int(node_doc[int(point.id)]) for point in best]


def doc_ranking(nodes: np.ndarray, scores: np.ndarray, node_doc: np.ndarray, k: int = 10) -> list[int]:
    """Documents by their best node among the candidates (the store's ``doc_level=True``)."""
    order = np.lexsort((nodes, -scores))
    seen: list[int] = []
    for i in order:
        doc = int(node_doc[nodes[i]])
        if doc not in seen:
            seen.append(doc)
            if len(seen) == k:
                break
    return seen


def print_against_base(per_query: dict[str, dict[str, float]]) -> None:
    """Print each variant's mean and its paired difference to ``base`` [95% interval], one line each.

    :param per_query: ``{variant: {query id: value}}``, ``base`` among the variants.
    """
    base = per_query["base"]
    for variant, by_query in per_query.items():
        values = [by_query[qid] for qid in base]
        diff, low, high = paired_difference(values, list(base.values()))
        print(f"  {np.mean(values):.4f}  {diff:+.4f} [{low:+.4f}, {high:+.4f}]  {variant}", flush=True)


def evaluate(corpus: Corpus, rankings: list[list[int]]) -> dict[str, dict[str, float]]:
    """Per-query metrics of document rankings."""
    data = corpus.data
    run = {qid: [data.doc_ids[d] for d in ranking] for qid, ranking in zip(data.query_ids, rankings)}
    return per_query_metrics(data.qrels, run)


def study(corpus: Corpus, prefetch: int, alphas: Sequence[float], kinds: Sequence[str]) -> dict[str, dict]:
    """Every variant's per-query nDCG@10 and R@1."""
    toks = tokenizers()
    contexts_for = ("edge-english", "edge-code")
    n_docs = len(corpus.data.doc_texts)
    node_idx = {}
    doc_idx = {}
    queries = {name: [tok(q) for q in corpus.data.query_texts] for name, tok in toks.items()}
    for name, tokenize in list(toks.items()):
        start = time.perf_counter()
        node_counts = [tokenize(t) for t in corpus.node_texts]
        node_idx[name] = Bm25Index(node_counts)
        doc_idx[name] = Bm25Index([tokenize(t) for t in corpus.data.doc_texts])
        if name in contexts_for:
            node_idx[name + " avg256"] = Bm25Index(node_counts, avg_len=256)
            doc_idx[name + " avg256"] = doc_idx[name]
            queries[name + " avg256"] = queries[name]
            for c, texts in corpus.context_texts.items():
                node_idx[f"{name} ctx{c}"] = Bm25Index([tokenize(t) for t in texts])
                doc_idx[f"{name} ctx{c}"] = doc_idx[name]
                queries[f"{name} ctx{c}"] = queries[name]
        print(f"  {name}: indexed in {time.perf_counter() - start:.0f} s", flush=True)
    variants: dict[str, list[list[int]]] = {}

    def add(name: str, ranking: list[int]) -> None:
        variants.setdefault(name, []).append(ranking)

    for q in range(len(corpus.data.query_ids)):
        dense_all = corpus.node_vectors @ corpus.query_vectors[q]
        dense_top = np.argsort(-dense_all, kind="stable")[:prefetch]
        ms = maxsim(corpus, q)
        add("alpha1 (dense prefetch only)", doc_ranking(dense_top, ms[dense_top], corpus.node_doc))
        for name in node_idx:
            node_bm25 = node_idx[name].scores(queries[name][q])
            doc_bm25 = doc_idx[name].scores(queries[name][q])
            bm_top = np.argsort(-node_bm25, kind="stable")[:prefetch]
            bm_top = bm_top[node_bm25[bm_top] > 0]
            cand = np.union1d(dense_top, bm_top)
            add(f"{name} node-bm25 alone (top {prefetch})", doc_ranking(bm_top, node_bm25[bm_top], corpus.node_doc))
            add(f"{name} doc-bm25 alone", list(np.argsort(-doc_bm25, kind="stable")[:10]))
            add(f"{name} alpha1 (union prefetch)", doc_ranking(cand, ms[cand], corpus.node_doc))
            # document BM25 restricted to its top `prefetch` documents (a doc-level text query's list)
            doc_top = np.argsort(-doc_bm25, kind="stable")[:prefetch]
            doc_known = np.zeros(n_docs)
            doc_known[doc_top] = doc_bm25[doc_top]
            for kind in kinds:
                for alpha in alphas:
                    for level, bm25 in (("node", node_bm25[cand]), ("doc", doc_known[corpus.node_doc[cand]])):
                        if kind == "max":
                            ranking = store_ranking(cand, ms[cand], bm25, corpus.query_chunks[q], alpha,
                                                    corpus.node_doc)
                        else:
                            ranking = doc_ranking(cand, fuse(kind, alpha, ms[cand], bm25), corpus.node_doc)
                        add(f"{name} {level} {kind} a={alpha}", ranking)
    out = {}
    for name, rankings in variants.items():
        per_query = evaluate(corpus, rankings)
        out[name] = {qid: [m["ndcg@10"], m["recall@1"]] for qid, m in per_query.items()}
    return out


def decide(corpus: Corpus, depths: Sequence[int], alphas: Sequence[float]) -> dict[str, dict]:
    """The store's own choices at the product's settings: Qdrant's BM25 vectors (average length 256, as the
    store writes them) with word or code tokens, ``max`` fusion, prefetch depth, the document-vector branch."""
    toks = tokenizers()
    names = ["edge-english", "edge-code"]
    node_idx = {name: Bm25Index([toks[name](t) for t in corpus.node_texts], avg_len=256) for name in names}
    queries = {name: [toks[name](q) for q in corpus.data.query_texts] for name in names}
    pair_idx = Bm25Index([toks["edge-code"](t) for t in corpus.pair_texts], avg_len=256)
    doc_vectors = np.zeros((len(corpus.data.doc_texts), corpus.node_vectors.shape[1]), dtype=np.float32)
    ends = np.append(corpus.chunk_starts[1:], len(corpus.chunk_vectors))
    for node, (start, end) in enumerate(zip(corpus.chunk_starts, ends)):
        doc_vectors[corpus.node_doc[node]] += corpus.chunk_vectors[start:end].sum(axis=0)
    doc_vectors /= np.linalg.norm(doc_vectors, axis=1, keepdims=True)
    node_doc_vectors = doc_vectors[corpus.node_doc]
    variants: dict[str, list[list[int]]] = {}

    def add(name: str, ranking: list[int]) -> None:
        variants.setdefault(name, []).append(ranking)

    for q in range(len(corpus.data.query_ids)):
        dense_all = corpus.node_vectors @ corpus.query_vectors[q]
        by_doc = node_doc_vectors @ corpus.query_vectors[q]
        ms = maxsim(corpus, q)
        for depth in depths:
            dense_top = np.argsort(-dense_all, kind="stable")[:depth]
            doc_top = np.argsort(-by_doc, kind="stable")[:depth]
            add(f"dense only, depth {depth}", doc_ranking(dense_top, ms[dense_top], corpus.node_doc))
            for name in names:
                bm25 = node_idx[name].scores(queries[name][q])
                bm_top = np.argsort(-bm25, kind="stable")[:depth]
                bm_top = bm_top[bm25[bm_top] > 0]
                if name == "edge-code":  # BM25 known only for its own top candidates (a plain BM25 search)
                    cand = np.union1d(dense_top, bm_top)
                    known = np.zeros_like(bm25)
                    known[bm_top] = bm25[bm_top]
                    for alpha in alphas:
                        add(f"edge-code bm25-top-only depth {depth} a={alpha}",
                            store_ranking(cand, ms[cand], known[cand], corpus.query_chunks[q], alpha, corpus.node_doc))
                    pair = np.maximum(bm25, pair_idx.scores(queries[name][q]))
                    pair_top = np.argsort(-pair, kind="stable")[:depth]
                    cand = np.union1d(dense_top, pair_top[pair[pair_top] > 0])
                    for alpha in alphas:
                        add(f"edge-code max(node, pair) depth {depth} a={alpha}",
                            store_ranking(cand, ms[cand], pair[cand], corpus.query_chunks[q], alpha, corpus.node_doc))
                for docs in (False, True):
                    cand = np.union1d(dense_top, bm_top)
                    cand = np.union1d(cand, doc_top) if docs else cand
                    tag = f"{name} depth {depth}{' +document' if docs else ''}"
                    for alpha in alphas:
                        add(f"{tag} a={alpha}",
                            store_ranking(cand, ms[cand], bm25[cand], corpus.query_chunks[q], alpha, corpus.node_doc))
    out = {}
    for name, rankings in variants.items():
        per_query = evaluate(corpus, rankings)
        out[name] = {qid: [m["ndcg@10"], m["recall@1"]] for qid, m in per_query.items()}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("sets", nargs="+")
    parser.add_argument("--prefetch", type=int, default=100)
    parser.add_argument("--alphas", default="0.3,0.4,0.5,0.6,0.7,0.8,0.9")
    parser.add_argument("--kinds", default="minmax,max,z")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--decide", action="store_true", help="only the store's choices (depths, document branch)")
    parser.add_argument("--depths", default="50,100,200")
    parser.add_argument("--granularity", type=int, default=None, help="encoder chunk size (default: the encoder's)")
    args = parser.parse_args()
    alphas = [float(a) for a in args.alphas.split(",")]
    results = json.loads(args.out.read_text()) if args.out.exists() else {}
    for name in args.sets:
        start = time.perf_counter()
        settings = {} if args.granularity is None else {"granularity": args.granularity}
        corpus = load_corpus(name, **settings)
        print(f"{name}: {len(corpus.data.doc_texts)} docs, {len(corpus.node_doc)} nodes, "
              f"{len(corpus.data.query_ids)} queries ({time.perf_counter() - start:.0f} s)", flush=True)
        if args.decide:
            depths = [int(d) for d in args.depths.split(",")]
            results[name] = {"prefetch": depths, "variants": decide(corpus, depths, alphas)}
        else:
            results[name] = {"prefetch": args.prefetch, "variants": study(corpus, args.prefetch, alphas,
                                                                           args.kinds.split(","))}
        args.out.write_text(json.dumps(results))
        table = sorted(((np.mean([v[0] for v in per.values()]), np.mean([v[1] for v in per.values()]), variant)
                        for variant, per in results[name]["variants"].items()), reverse=True)
        for ndcg, r1, variant in table[:25]:
            print(f"  {ndcg:.4f} {r1:.3f}  {variant}")
        for ndcg, r1, variant in table:
            if "alone" in variant or "alpha1" in variant:
                print(f"  {ndcg:.4f} {r1:.3f}  {variant}")


if __name__ == "__main__":
    main()
