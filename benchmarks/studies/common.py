"""What the ranking studies share: a dev set cut into the store's nodes, the store's candidates and the store's
fused score, computed in numpy from the eval harness's cached encodings so that each variant can change one term.

The product's own code does the parts it exposes, through its research surface (:mod:`lmk_rag.research`): chunk
MaxSim is its :func:`maxsim_scores`, the nodes' BM25 vectors are its :class:`Bm25Encoder`'s, the fusion and the best
node per document are the store's :func:`plan_search`, :func:`fuse` and :func:`best_hits` (:func:`store_scores`,
:func:`store_ranking`). Two parts run inside Qdrant in the
product and are written here: the IDF of the BM25 vectors (Qdrant's IDF modifier, :class:`Bm25Index`) and the
prefetch of candidates (:func:`store_candidates`); ``LandmarkStore.search_encoded`` returns only the fused hits, not
the candidates or their chunk MaxSim and BM25 scores, which every study varies.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from importlib import import_module
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import scipy.sparse as sp

from lmk_rag.encoder import LandmarkEncoder
from lmk_rag.eval import (
    BeirDataset,
    encode_states_cached,
    load_beir,
    pairs_dataset,
    per_query_metrics,
)
from lmk_rag.research import (
    DEFAULT_ALPHA,
    Bm25Encoder,
    Branch,
    ScoredPointData,
    SearchDefaults,
    SparseVector,
    best_hits,
    fuse,
    group_chunks,
    maxsim_scores,
    plan_search,
    user_cache_dir,
)
from lmk_rag.store import Rerank, SearchOptions

BENCHMARKS = Path(__file__).resolve().parents[1]
if str(BENCHMARKS) not in sys.path:  # benchmarks/: intervals.py and stock_pipelines.py, beside the studies' folder
    sys.path.append(str(BENCHMARKS))

from intervals import paired_difference  # noqa: E402

DATA = Path("/work/shared/data") if Path("/work/shared/data").is_dir() else BENCHMARKS.parents[1] / "shared" / "data"
#: Where each set lives: the shared manual-page sets, the sets this repository builds (the unixfaq and tcl sets are
#: held out: a study may check that a choice made on the dev sets holds there, never make one on it).
SETS = {name: DATA / name for name in ("manpages-longdoc", "manpages-short", "manpages-needle/L2048",
                                       "manpages-needle/L8192", "manpages-needle/L32768")}
SETS.update({name: BENCHMARKS / "data" / name
             for name in ("perldoc-longdoc", "perldoc-ref", "perlfaq-answers", "perlfaq-longdoc", "unixfaq-answers",
                           "unixfaq-longdoc", "tcl-ref", "tcl-needle-L2048")})
#: Candidates per prefetch branch at the product's query settings (k=10).
PREFETCH = 100


class Bm25Model(Protocol):
    """What the studies need of a BM25 model: the store's :class:`~lmk_rag.store.bm25.Bm25Encoder`, or one of
    Qdrant's with other settings (:func:`bm25_model`)."""

    def embed_document(self, text: str) -> Any:
        """The BM25 vector of a node (term weights)."""

    def embed_query(self, text: str) -> Any:
        """The BM25 vector of a query (its distinct terms)."""


def register_stock_pipelines() -> None:
    """Register the stock LlamaIndex pipelines (``llamaindex-*``) in the eval harness: they live in
    ``benchmarks/stock_pipelines.py``, beside the studies' folder, not in the package."""
    import_module("stock_pipelines")


def bm25_model(**config: Any) -> Bm25Model:
    """Qdrant's BM25 model with other settings than the store's (``qdrant_edge.Bm25Config``: ``tokenizer``, ``k``,
    ``b``, ``avg_len``, ``stemmer``, ...), e.g. ``bm25_model(tokenizer="word")``; unset ones are the store's (code
    tokens, English)."""
    import qdrant_edge as qe

    config = {"tokenizer": "code", "language": "english", **config}
    config["tokenizer"] = getattr(qe.TokenizerType, str(config["tokenizer"]).capitalize())
    return qe.Bm25(qe.Bm25Config(**config))


