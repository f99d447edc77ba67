"""Boundary study: how often a needle spans two encoder windows or two store nodes, and the recall@1 of those cases.

The needle sets hide a passage of a section 2/3/5/7 manual page inside a haystack of section 1/8 pages. This script
finds each needle's char span by 6-word shingles shared with manpages-longdoc (whole pages of sections 2/3/5/7; the
haystack pages are not in it), then reads the chunk, window and node boundaries of the store's own cut (encoder
defaults) and reports, per needle position, how many needles cross a window or node boundary and the recall@1 of a
run file for each case, and the recall@1 of each position's queries against the isolated needle passages (how
hard the queries are in themselves)::

    python benchmarks/studies/boundary_study.py manpages-needle/L2048 --run lmk-rag=L2048.lmk-rag.run --run bm25=...

Diagnostics only (reads query metadata and qrels); no pipeline uses it.
"""

from __future__ import annotations

import argparse
import json
import re
from collections import defaultdict
from pathlib import Path

import numpy as np
from common import DATA

from lmk_rag.encoder import LandmarkEncoder
from lmk_rag.eval import encode_states_cached, load_beir
from lmk_rag.research import records_from_encoding, user_cache_dir

SHINGLE = 6
WORD = re.compile(r"\w+")


def shingles(text: str) -> tuple[list[tuple[int, int]], list[int]]:
    """Word char spans and the hash of the shingle starting at each word."""
    words = [(m.start(), m.end(), m.group().lower()) for m in WORD.finditer(text)]
    hashes = [hash(tuple(w[2] for w in words[i : i + SHINGLE])) for i in range(max(0, len(words) - SHINGLE + 1))]
    return [(s, e) for s, e, _ in words], hashes


