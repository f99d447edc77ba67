"""Evidence benchmark: how much of the needle passage reaches the LLM, at a token budget per hit.

On the needle sets (``manpages-needle/L*``, and ``tcl-needle-L2048`` of benchmarks/data, another domain's: each query's
answer is one passage, ``needles.jsonl`` gives its span, read here as evidence of where the answer is, never for
ranking), each pipeline retrieves the top 1 or 3 and hands the
LLM a context of ``budget`` tokens per hit (tiktoken ``cl100k_base``, LlamaIndex's default tokenizer). A query
counts when at least half of the needle passage's characters are inside that context.

- ``lmk-rag evidence``: the product (``LandmarkStore`` defaults), each hit cut by ``EvidenceContext(budget,
  vector_store=...)`` to its evidence and the words around it, grown toward the neighbouring chunks the query scores
  higher (into the adjacent node of the document where the cut reaches its node's edge), then
  ``MaxContextTokens(budget * top)`` (a hit with weak evidence stays whole and the cap cuts it);
- ``lmk-rag evidence, even``: the same without the hits' chunk scores, so the cut grows a word after, then a word
  before, in turn (the context before chunk scores, as a LlamaIndex retriever's hits of another store would be);
- ``lmk-rag nodes``: the same hits, each node's first ``budget`` tokens (what a prompt gets when each retrieved node
  is truncated to an equal share, as LlamaIndex's ``PromptHelper`` does);
- ``stock-1024`` / ``stock-250``: the report's stock LlamaIndex retrieval (:mod:`stock_retrieval`), each retrieved
  node's first ``budget`` tokens (its top nodes, so several may come from one document).

    python benchmarks/evidence_bench.py --sets L512 L2048 L8192 tcl-needle-L2048
"""

from __future__ import annotations

import argparse
import datetime as dt
import gzip
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import tiktoken
from llama_index.core.utils import get_tokenizer

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "manpages-needle"
OWN_DATA = Path(__file__).resolve().parent / "data"
OUT = Path(__file__).resolve().parent / "results" / "evidence_bench.md"
BUDGETS = (128, 256, 512)
TOPS = (1, 3)


def set_folder(name: str) -> Path:
    """A needle set's folder: ``manpages-needle/<name>`` of the shared data, else ``benchmarks/data/<name>``."""
    return DATA / name if (DATA / name).is_dir() else OWN_DATA / name


def load(folder: Path) -> tuple[list[str], list[str], list[tuple[str, str]], dict[str, tuple[int, int]]]:
    """A needle set: doc ids and texts, (query text, answer doc id) pairs, and each answer doc's needle span."""
    ids, texts = [], []
    with gzip.open(folder / "corpus.jsonl.gz", "rt", encoding="utf-8") as lines:
        for line in lines:
            row = json.loads(line)
            ids.append(row["_id"])
            texts.append(row["text"])  # the needle spans are in "text" (the titles are empty)
    queries = {row["_id"]: row["text"] for row in map(json.loads, (folder / "queries.jsonl").open())}
    answers = [line.rstrip("\n").split("\t") for line in (folder / "qrels" / "test.tsv").open()][1:]
    needle_rows = map(json.loads, (folder / "needles.jsonl").open())
    needles = {row["corpus-id"]: (row["start"], row["end"]) for row in needle_rows}
    pairs = [(queries[query], doc) for query, doc, _ in answers if doc in needles]
    return ids, texts, pairs, needles


def covered(pieces: list[tuple[str, int, int]], doc: str, needle: tuple[int, int]) -> bool:
    """Whether the context pieces ``(doc id, start, end)`` hold at least half of the needle's characters."""
    inside = np.zeros(needle[1] - needle[0], dtype=bool)
    for piece_doc, start, end in pieces:
        if piece_doc == doc:
            inside[max(start, needle[0]) - needle[0] : max(min(end, needle[1]), needle[0]) - needle[0]] = True
    return bool(inside.sum() * 2 >= len(inside))


get_tokenizer()  # points tiktoken at the encoding llama-index-core bundles (offline)
ENCODING = tiktoken.get_encoding("cl100k_base")  # LlamaIndex's default tokenizer


def count(text: str) -> list[int]:
    """The tokens of a text, as the LLM's budget counts them."""
    return ENCODING.encode(text)


def first_tokens(text: str, budget: int) -> int:
    """How many characters of ``text`` its first ``budget`` tokens cover."""
    tokens = count(text)
    return len(text) if len(tokens) <= budget else len(ENCODING.decode(tokens[:budget]))