class Bm25Index:
    """BM25 scores of every node: the nodes' term weights (a sparse matrix) times Qdrant's IDF modifier
    (Lucene's IDF, ``log(1 + (n - df + 0.5) / (df + 0.5))``, over the nodes given), as the engine scores a query.

    :param weights: the nodes' BM25 term weights, shape (n_nodes, n_terms).
    :param vocab: each term's column.
    """

    def __init__(self, weights: sp.spmatrix, vocab: dict) -> None:
        self.weights = weights.tocsc()
        df = np.diff(self.weights.indptr)
        self.idf = np.log(1 + (weights.shape[0] - df + 0.5) / (df + 0.5))
        self.vocab = vocab

    @classmethod
    def of_store(cls, texts: Sequence[str], model: Bm25Model | None = None) -> Bm25Index:
        """The nodes' BM25 vectors as the store writes them (:class:`~lmk_rag.store.bm25.Bm25Encoder`: k1=1.2,
        b=0.75, average length 256), or as another BM25 model (:func:`bm25_model`) would."""
        encoder = model or Bm25Encoder()
        vectors = [encoder.embed_document(text) for text in texts]
        return cls.of_rows([dict(zip(vector.indices, vector.values)) for vector in vectors])

    @classmethod
    def of_rows(cls, rows: Sequence[dict]) -> Bm25Index:
        """An index of ready term weights, ``{term: weight}`` per node."""
        vocab: dict = {}
        cells, cols, vals = [], [], []
        for row, terms in enumerate(rows):
            for term, weight in terms.items():
                cells.append(row)
                cols.append(vocab.setdefault(term, len(vocab)))
                vals.append(weight)
        shape = (len(rows), max(1, len(vocab)))
        return cls(sp.csr_matrix((vals, (cells, cols)), shape=shape, dtype=np.float64), vocab)

    def scores(self, query_terms: Iterable) -> np.ndarray:
        """BM25 of every node for a query (each distinct query term once)."""
        cols = [self.vocab[t] for t in dict.fromkeys(query_terms) if t in self.vocab]
        return self.column_scores(np.asarray(cols, dtype=np.int64), np.ones(len(cols)))

    def column_scores(self, cols: np.ndarray, query_weights: np.ndarray) -> np.ndarray:
        """BM25 of every node for the vocabulary columns ``cols``, each term's score times its query weight."""
        if not len(cols):
            return np.zeros(self.weights.shape[0])
        return np.asarray(self.weights[:, cols] @ (self.idf[cols] * query_weights)).ravel()


def query_terms(texts: Sequence[str], model: Bm25Model | None = None) -> list[list[int]]:
    """Each query's BM25 terms, as the store's query vector holds them (its distinct terms), or another model's."""
    encoder = model or Bm25Encoder()
    return [list(encoder.embed_query(text).indices) for text in texts]


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


def training_set(name: str, path: Path) -> BeirDataset:
    """A file of training pairs (``{"query", "positive"}`` per line) as a retrieval set: each query against every
    positive of the file (:func:`lmk_rag.eval.pairset.pairs_dataset`)."""
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return pairs_dataset([(row["query"], row["positive"]) for row in rows], name=name)


