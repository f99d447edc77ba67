"""Score study (issue 24 item 4): a third term beside the store's fused node score, or a learned combiner of the
per-node scores, on whole dev sets, from the eval harness's cached encodings.

Per query, the store's candidates (the top 100 nodes by node vector and the top 100 by BM25: Qdrant's BM25 with
code tokens at average length 256, as the store writes it) get the store's fused score, from the store's own code
(``common.store_scores``). The variants add ``w * term`` to it:

- ``doc``: the cosine of the query vector and the document vector (the normalised mean of the document's chunk
  vectors: the design's document-level LMK mean);
- ``other``: the fused score of the document's best other candidate node;
- ``static``: the node's static token MaxSim (the shipped model2vec model and ConvMixer, a document's tokens mixed
  in one pass and assigned to nodes by their characters, each node's distinct vectors; divided by the query's
  token count);

``dense-doc`` puts the document cosine inside the dense side instead (``alpha * (MaxSim + w * doc) / (1 + w) +
(1 - alpha) * BM25``, so BM25 keeps its share), optionally weighted per document by its coherence (the length of
the mean of its chunk vectors) or per query by ``query-gate`` (the best candidate's document cosine over its chunk
MaxSim: high when a query describes a whole page, low when it matches one passage);
or rank by ``combiner``, a logistic regression (scikit-learn) of each candidate's (chunk MaxSim, BM25 over the best
BM25, document cosine, static MaxSim, best other node) fitted on the training pairs only (manpages-train and
perldoc-train, each query against every positive of its split); or search again after pseudo-relevance feedback
from the ``m`` best fused nodes: ``prf-dense`` moves the query's vectors towards those nodes' mean vector (Rocchio,
weight ``b``), ``prf-bm25`` adds their ten best other terms (summed BM25 weight x IDF) to the BM25 query at weight
``g`` (RM3-like). Documents rank by their best node. ``--projection-mix DOCS QUERIES`` re-mixes the shipped
projection's fit with the identity (0: none, 0.5: the shipped projection, 1: the fit itself) for the documents and
the queries apart. Prints nDCG@10 per variant with the paired difference to the product (``base``) and writes
per-query values::

    cd benchmarks/studies && python score_study.py perldoc-longdoc manpages-short --out results/score_study.json

The learned combiner needs scikit-learn (``benchmarks/studies/requirements.txt``).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

import common
import numpy as np

from lmk_rag.encoder import LandmarkEncoder
from lmk_rag.eval import BeirDataset, load_beir
from lmk_rag.research import DEFAULT_ALPHA, SHIPPED_PROJECTION_DIR, LinearProjection, l2_normalize
from lmk_rag.static import StaticTokenEncoder, maxsim_matrix, tokens_in_chunks

if TYPE_CHECKING:
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

TRAIN = {"manpages-train": common.DATA / "manpages-train" / "pairs.jsonl",
         "perldoc-train": common.BENCHMARKS / "data" / "perldoc-train" / "pairs.jsonl"}
#: The weights tried: of the document cosine, and of the other two terms.
DOC_WEIGHTS = (0.1, 0.2, 0.3, 0.5, 0.7, 1.0)
WEIGHTS = (0.05, 0.1, 0.2)
FEATURES = ("chunk MaxSim", "BM25 / best", "doc cosine", "static MaxSim", "best other node", "doc coherence")
#: Pseudo-relevance feedback: (nodes fed back, weight) of the dense and of the BM25 variant; terms added to BM25.
PRF_DENSE = ((1, 0.3), (1, 0.6), (3, 0.3), (3, 0.6))
PRF_BM25 = ((3, 0.1), (3, 0.3))
PRF_TERMS = 10


class Scored:
    """A set's corpus with what every query's candidates need: BM25, document vectors, static tokens."""

    def __init__(self, corpus: common.Corpus, static: StaticTokenEncoder) -> None:
        self.corpus = corpus
        self.bm25 = common.Bm25Index.of_store(corpus.node_texts)
        self.bm25_rows = self.bm25.weights.tocsr()
        self.query_terms = common.query_terms(corpus.data.query_texts)
        doc_vectors, counts = common.document_chunk_sums(corpus)
        norms = np.linalg.norm(doc_vectors, axis=1)
        self.doc_vectors = doc_vectors / norms[:, None]
        #: How much a document's chunks agree: the length of their mean vector (1 = all alike; a haystack of
        #: unrelated pages is low).
        self.coherence = norms / np.maximum(counts, 1)
        self.static_tokens = self._node_tokens(static)
        self.static_queries = [static.encode_query_tokens(q) for q in corpus.data.query_texts]

    def _node_tokens(self, static: StaticTokenEncoder) -> list[np.ndarray]:
        """Each node's distinct static token vectors (float16), a document's tokens mixed in one pass."""
        corpus = self.corpus
        by_doc: dict[int, list[int]] = {}
        for node, doc in enumerate(corpus.node_doc):
            by_doc.setdefault(int(doc), []).append(node)
        tokens: list[np.ndarray] = [np.zeros((0, static.dim), np.float16)] * len(corpus.node_doc)
        for doc, nodes in by_doc.items():
            encoded = static.tokens(corpus.data.doc_texts[doc])
            owner = tokens_in_chunks(encoded.offsets, [corpus.node_spans[n] for n in nodes])
            for i, node in enumerate(nodes):
                rows = encoded.vectors[owner == i]
                if len(rows):
                    rows = np.unique(rows, axis=0)
                tokens[node] = rows.astype(np.float16)
        return tokens

    def static_maxsim(self, query: int, candidates: np.ndarray) -> np.ndarray:
        """The candidates' static token MaxSim, divided by the query's token count."""
        q = self.static_queries[query]
        if len(q) == 0:
            return np.zeros(len(candidates))
        rows = [self.static_tokens[node].astype(np.float32) for node in candidates]
        return maxsim_matrix([q], rows)[0] / len(q)

    def search(self, vector: np.ndarray, chunks: np.ndarray, bm25: np.ndarray,
               alpha: float = DEFAULT_ALPHA) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The store's candidates for a query's vector, chunk vectors and BM25 scores (of every node): the
        candidates, their chunk MaxSim and their fused scores."""
        corpus = self.corpus
        nodes = common.store_candidates(corpus.node_vectors, vector, bm25)
        chunk = common.chunk_maxsim(corpus, chunks)[nodes]
        return nodes, chunk, common.store_scores(nodes, chunk, bm25[nodes], chunks, alpha, corpus.node_doc)

    def features(self, query: int, alpha: float = DEFAULT_ALPHA) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The store's candidates for a query, their fused scores and their features (:data:`FEATURES`)."""
        corpus = self.corpus
        qv = corpus.query_vectors[query]
        bm25 = self.bm25.scores(self.query_terms[query])
        candidates, chunk, fused = self.search(qv, corpus.query_chunks[query], bm25, alpha)
        lexical = bm25[candidates]
        docs = corpus.node_doc[candidates]
        doc_cos = self.doc_vectors[docs] @ qv
        other = np.zeros(len(candidates))
        for doc in np.unique(docs):
            rows = np.flatnonzero(docs == doc)
            if len(rows) > 1:
                order = rows[np.argsort(-fused[rows], kind="stable")]
                other[rows] = fused[order[0]]
                other[order[0]] = fused[order[1]]
        top = lexical.max() if lexical.max() > 0 else 1.0
        features = np.column_stack([chunk, lexical / top, doc_cos, self.static_maxsim(query, candidates), other,
                                    self.coherence[docs]])
        return candidates, fused, features

    def feedback(self, query: int, candidates: np.ndarray,
                 fused: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """The search again after pseudo-relevance feedback from the best fused nodes: each variant's candidates and
        fused scores."""
        corpus = self.corpus
        best = candidates[np.argsort(-fused, kind="stable")]
        qv, chunks = corpus.query_vectors[query], corpus.query_chunks[query]
        bm25 = self.bm25.scores(self.query_terms[query])
        out = {}
        for m, b in PRF_DENSE:
            centre = l2_normalize(corpus.node_vectors[best[:m]].mean(axis=0))
            out[f"prf-dense m={m} b={b}"] = self.search(l2_normalize(qv + b * centre),
                                                        l2_normalize(chunks + b * centre), bm25)[::2]
        for m, g in PRF_BM25:
            mass = np.asarray(self.bm25_rows[best[:m]].sum(axis=0)).ravel() * self.bm25.idf
            mass[[self.bm25.vocab[t] for t in self.query_terms[query] if t in self.bm25.vocab]] = 0
            terms = np.argsort(-mass, kind="stable")[:PRF_TERMS]
            terms = terms[mass[terms] > 0]
            extra = self.bm25.column_scores(terms, mass[terms] / mass[terms].max() if len(terms) else mass[terms])
            out[f"prf-bm25 m={m} g={g}"] = self.search(qv, chunks, bm25 + g * extra)[::2]
        return out


def load(name: str, data: BeirDataset, static: StaticTokenEncoder, query_settings: dict[str, object] | None = None,
         **encoder_settings: object) -> Scored:
    """Encode (or load from the eval cache) a set and prepare its scores (``query_settings``: the queries' encoder
    settings where they differ from the documents')."""
    start = time.perf_counter()
    scored = Scored(common.corpus_of(data, **encoder_settings), static)
    corpus = scored.corpus
    if query_settings is not None:
        queries = LandmarkEncoder(**query_settings).encode_queries(list(data.query_texts))
        corpus.query_vectors = np.asarray([q.vector for q in queries], dtype=np.float32)
        corpus.query_chunks = [np.asarray(q.chunk_vectors, dtype=np.float32) for q in queries]
    print(f"{name}: {len(corpus.data.doc_texts)} docs, {len(corpus.node_doc)} nodes, "
          f"{len(corpus.data.query_ids)} queries ({time.perf_counter() - start:.0f} s)", flush=True)
    return scored


def remixed_projection(mix: float, folder: Path) -> Path | None:
    """The shipped projection's fit mixed with the identity at ``mix`` (``I + mix * A``), written under ``folder``;
    None (no projection) at 0."""
    if mix == 0:
        return None
    shipped = LinearProjection.load(SHIPPED_PROJECTION_DIR)
    identity = np.eye(shipped.dim, dtype=np.float32)
    fit = (shipped.weight - identity) / shipped.config["training"]["mix"]
    config = {**shipped.config, "training": {**shipped.config["training"], "mix": mix}}
    return LinearProjection(identity + mix * fit, config).save(folder / f"mix-{mix}")


#: The combiners fitted: all features, and the three whose meaning does not depend on a document's length (a
#: training positive is one or two nodes, so its document cosine and other node say little about long documents).
COMBINERS = {"combiner (all 5)": (0, 1, 2, 3, 4), "combiner (chunk, BM25, static)": (0, 1, 3)}

Combiner = tuple[tuple[int, ...], "StandardScaler", "LogisticRegression"]


def fit_combiner(train: list[Scored], columns: tuple[int, ...]) -> Combiner:
    """A logistic regression of a candidate node's features (``columns`` of :data:`FEATURES`) -> its document is
    relevant, on the training pairs."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    rows, labels = [], []
    for scored in train:
        corpus = scored.corpus
        doc_index = {doc_id: i for i, doc_id in enumerate(corpus.data.doc_ids)}
        for q, qid in enumerate(corpus.data.query_ids):
            candidates, _, features = scored.features(q)
            relevant = {doc_index[d] for d, rel in corpus.data.qrels[qid].items() if rel > 0}
            rows.append(features)
            labels.append(np.isin(corpus.node_doc[candidates], list(relevant)))
    x, y = np.concatenate(rows)[:, columns], np.concatenate(labels)
    scaler = StandardScaler().fit(x)
    model = LogisticRegression(C=1.0, class_weight="balanced", max_iter=1000).fit(scaler.transform(x), y)
    print(f"combiner: {len(y)} candidates, {int(y.sum())} relevant; weights (standardised) "
          + ", ".join(f"{FEATURES[c]} {w:+.2f}" for c, w in zip(columns, model.coef_[0])), flush=True)
    return columns, scaler, model


def variants(scored: Scored, combiners: dict[str, Combiner]) -> dict[str, dict[str, float]]:
    """Every variant's per-query nDCG@10, by query id."""
    corpus = scored.corpus
    rankings: dict[str, list[list[int]]] = {}
    ratios: list[float] = []
    for q in range(len(corpus.data.query_ids)):
        candidates, fused, features = scored.features(q)
        scores = {"base": fused}
        for w in DOC_WEIGHTS:
            scores[f"doc w={w}"] = fused + w * features[:, 2]
        chunk, lexical, doc_cos, coherence = features[:, 0], features[:, 1], features[:, 2], features[:, 5]
        for w in (0.5, 1.0):  # the document cosine inside the dense side: BM25 keeps its share (1 - alpha)
            scores[f"dense-doc w={w}"] = DEFAULT_ALPHA * (chunk + w * doc_cos) / (1 + w) + (1 - DEFAULT_ALPHA) * lexical
            for low, high in ((0.5, 0.7), (0.6, 0.8)):  # ... weighted by how coherent the document is
                gate = np.clip((coherence - low) / (high - low), 0, 1)
                scores[f"dense-doc w={w} gate {low}-{high}"] = (
                    DEFAULT_ALPHA * (chunk + w * gate * doc_cos) / (1 + w * gate) + (1 - DEFAULT_ALPHA) * lexical)
        top = int(np.argmax(fused))
        ratio = doc_cos[top] / max(chunk[top], 1e-6)  # the best candidate's document against the node itself
        ratios.append(float(ratio))
        for low, high in ((0.7, 0.85), (0.8, 0.95)):  # a query about a whole document: its page matches as a whole
            gate = float(np.clip((ratio - low) / (high - low), 0, 1))
            scores[f"dense-doc w=0.5 query-gate {low}-{high}"] = (
                DEFAULT_ALPHA * (chunk + 0.5 * gate * doc_cos) / (1 + 0.5 * gate) + (1 - DEFAULT_ALPHA) * lexical)
        for w in WEIGHTS:
            scores[f"other w={w}"] = fused + w * features[:, 4]
            scores[f"static w={w}"] = fused + w * features[:, 3]
        for name, (columns, scaler, model) in combiners.items():
            scores[name] = model.decision_function(scaler.transform(features[:, columns]))
        searches = {name: (candidates, values) for name, values in scores.items()}
        searches.update(scored.feedback(q, candidates, fused))
        for name, (nodes, values) in searches.items():
            rankings.setdefault(name, []).append(common.doc_ranking(nodes, np.round(values, 6), corpus.node_doc))
    print("  document-to-node ratio of the best candidate, percentiles 10/25/50/75/90:",
          np.percentile(ratios, [10, 25, 50, 75, 90]).round(3), flush=True)
    return common.ndcg_per_query(corpus, rankings)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("sets", nargs="+", choices=sorted(common.SETS))
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--no-combiner", action="store_true", help="skip the learned combiner (no training sets)")
    parser.add_argument("--max-length", type=int, default=None, help="the encoder's window (default: the encoder's)")
    parser.add_argument("--model", default=None, help="the encoder's model folder (default: the packaged MiniLM)")
    parser.add_argument("--projection-mix", type=float, nargs=2, metavar=("DOCS", "QUERIES"),
                        help="the shipped projection's fit re-mixed for documents and queries (0.5: as shipped)")
    args = parser.parse_args()
    settings: dict[str, object] = {} if args.max_length is None else {"max_length": args.max_length}
    if args.model is not None:
        settings["model_name"] = args.model
    query_settings = None
    if args.projection_mix:
        folder = Path(tempfile.mkdtemp(prefix="score_study_"))
        docs_mix, queries_mix = args.projection_mix
        query_settings = {**settings, "projection": remixed_projection(queries_mix, folder)}
        settings["projection"] = remixed_projection(docs_mix, folder)
    static = StaticTokenEncoder(mixer="shipped")
    combiners: dict[str, Combiner] = {}
    if not args.no_combiner:
        train = [load(name, common.training_set(name, path), static, **settings) for name, path in TRAIN.items()]
        combiners = {name: fit_combiner(train, columns) for name, columns in COMBINERS.items()}
    results = json.loads(args.out.read_text()) if args.out.exists() else {}
    for name in args.sets:
        scored = load(name, load_beir(common.SETS[name]), static, query_settings, **settings)
        per_query = variants(scored, combiners)
        results[name] = per_query
        args.out.write_text(json.dumps(results))
        common.print_against_base(per_query)


if __name__ == "__main__":
    main()