def product_contexts(vector_store: Any, budget: int, top: int, query: str, hits: list, scored: bool = True
                     ) -> tuple[list, list, int]:
    """The product's two contexts for one query's hits: evidence-cut (widening into the adjacent nodes of
    ``vector_store``, the store searched; growing toward the higher-scored chunks, or evenly where ``scored`` is
    False), and first tokens of whole nodes."""
    from llama_index.core.schema import NodeRelationship, NodeWithScore, RelatedNodeInfo, TextNode

    from llama_index.vector_stores.landmark import EvidenceContext, MaxContextTokens
    from llama_index.vector_stores.landmark.evidence import add_evidence

    nodes = [NodeWithScore(node=add_evidence(TextNode(id_=hit.node_id, text=hit.text, start_char_idx=hit.span[0],
                                                      end_char_idx=hit.span[1], metadata={"doc": hit.doc_id},
                                                      excluded_llm_metadata_keys=["doc"], relationships={
                                                          NodeRelationship.SOURCE: RelatedNodeInfo(
                                                              node_id=hit.doc_id)}), hit.evidence,
                                        hit.chunk_scores if scored else ()),
                           score=hit.score) for hit in hits[:top]]
    cut = MaxContextTokens(max_context_tokens=budget * top, tokenizer=count).postprocess_nodes(
        EvidenceContext(tokens_per_node=budget, tokenizer=count, vector_store=vector_store).postprocess_nodes(
            nodes, query_str=query))
    evidence = [(n.node.metadata["doc"], n.node.start_char_idx, n.node.end_char_idx) for n in cut]
    used = sum(len(count(n.node.get_content())) for n in cut)
    whole = [(hit.doc_id, hit.span[0], hit.span[0] + first_tokens(hit.text, budget)) for hit in hits[:top]]
    return evidence, whole, used


def run_set(name: str, args: argparse.Namespace) -> dict[str, Any]:
    """Every pipeline's coverage on one needle set."""
    from stock_retrieval import StockRetriever

    from llama_index.vector_stores.landmark import LandmarkVectorStore
    from lmk_rag.store import LandmarkStore

    ids, texts, pairs, needles = load(set_folder(name))
    pairs = pairs[: args.queries]
    result: dict[str, Any] = {"set": name, "docs": len(ids), "queries": len(pairs), "date": str(dt.date.today())}
    started = time.perf_counter()
    folder = tempfile.mkdtemp(prefix=f"lmk_evidence_{name}_")
    counts: dict[tuple[str, int, int], int] = {}
    used: dict[tuple[int, int], list[int]] = {}
    first = anchored = rank1_hit128 = rank1_even128 = 0
    with LandmarkStore(folder) as store:
        store.upsert_documents([(doc_id, text, None) for doc_id, text in zip(ids, texts)])
        vector_store = LandmarkVectorStore(store=store)
        result["ingest_s"] = time.perf_counter() - started
        for query, doc in pairs:
            hits = store.search(query, k=max(TOPS))
            needle = needles[doc]
            is_first = bool(hits) and hits[0].doc_id == doc
            first += int(is_first)
            if is_first:
                best = hits[0].evidence[0]
                anchored += (min(best.end, needle[1]) - max(best.start, needle[0])) > 0
            for budget in BUDGETS:
                for top in TOPS:
                    evidence, whole, tokens = product_contexts(vector_store, budget, top, query, hits)
                    even, _, _ = product_contexts(vector_store, budget, top, query, hits, scored=False)
                    used.setdefault((budget, top), []).append(tokens)
                    for label, pieces in (("lmk-rag evidence", evidence), ("lmk-rag evidence, even", even),
                                          ("lmk-rag nodes", whole)):
                        counts[(label, budget, top)] = counts.get((label, budget, top), 0) + covered(pieces, doc,
                                                                                                     needle)
                    if (budget, top) == (128, 1) and is_first:
                        rank1_hit128 += covered(evidence, doc, needle)
                        rank1_even128 += covered(even, doc, needle)
    result.update(first=first, anchored=anchored, rank1_hit128=rank1_hit128, rank1_even128=rank1_even128,
                  tokens={f"{b}/{t}": float(np.mean(v)) for (b, t), v in used.items()})
    for recipe in args.stock:
        stock = StockRetriever(recipe, texts)
        for query, doc in pairs:
            nodes = stock.retrieve(query, max(TOPS))
            for budget in BUDGETS:
                for top in TOPS:
                    pieces = [(ids[int(n.node.ref_doc_id)], n.node.start_char_idx,
                               n.node.start_char_idx + first_tokens(n.node.get_content(), budget))
                              for n in nodes[:top] if n.node.start_char_idx is not None]
                    counts[(recipe, budget, top)] = counts.get((recipe, budget, top), 0) + covered(
                        pieces, doc, needles[doc])
    result["counts"] = {f"{label}|{budget}|{top}": value for (label, budget, top), value in counts.items()}
    result["wall_s"] = time.perf_counter() - started
    return result


