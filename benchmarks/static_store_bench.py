"""Static store against transformer store, in one run: encoding speed (tokens/s), ingest (documents/s, encoding and
writing timed apart) and whole-set nDCG@10 of both stores.

- Encoding speed: the same real documents (manpages-needle/L2048 haystacks of ~2k tokens) through MiniLM (the
  landmark encoder at the store's defaults) and through a static store's encoding, timed as one job: what its ingest
  runs before writing (``node_records``: ``StaticDocumentEncoder.encode_documents``, the nodes cut from it, and each
  node's static token multivector through the shipped ConvMixer, cut from the document's one tokenisation by
  ``encode_node_tokens``). Its parts are timed alone beside it. Tokens are counted with MiniLM's tokenizer (the
  static model has the same WordPiece vocabulary). Best of ``--repeats`` interleaved rounds.
- Ingest: a fresh Qdrant Edge store of each kind takes the same documents, ``--batch-size`` per write (the CLI's
  default 8). *Encode* is everything before the store: vectors, nodes and, in a static store, the nodes' static
  multivectors; *write* is ``upsert_encoded_documents`` (BM25 vectors, points, the write protocol, flushes); *index* is
  ``optimize()`` (HNSW). The store's size on disk is reported: static multivectors hold 256 floats per distinct
  token of a node, chunk vectors 384 floats per 64 tokens.
- Quality: nDCG@10 of the ``static-store`` (with and without the mixer) and ``lmk-rag`` pipelines on whole dev sets
  (``lmk-rag`` document encodings come from the eval cache when present; its quality does not depend on it).
- A static store without the mixer (raw static token vectors) is measured beside the default one throughout.

BLAS and torch use ``OMP_NUM_THREADS`` threads (default 1 here; set it to compare on more cores).

    python benchmarks/static_store_bench.py                  # writes benchmarks/results/static_store_bench.md
    python benchmarks/static_store_bench.py --speed-docs 4 --ingest-docs 6 --sets none --out /tmp/smoke.md
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import argparse  # noqa: E402
import datetime  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from lmk_rag import DEFAULT_NODE_TOKENS, EncodedText  # noqa: E402
from lmk_rag.encoder import LandmarkEncoder  # noqa: E402
from lmk_rag.eval import PipelineOptions, evaluate, load_beir  # noqa: E402
from lmk_rag.research import group_chunks, node_records, user_cache_dir  # noqa: E402
from lmk_rag.static import StaticDocumentEncoder  # noqa: E402
from lmk_rag.store import LandmarkStore, NodeRecord  # noqa: E402

SHARED = Path("/work/shared/data")
DATA = SHARED if SHARED.is_dir() else Path(__file__).resolve().parents[2] / "shared" / "data"
OUT = Path(__file__).resolve().parent / "results" / "static_store_bench.md"
NODE_TOKENS = DEFAULT_NODE_TOKENS
#: (pipeline, settings, column) of the quality table.
QUALITY = [("static-store", {}, "static store"), ("static-store", {"mixer": None}, "static store, no mixer"),
           ("lmk-rag", {}, "transformer store")]


def documents(folder: str, n: int) -> list[str]:
    """The first ``n`` documents of a dev set."""
    return list(load_beir(DATA / folder).doc_texts[:n])


def best_seconds(jobs: dict[str, Callable[[], object]], repeats: int) -> dict[str, float]:
    """The best of ``repeats`` interleaved timings of each job (a burst of load slows one round of every job)."""
    best = dict.fromkeys(jobs, float("inf"))
    for _ in range(repeats):
        for name, job in jobs.items():
            start = time.perf_counter()
            job()
            best[name] = min(best[name], time.perf_counter() - start)
    return best


def speed(minilm: LandmarkEncoder, static: StaticDocumentEncoder, raw: StaticDocumentEncoder, texts: list[str],
          repeats: int) -> dict[str, Any]:
    """Tokens/s of MiniLM, of a static store's encoding (with and without the mixer) and of each of its parts."""
    tokens = sum(len(minilm.tokenizer(text, add_special_tokens=False)["input_ids"]) for text in texts)
    encoded = static.encode_documents(texts)
    spans = [_node_spans(enc) for enc in encoded]
    minilm.encode_documents(texts[:1])  # warm-up: first forward pass, thread pools
    store_encoding(static, texts[:1]), store_encoding(raw, texts[:1])
    seconds = best_seconds({
        "MiniLM landmark encoder (vectors and chunk vectors)": lambda: minilm.encode_documents(texts),
        "static: both (a static store's encoding)": lambda: store_encoding(static, texts),
        "static: both, no mixer": lambda: store_encoding(raw, texts),
        "static: pooled chunk and node vectors": lambda: static.encode_documents(texts),
        "static: node token multivectors through the mixer": lambda: [
            static.encode_node_tokens(enc, node_spans) for enc, node_spans in zip(encoded, spans)
        ],
        "static: raw node token multivectors (no mixer)": lambda: [
            raw.encode_node_tokens(enc, node_spans) for enc, node_spans in zip(encoded, spans)
        ],
    }, repeats)
    return {"texts": len(texts), "tokens": tokens, "seconds": seconds}