def document_chunk_sums(corpus: Corpus, chunk_vectors: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Each document's sum of its chunk vectors, (n_docs, dim), and its number of chunks, (n_docs,).

    :param chunk_vectors: other vectors in the rows of ``corpus.chunk_vectors`` (None: those).
    """
    vectors = corpus.chunk_vectors if chunk_vectors is None else chunk_vectors
    n_docs = len(corpus.data.doc_texts)
    sums = np.zeros((n_docs, vectors.shape[1]), dtype=np.float32)
    ends = np.append(corpus.chunk_starts[1:], len(vectors))
    for node, (start, end) in enumerate(zip(corpus.chunk_starts, ends)):
        sums[corpus.node_doc[node]] += vectors[start:end].sum(axis=0)
    counts = np.bincount(corpus.node_doc, weights=ends - corpus.chunk_starts, minlength=n_docs)
    return sums, counts


def chunk_maxsim(corpus: Corpus, query_chunks: np.ndarray) -> np.ndarray:
    """Chunk MaxSim of every node for one query's chunk vectors, divided by their count (cosine-like)."""
    return maxsim_scores([query_chunks], corpus.chunk_vectors, corpus.chunk_starts, mean=True)[0]


def store_candidates(node_vectors: np.ndarray, vector: np.ndarray, bm25: np.ndarray, depth: int = PREFETCH
                     ) -> np.ndarray:
    """The store's candidates (its prefetch, exact): the ``depth`` best nodes by node vector and the ``depth`` best
    by BM25 with a positive score, as sorted node indices."""
    dense_top = np.argsort(-(node_vectors @ vector), kind="stable")[:depth]
    bm_top = np.argsort(-bm25, kind="stable")[:depth]
    return np.union1d(dense_top, bm_top[bm25[bm_top] > 0])


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
    defaults = SearchDefaults("study", True, alpha, Rerank.CHUNKS, SearchOptions(), lambda: 0.0)
    plan = plan_search(defaults, alpha=alpha, prefetch_limit=len(candidates)).request(
        [0.0], Branch("chunks", query_chunks.tolist()), SparseVector([0], [1.0]), None, [])
    ids = [f"{node:09d}" for node in candidates]  # point ids in node order: ties go by node, as in doc_ranking
    payloads = [{"doc_id": int(node_doc[node])} for node in candidates]
    scorer = [ScoredPointData(i, float(score) * len(query_chunks), p) for i, score, p in zip(ids, dense, payloads)]
    bm25 = [ScoredPointData(i, float(score), p) for i, score, p in zip(ids, lexical, payloads) if score > 0]
    answers = [bm25 if branch.using == "bm25" else scorer for branch in plan.scorers]
    answers += [bm25] if plan.search is not None else []
    fused = {point.id: point.score for point in fuse(plan, answers)}
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
    best = best_hits(points, k, one_per_document=True)
    return [int(node_doc[int(point.id)]) for point in best]


def query_ranking(corpus: Corpus, query: int, bm25: np.ndarray) -> list[int]:
    """The store's document ranking of one query, given every node's BM25 score for it: its candidates
    (:func:`store_candidates`), their chunk MaxSim and :func:`store_ranking` at the store's alpha."""
    vector, chunks = corpus.query_vectors[query], corpus.query_chunks[query]
    nodes = store_candidates(corpus.node_vectors, vector, bm25)
    return store_ranking(nodes, chunk_maxsim(corpus, chunks)[nodes], bm25[nodes], chunks, DEFAULT_ALPHA,
                         corpus.node_doc)


def doc_ranking(nodes: np.ndarray, scores: np.ndarray, node_doc: np.ndarray, k: int = 10) -> list[int]:
    """Documents by their best node among the candidates (the store's ``one_per_document=True``) for scores the store's
    fusion does not compute; ties go by node."""
    order = np.lexsort((nodes, -scores))
    seen: list[int] = []
    for i in order:
        doc = int(node_doc[nodes[i]])
        if doc not in seen:
            seen.append(doc)
            if len(seen) == k:
                break
    return seen


def evaluate(corpus: Corpus, rankings: list[list[int]]) -> dict[str, dict[str, float]]:
    """Per-query metrics of document rankings (the eval harness's pytrec_eval metrics)."""
    data = corpus.data
    run = {qid: [data.doc_ids[d] for d in ranking] for qid, ranking in zip(data.query_ids, rankings)}
    return per_query_metrics(data.qrels, run)


def ndcg_per_query(corpus: Corpus, rankings: dict[str, list[list[int]]]) -> dict[str, dict[str, float]]:
    """Each variant's nDCG@10 by query id, from its document rankings (one per query, in the set's query order)."""
    return {name: {qid: row["ndcg@10"] for qid, row in evaluate(corpus, ranked).items()}
            for name, ranked in rankings.items()}


def print_against_base(per_query: dict[str, dict[str, float]]) -> None:
    """Print each variant's mean and its paired difference to ``base`` [95% interval], one line each.

    :param per_query: ``{variant: {query id: value}}``, ``base`` among the variants.
    """
    base = per_query["base"]
    for variant, by_query in per_query.items():
        values = [by_query[qid] for qid in base]
        diff, low, high = paired_difference(values, list(base.values()))
        print(f"  {np.mean(values):.4f}  {diff:+.4f} [{low:+.4f}, {high:+.4f}]  {variant}", flush=True)


def run_study(description: str, study: Callable[[Corpus], dict[str, dict[str, float]]],
              show: Callable[[dict[str, dict[str, float]]], None] = print_against_base) -> None:
    """A study's command line: ``SETS... --out FILE [--model FOLDER]``; each set's corpus (encoded by the model
    given, else the packaged MiniLM), its per-query values (kept in ``FILE``, beside those of sets run before) and
    their printout.

    :param description: the study's one-line description (``--help``).
    :param study: per-query values of every variant for one set's corpus.
    :param show: prints one set's values (default: each variant against ``base``).
    """
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("sets", nargs="+", choices=sorted(SETS))
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--model", default=None, help="the encoder's model folder (default: the packaged MiniLM)")
    args = parser.parse_args()
    results = json.loads(args.out.read_text()) if args.out.exists() else {}
    for name in args.sets:
        start = time.perf_counter()
        corpus = corpus_of(load_beir(SETS[name]), model_name=args.model)
        print(f"{name}: {len(corpus.data.doc_texts)} docs, {len(corpus.node_doc)} nodes, "
              f"{len(corpus.data.query_ids)} queries ({time.perf_counter() - start:.0f} s)", flush=True)
        per_query = study(corpus)
        results[name] = per_query
        args.out.write_text(json.dumps(results))
        show(per_query)
