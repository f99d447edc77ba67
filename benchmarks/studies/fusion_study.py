"""Fusion study: which BM25 (tokenisation, node or document level) and which score fusion to build into the store.

The store's search at the product's query settings (k=10: 100 candidates per prefetch branch), on whole dev sets,
from the eval harness's cached encodings (the states ``lmk-rag eval`` caches; a cold set is encoded first). Per
query: dense prefetch by node vector and BM25 prefetch (top ``--prefetch`` nodes each), chunk MaxSim of every
candidate (numpy, for the engine) and BM25 (numpy, over each tokenisation compared); the store's own fusion
(``max``) runs the store's code (``lmk_rag.store.query``: the plan, ``fuse``, the best node per document), the
alternatives (``minmax``, ``z``) are computed here; documents ranked by their best node. Prints one nDCG@10 / R@1
row per variant and writes the per-query nDCG@10 to a JSON (for paired bootstrap intervals)::

    python benchmarks/studies/fusion_study.py manpages-needle/L2048 manpages-short --out fusion_study.json

The MaxSim and BM25 scores stand in for the engine's (``common.py``); tests/report/test_studies.py checks that
``common.store_ranking`` hands them to the store's fusion as the engine's answers. Variants the store's BM25 model
does not offer (other tokenisations, the true average length) count terms here (:func:`tokenizers`).
"""

from __future__ import annotations

import argparse
import json
import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import common
import numpy as np

from lmk_rag.eval import load_beir

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


def counts_index(counts: Sequence[dict], avg_len: float | None = None, k1: float = 1.2, b: float = 0.75
                 ) -> common.Bm25Index:
    """BM25 of raw term counts at the store's k1 and b and a chosen average length (None: the true one), for the
    variants the store's BM25 model does not offer (other tokenisations, the true average length)."""
    lengths = np.array([sum(terms.values()) for terms in counts], dtype=np.float64)
    average = avg_len or max(1.0, lengths.mean())
    norms = k1 * (1 - b + b * lengths / average)
    return common.Bm25Index.of_rows([{term: n * (k1 + 1) / (n + norm) for term, n in terms.items()}
                              for terms, norm in zip(counts, norms)])


# ---------------------------------------------------------------------------------------------- fusion


def minmax(x: np.ndarray) -> np.ndarray:
    """Scale to [0, 1] (all equal: zeros)."""
    span = x.max() - x.min()
    return (x - x.min()) / span if span > 0 else np.zeros_like(x)


def fuse(kind: str, alpha: float, dense: np.ndarray, bm25: np.ndarray) -> np.ndarray:
    """Fused candidate scores of the alternatives the store does not use (``alpha`` weighs the dense side); the
    store's own fusion (``max``: the cosine-like dense side as it is, BM25 over the best candidate's) is
    ``common.store_ranking``, which calls the store's code."""
    if kind == "minmax":
        return alpha * minmax(dense) + (1 - alpha) * minmax(bm25)
    if kind == "z":  # DBSF-like: (x - mean) / 3 sd
        def z(x: np.ndarray) -> np.ndarray:
            sd = x.std()
            return (x - x.mean()) / (3 * sd) if sd > 0 else np.zeros_like(x)

        return alpha * z(dense) + (1 - alpha) * z(bm25)
    raise ValueError(kind)