def store_encoding(encoder: StaticDocumentEncoder, texts: list[str]) -> list[list[NodeRecord]]:
    """What a static store's ingest encodes: each document's vectors and its nodes with their token multivectors."""
    return [node_records(encoder, str(index), text, enc, NODE_TOKENS)
            for index, (text, enc) in enumerate(zip(texts, encoder.encode_documents(texts)))]


def _node_spans(encoded: EncodedText) -> list[tuple[int, int]]:
    return [node.span for node in group_chunks(encoded, NODE_TOKENS)]


def ingest(kind: str, encoder: Any, texts: list[str], batch_size: int) -> dict[str, Any]:
    """Encode, write and index ``texts`` into a fresh Edge store of one kind, each phase timed."""
    folder = Path(tempfile.mkdtemp(prefix=f"lmk_rag_bench_{kind}_"))
    try:
        store = LandmarkStore(folder / "store", encoder=encoder)
        encode_s = write_s = 0.0
        nodes = floats = 0
        for start in range(0, len(texts), batch_size):
            batch = list(enumerate(texts[start : start + batch_size], start))
            t0 = time.perf_counter()
            encoded = encoder.encode_documents([text for _, text in batch])
            docs = []
            for (index, text), enc in zip(batch, encoded):
                records = node_records(encoder, str(index), text, enc, store.node_tokens)
                docs.append((str(index), records))
                floats += sum(_floats(record, store.mode) for record in records)
            t1 = time.perf_counter()
            nodes += store.upsert_encoded_documents(docs, document_batch_size=batch_size)
            t2 = time.perf_counter()
            encode_s, write_s = encode_s + t1 - t0, write_s + t2 - t1
        t3 = time.perf_counter()
        store.optimize()
        index_s = time.perf_counter() - t3
        store.close()
        disk = sum(path.stat().st_blocks * 512 for path in (folder / "store").rglob("*") if path.is_file())
        return {"store": kind, "docs": len(texts), "nodes": nodes, "encode_s": encode_s, "write_s": write_s,
                "index_s": index_s, "vector_mib": 4 * floats / 2**20, "disk_mib": disk / 2**20}
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _floats(record: NodeRecord, mode: str) -> int:
    """How many float32 values a node's dense and multivectors hold in the store."""
    multivector = record.static_vectors if mode == "static" else record.chunk_vectors
    return int(record.vector.size + multivector.size)


def quality(sets: list[str]) -> list[dict[str, Any]]:
    """nDCG@10 of the stores on whole dev sets."""
    rows = []
    for folder in sets:
        dataset = load_beir(DATA / folder)
        for pipeline, settings, column in QUALITY:
            report = evaluate(dataset, pipeline, PipelineOptions(cache_dir=user_cache_dir("eval"), encoder=settings))
            rows.append({"set": folder, "store": column, "queries": report["queries"], "docs": report["docs"],
                         "ndcg@10": report["ndcg@10"], "recall@10": report["recall@10"],
                         "query_ms": report["query_ms"]})
            print(json.dumps(rows[-1]), flush=True)
    return rows