def needle_span(text: str, known: set[int]) -> tuple[int, int] | None:
    """The char span of the longest run of words covered by shingles of the section 2/3/5/7 pages."""
    spans, hashes = shingles(text)
    covered = np.zeros(len(spans), dtype=bool)
    for i, h in enumerate(hashes):
        if h in known:
            covered[i : i + SHINGLE] = True
    best, start = (0, 0, 0), None
    gap = 0
    for i, hit in enumerate([*list(covered), False]):
        if hit:
            start = i if start is None else start
            gap = 0
        elif start is not None:
            gap += 1
            if gap > 8 or i == len(covered):  # tolerate a few perturbed words inside the needle
                end = i - gap + 1
                if end - start > best[0] - best[1] or best == (0, 0, 0):
                    best = (end, start, end)
                start, gap = None, 0
    if best[2] - best[1] < 20:
        return None
    return spans[best[1]][0], spans[best[2] - 1][1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("set")
    parser.add_argument("--run", action="append", default=[], help="NAME=TREC run file")
    parser.add_argument("--node-tokens", type=int, default=256)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    known: set[int] = set()
    for text in load_beir(DATA / "manpages-longdoc").doc_texts:
        known.update(shingles(text)[1])
    data = load_beir(DATA / args.set)
    encoder = LandmarkEncoder()
    states = encode_states_cached(encoder, data.doc_texts, user_cache_dir("eval")).states
    encoded = encoder.pool(states)
    runs = {}
    for item in args.run:
        name, path = item.split("=", 1)
        top: dict[str, str] = {}
        for line in Path(path).read_text().splitlines():
            qid, _, doc, rank, *_ = line.split()
            if rank == "1":
                top[qid] = doc
        runs[name] = top
    rows = []
    doc_index = {d: i for i, d in enumerate(data.doc_ids)}
    for qid, meta in zip(data.query_ids, data.query_metadata):
        doc = next(iter(data.qrels[qid]))
        i = doc_index[doc]
        text = data.doc_texts[i]
        span = needle_span(text, known)
        if span is None:
            rows.append({"qid": qid, "position": meta.get("position"), "found": False})
            continue
        enc = encoded[i]
        chunk_of = [c for c, (s, e) in enumerate(enc.spans) if s < span[1] and e > span[0]]
        windows = _window_of_chunks(states[i])
        nodes = records_from_encoding(doc, text, enc, args.node_tokens)
        node_hits = [n.node_id for n in nodes if n.span[0] < span[1] and n.span[1] > span[0]]
        rows.append({
            "qid": qid,
            "position": meta.get("position"),
            "found": True,
            "needle_chars": span[1] - span[0],
            "span": list(span),
            "chunks": len(chunk_of),
            "windows": len({windows[c] for c in chunk_of}),
            "nodes": len(node_hits),
            **{f"r1:{name}": float(top.get(qid) in data.qrels[qid]) for name, top in runs.items()},
        })
    report(rows, list(runs))
    isolated(data, rows)
    if args.out:
        args.out.write_text(json.dumps(rows))


def _window_of_chunks(state) -> list[int]:
    """The window index of each chunk: a window's first chunk also owns the window's CLS state."""
    out, window = [], -1
    for size, tokens in zip(state.chunk_sizes, state.token_counts):
        window += round(size) == tokens + 2
        out.append(window)
    return out


def isolated(data, rows: list[dict]) -> None:
    """Recall@1 per position when the 200 needle passages alone are the corpus (no haystack, no boundary):
    how hard each position's queries are in themselves (mean-pooled MiniLM and bm25s)."""
    import bm25s

    found = {r["qid"]: r for r in rows if r["found"]}
    doc_index = {d: i for i, d in enumerate(data.doc_ids)}
    qids = [q for q in data.query_ids if q in found]
    passages = []
    for qid in qids:
        start, end = found[qid]["span"]
        passages.append(data.doc_texts[doc_index[next(iter(data.qrels[qid]))]][start:end])
    queries = [data.query_texts[data.query_ids.index(q)] for q in qids]
    encoder = LandmarkEncoder(granularity=None)
    docs = np.array([e.vector for e in encoder.encode_documents(passages)])
    dense = (np.array([e.vector for e in encoder.encode_queries(queries)]) @ docs.T).argmax(axis=1)
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(passages, stopwords="en", show_progress=False), show_progress=False)
    tokens = bm25s.tokenize(queries, stopwords="en", return_ids=False, show_progress=False)
    lexical = np.array([retriever.get_scores(t).argmax() for t in tokens])
    positions = np.array([found[q]["position"] for q in qids])
    print("isolated needles (the passages alone as corpus): R@1 by position, mean-pooled MiniLM / bm25s")
    for position in sorted(set(positions)):
        mask = positions == position
        hits = np.arange(len(qids))[mask]
        same_dense, same_lexical = np.mean(dense[mask] == hits), np.mean(lexical[mask] == hits)
        print(f"{position:>8}  {mask.sum():>3}  {same_dense:.2f} / {same_lexical:.2f}")


def report(rows: list[dict], runs: list[str]) -> None:
    """Per position: found needles, share crossing windows / nodes, recall@1 within and across."""
    by = defaultdict(list)
    for row in rows:
        by[row["position"]].append(row)
    print(f"found {sum(r['found'] for r in rows)} of {len(rows)} needles")
    header = "position  n  chars  x-window  x-node  " + "  ".join(
        f"{name}: R@1 all / one node / two nodes / one window / two windows" for name in runs)
    print(header)
    for position in sorted(by):
        found = [r for r in by[position] if r["found"]]
        one = [r for r in found if r["nodes"] == 1]
        two = [r for r in found if r["nodes"] > 1]
        one_w = [r for r in found if r["windows"] == 1]
        two_w = [r for r in found if r["windows"] > 1]
        cells = []
        for name in runs:
            def r1(group: list[dict], name: str = name) -> str:
                return f"{np.mean([r[f'r1:{name}'] for r in group]):.2f}" if group else "-"
            cells.append(f"{r1(found)} / {r1(one)} ({len(one)}) / {r1(two)} ({len(two)})"
                         f" / {r1(one_w)} ({len(one_w)}) / {r1(two_w)} ({len(two_w)})")
        print(f"{position:>8}  {len(found):>2}  {np.mean([r['needle_chars'] for r in found]):5.0f}  "
              f"{np.mean([r['windows'] > 1 for r in found]):8.2f}  {np.mean([r['nodes'] > 1 for r in found]):6.2f}  "
              + "  ".join(cells))


if __name__ == "__main__":
    main()