def study(corpus: common.Corpus, prefetch: int, alphas: Sequence[float], kinds: Sequence[str]) -> dict[str, dict]:
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
        node_idx[name] = counts_index(node_counts)
        doc_idx[name] = counts_index([tokenize(t) for t in corpus.data.doc_texts])
        if name in contexts_for:
            node_idx[name + " avg256"] = counts_index(node_counts, avg_len=256)
            doc_idx[name + " avg256"] = doc_idx[name]
            queries[name + " avg256"] = queries[name]
            for c, texts in corpus.context_texts.items():
                node_idx[f"{name} ctx{c}"] = counts_index([tokenize(t) for t in texts])
                doc_idx[f"{name} ctx{c}"] = doc_idx[name]
                queries[f"{name} ctx{c}"] = queries[name]
        print(f"  {name}: indexed in {time.perf_counter() - start:.0f} s", flush=True)
    variants: dict[str, list[list[int]]] = {}

    def add(name: str, ranking: list[int]) -> None:
        variants.setdefault(name, []).append(ranking)

    for q in range(len(corpus.data.query_ids)):
        dense_all = corpus.node_vectors @ corpus.query_vectors[q]
        dense_top = np.argsort(-dense_all, kind="stable")[:prefetch]
        ms = common.chunk_maxsim(corpus, corpus.query_chunks[q])
        add("alpha1 (dense prefetch only)", common.doc_ranking(dense_top, ms[dense_top], corpus.node_doc))
        for name in node_idx:
            node_bm25 = node_idx[name].scores(queries[name][q])
            doc_bm25 = doc_idx[name].scores(queries[name][q])
            bm_top = np.argsort(-node_bm25, kind="stable")[:prefetch]
            bm_top = bm_top[node_bm25[bm_top] > 0]
            cand = np.union1d(dense_top, bm_top)
            add(f"{name} node-bm25 alone (top {prefetch})",
                common.doc_ranking(bm_top, node_bm25[bm_top], corpus.node_doc))
            add(f"{name} doc-bm25 alone", list(np.argsort(-doc_bm25, kind="stable")[:10]))
            add(f"{name} alpha1 (union prefetch)", common.doc_ranking(cand, ms[cand], corpus.node_doc))
            # document BM25 restricted to its top `prefetch` documents (a doc-level text query's list)
            doc_top = np.argsort(-doc_bm25, kind="stable")[:prefetch]
            doc_known = np.zeros(n_docs)
            doc_known[doc_top] = doc_bm25[doc_top]
            for kind in kinds:
                for alpha in alphas:
                    for level, bm25 in (("node", node_bm25[cand]), ("doc", doc_known[corpus.node_doc[cand]])):
                        if kind == "max":
                            ranking = common.store_ranking(cand, ms[cand], bm25, corpus.query_chunks[q], alpha,
                                                    corpus.node_doc)
                        else:
                            ranking = common.doc_ranking(cand, fuse(kind, alpha, ms[cand], bm25), corpus.node_doc)
                        add(f"{name} {level} {kind} a={alpha}", ranking)
    out = {}
    for name, rankings in variants.items():
        per_query = common.evaluate(corpus, rankings)
        out[name] = {qid: [m["ndcg@10"], m["recall@1"]] for qid, m in per_query.items()}
    return out


def decide(corpus: common.Corpus, depths: Sequence[int], alphas: Sequence[float]) -> dict[str, dict]:
    """The store's own choices at the product's settings: Qdrant's BM25 vectors (average length 256, as the
    store writes them) with word or code tokens, ``max`` fusion, prefetch depth, the document-vector branch."""
    models = {"edge-english": common.bm25_model(tokenizer="word"), "edge-code": None}  # None: the store's model
    names = list(models)
    node_idx = {name: common.Bm25Index.of_store(corpus.node_texts, models[name]) for name in names}
    queries = {name: common.query_terms(corpus.data.query_texts, models[name]) for name in names}
    pair_idx = common.Bm25Index.of_store(corpus.pair_texts)
    doc_vectors, _ = common.document_chunk_sums(corpus)
    doc_vectors /= np.linalg.norm(doc_vectors, axis=1, keepdims=True)
    node_doc_vectors = doc_vectors[corpus.node_doc]
    variants: dict[str, list[list[int]]] = {}

    def add(name: str, ranking: list[int]) -> None:
        variants.setdefault(name, []).append(ranking)

    for q in range(len(corpus.data.query_ids)):
        dense_all = corpus.node_vectors @ corpus.query_vectors[q]
        by_doc = node_doc_vectors @ corpus.query_vectors[q]
        ms = common.chunk_maxsim(corpus, corpus.query_chunks[q])
        for depth in depths:
            dense_top = np.argsort(-dense_all, kind="stable")[:depth]
            doc_top = np.argsort(-by_doc, kind="stable")[:depth]
            add(f"dense only, depth {depth}", common.doc_ranking(dense_top, ms[dense_top], corpus.node_doc))
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
                            common.store_ranking(cand, ms[cand], known[cand], corpus.query_chunks[q], alpha,
                                                 corpus.node_doc))
                    pair = np.maximum(bm25, pair_idx.scores(queries[name][q]))
                    pair_top = np.argsort(-pair, kind="stable")[:depth]
                    cand = np.union1d(dense_top, pair_top[pair[pair_top] > 0])
                    for alpha in alphas:
                        add(f"edge-code max(node, pair) depth {depth} a={alpha}",
                            common.store_ranking(cand, ms[cand], pair[cand], corpus.query_chunks[q], alpha,
                                                 corpus.node_doc))
                for docs in (False, True):
                    cand = np.union1d(dense_top, bm_top)
                    cand = np.union1d(cand, doc_top) if docs else cand
                    tag = f"{name} depth {depth}{' +document' if docs else ''}"
                    for alpha in alphas:
                        add(f"{tag} a={alpha}",
                            common.store_ranking(cand, ms[cand], bm25[cand], corpus.query_chunks[q], alpha,
                                                 corpus.node_doc))
    out = {}
    for name, rankings in variants.items():
        per_query = common.evaluate(corpus, rankings)
        out[name] = {qid: [m["ndcg@10"], m["recall@1"]] for qid, m in per_query.items()}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("sets", nargs="+", choices=sorted(common.SETS))
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
        corpus = common.corpus_of(load_beir(common.SETS[name]), **settings)
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