def render(args: argparse.Namespace, speeds: dict[str, Any], ingests: list[dict[str, Any]],
           rows: list[dict[str, Any]], load: tuple[float, float], minilm: LandmarkEncoder) -> str:
    """The Markdown report."""
    import torch

    seconds = speeds["seconds"]
    minilm_rate = speeds["tokens"] / seconds["MiniLM landmark encoder (vectors and chunk vectors)"]
    lines = [
        "# Static store against transformer store: encoding, ingest, quality",
        "",
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, 1-minute load average "
        f"{load[0]:.1f} before and {load[1]:.1f} after; {torch.get_num_threads()} torch thread(s), "
        f"OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']}; "
        f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC. "
        f"Produced by `python benchmarks/static_store_bench.py {' '.join(args.argv)}`.",
        f"Transformer store: MiniLM (all-MiniLM-L6-v2), granularity {minilm.granularity}, "
        f"{minilm.settings.get('backend', 'torch')}. Static store: the shipped static model (256 dims) and mixer "
        "(no mixer: raw static token vectors).",
        "",
        f"## Encoding speed ({speeds['texts']} {args.speed_set} documents, {speeds['tokens']:,} tokens; "
        f"best of {args.repeats})",
        "",
        "| encoder | seconds | tokens/s | x MiniLM |",
        "|---|---|---|---|",
    ]
    for name, value in seconds.items():
        rate = speeds["tokens"] / value
        lines.append(f"| {name} | {value:.3f} | {rate:,.0f} | {rate / minilm_rate:.1f}x |")
    both = speeds["tokens"] / seconds["static: both (a static store's encoding)"] / minilm_rate
    lines += ["", "A static store's encoding is timed as one job (vectors, node cutting, node multivectors: what its "
              "ingest runs before writing); its parts are timed alone below it.",
              "", f"Target: a static store's encoding >= 50x MiniLM's tokens/s ({'met' if both >= 50 else 'missed'}: "
              f"{both:.1f}x).", "",
              f"## Ingest ({args.ingest_docs} {args.ingest_set} documents, {args.batch_size} per write, Qdrant Edge)",
              "", "| store | nodes | encode s | write s | index s | encode docs/s | write docs/s | "
              "end-to-end docs/s | vectors MiB | disk MiB |", "|---|---|---|---|---|---|---|---|---|---|"]
    for row in ingests:
        total = row["encode_s"] + row["write_s"] + row["index_s"]
        cells = [row["store"], row["nodes"], f"{row['encode_s']:.2f}", f"{row['write_s']:.2f}",
                 f"{row['index_s']:.2f}", f"{row['docs'] / row['encode_s']:.1f}", f"{row['docs'] / row['write_s']:.1f}",
                 f"{row['docs'] / total:.1f}", f"{row['vector_mib']:.1f}", f"{row['disk_mib']:.1f}"]
        lines.append("| " + " | ".join(map(str, cells)) + " |")
    lines += ["", "Encode: vectors, nodes and (static store) the nodes' token multivectors; write: "
              "`upsert_encoded_documents` (BM25 vectors, points, write protocol, flushes); index: `optimize()`. "
              "Vectors MiB: the float32 node vectors and multivectors written (chunk vectors, or static token "
              "vectors); disk MiB: the store folder's allocated blocks after indexing."]
    if rows:
        lines += ["", "## nDCG@10 on whole dev sets", "",
                  "| set | queries | docs | " + " | ".join(column for _, _, column in QUALITY) + " |",
                  "|---|---|---|" + "---|" * len(QUALITY)]
        for folder in dict.fromkeys(row["set"] for row in rows):
            cells = {row["store"]: row for row in rows if row["set"] == folder}
            first = next(iter(cells.values()))
            lines.append(f"| {folder} | {first['queries']} | {first['docs']} | "
                         + " | ".join(f"{cells[column]['ndcg@10']:.4f}" for _, _, column in QUALITY) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    """Parse arguments, run the three parts, write the report."""
    import sys

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--speed-set", default="manpages-needle/L2048")
    parser.add_argument("--speed-docs", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--ingest-set", default="manpages-needle/L2048")
    parser.add_argument("--ingest-docs", type=int, default=200)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--sets", nargs="+", default=["manpages-short", "manpages-needle/L2048"],
                        help="whole dev sets for nDCG@10 ('none': skip)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    args.argv = sys.argv[1:]
    minilm = LandmarkEncoder(show_progress_bar=False)
    static, raw = StaticDocumentEncoder(), StaticDocumentEncoder(mixer=None)
    load_before = os.getloadavg()[0]
    speeds = speed(minilm, static, raw, documents(args.speed_set, args.speed_docs), args.repeats)
    print(json.dumps(speeds), flush=True)
    texts = documents(args.ingest_set, args.ingest_docs)
    ingests = [ingest("transformer", minilm, texts, args.batch_size), ingest("static", static, texts, args.batch_size),
               ingest("static, no mixer", raw, texts, args.batch_size)]
    print(json.dumps(ingests), flush=True)
    load = (load_before, os.getloadavg()[0])
    rows = [] if args.sets == ["none"] else quality(args.sets)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(render(args, speeds, ingests, rows, load, minilm))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