def main() -> None:
    """Run the sets and write the report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sets", nargs="+", default=["L512", "L2048"])
    parser.add_argument("--stock", nargs="*", default=["stock-1024", "stock-250"])
    parser.add_argument("--queries", type=int, default=None, help="the first N queries of each set (a smoke run)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    saved = args.out.with_suffix(".json")
    kept = {result["set"]: result for result in (json.loads(saved.read_text()) if saved.exists() else [])}
    for name in args.sets:
        result = carry_stock(run_set(name, args), kept.get(name), args.stock)
        kept[name] = result
        print(json.dumps(result), flush=True)
        saved.write_text(json.dumps(list(kept.values()), indent=1))
    write_report(args, list(kept.values()))


def carry_stock(result: dict[str, Any], previous: dict[str, Any] | None, run: list[str]) -> dict[str, Any]:
    """A set's result with the stock rows this run did not compute (``--stock`` named fewer) carried from the
    previous run of the same set, which says so (``stock_from``): stock retrieval does not change with the product,
    and the needle spans are fixed."""
    if previous is None:
        return result
    carried = {key: value for key, value in previous["counts"].items()
               if key.split("|")[0].startswith("stock-") and key.split("|")[0] not in run}
    if carried:
        result["counts"] = {**result["counts"], **carried}
        result["stock_from"] = previous.get("stock_from") or f"the run of {previous.get('date', 'an earlier day')}"
    return result


def write_report(args: argparse.Namespace, results: list[dict[str, Any]]) -> None:
    """The results as markdown."""
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    flags = next((line.split(":", 1)[1].split() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("flags")), [])
    lines = [
        "# Evidence: the needle passage in the LLM's context",
        "",
        f"{dt.date.today()}, {cpu} ({os.cpu_count()} cores; avx512f {'avx512f' in flags}), load average "
        f"{Path('/proc/loadavg').read_text().split()[0]} at the end; `python benchmarks/evidence_bench.py --sets "
        f"{' '.join(args.sets)}` (the last run; each set says the day it ran, the sets of earlier runs kept from "
        f"{args.out.with_suffix('.json').name}).",
        "",
        "Share of needle queries with at least half of the needle passage's characters inside the context handed to "
        "the LLM, at a budget of tokens per hit (tiktoken cl100k_base) and top-1 / top-3 (the same total budget, "
        "budget x top, for every row). Needle spans are read to score, never to rank. " + (__doc__ or "").split(
            "\n\n")[1].replace("\n", " "),
        "",
    ]
    stock = sorted({key.split("|")[0] for result in results for key in result["counts"] if key.startswith("stock-")})
    labels = ["lmk-rag evidence", "lmk-rag evidence, even", "lmk-rag nodes", *stock]
    for result in results:
        n = result["queries"]
        lines += [f"## {result['set']} ({result['docs']} documents, {n} queries with a needle)", "",
                  "| pipeline | " + " | ".join(f"{b} x top-{t}" for b in BUDGETS for t in TOPS) + " |",
                  "|---|" + "---:|" * (len(BUDGETS) * len(TOPS))]
        for label in labels:
            cells = [result["counts"].get(f"{label}|{b}|{t}") for b in BUDGETS for t in TOPS]
            lines.append(f"| {label} | " + " | ".join("-" if c is None else f"{c / n:.3f}" for c in cells) + " |")
        first = result["first"]
        lines += ["", f"The answer document ranks first for {first}/{n} queries ({first / n:.3f}); of those, the "
                  f"best evidence chunk overlaps the needle for {result['anchored']}/{first} "
                  f"({result['anchored'] / max(first, 1):.3f}), and the 128-token evidence context holds at least "
                  f"half of the needle for {result['rank1_hit128']}/{first} "
                  f"({result['rank1_hit128'] / max(first, 1):.3f}; grown evenly {result['rank1_even128']}/{first}, "
                  f"{result['rank1_even128'] / max(first, 1):.3f})."
                  " Mean tokens handed to the LLM by the evidence context: "
                  + ", ".join(f"{key}: {value:.0f}" for key, value in result["tokens"].items())
                  + f". Ingest {result['ingest_s']:.0f} s; set {result['wall_s']:.0f} s in all "
                  + f"({result.get('date', '')})"
                  + (f"; the stock rows are carried from {result['stock_from']}" if result.get("stock_from") else "")
                  + ".", ""]
    args.out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
