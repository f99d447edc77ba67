"""Static late-interaction benchmark: encoding speed (ms per text line) and nDCG@10 per dev set.

Speed: pooled static, static token encoding, mixer token encoding and MiniLM (the landmark encoder
without landmarks, batch 32) on the same manual-page lines, one BLAS thread (the CPU is shared).
Quality: ``static``, ``static-maxsim``, ``static-mixer``, ``mean`` and ``maxsim-chunk`` on the eval
sweep's seeded subsets (so MiniLM encodings come from the eval cache), plus the static pipelines on
all of manpages-short, manpages-needle/L2048 and manpages-longdoc. Writes a Markdown table (machine and date included).

    python benchmarks/static_bench.py [--mixer DIR] [--out benchmarks/results/static_bench.md]
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import argparse  # noqa: E402
import datetime  # noqa: E402
import gzip  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402

from lmk_rag.eval import PipelineOptions, evaluate, load_beir, subsample  # noqa: E402
from lmk_rag.research import default_mixer_dir, user_cache_dir  # noqa: E402
from lmk_rag.static import StaticTokenEncoder, load_static_vectors  # noqa: E402

DATA = Path("/work/shared/data") if Path("/work/shared/data").is_dir() else Path("../shared/data")
EVAL_CACHE = user_cache_dir("eval")
#: (folder, max_queries, max_docs): the eval sweep's subsets (seed 0), so MiniLM runs hit its cache.
SETS = [("manpages-short", 100, 300), ("manpages-needle/L2048", 20, 20), ("manpages-longdoc", 40, 60)]
FULL_SETS = [("manpages-short", None, None), ("manpages-needle/L2048", None, None),
             ("manpages-longdoc", None, None)]
STATIC = ["static", "static-maxsim", "static-mixer"]
MINILM = ["mean", "maxsim-chunk"]
LINES_PER_DOC = 50
POOLED_SPEED = "static pooled (per line)"
MIXER_SPEED = "mixer tokens (50-line docs)"
MINILM_SPEED = "MiniLM mean (per line, batch 32)"


def text_lines(n: int) -> list[str]:
    """The first ``n`` non-empty lines of the manpages-longdoc corpus (100-column manual pages)."""
    lines: list[str] = []
    with gzip.open(DATA / "manpages-longdoc" / "corpus.jsonl.gz", "rt") as handle:
        for row in handle:
            lines.extend(line for line in json.loads(row)["text"].split("\n") if line.strip())
            if len(lines) >= n:
                return lines[:n]
    return lines


def ms_per_line(jobs: dict[str, tuple[Callable[[], object], int]], repeats: int) -> dict[str, float]:
    """The best of ``repeats`` timings of each job, in ms per line.

    Rounds are interleaved (every job once per round), so a burst of load from other processes slows one
    round of every job rather than all rounds of one job.

    :param jobs: name -> (function, lines it encodes).
    :param repeats: rounds.
    """
    best = dict.fromkeys(jobs, float("inf"))
    for _ in range(repeats):
        for name, (fn, _) in jobs.items():
            start = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - start)
    return {name: 1000 * best[name] / n_lines for name, (_, n_lines) in jobs.items()}


def speed(mixer: Path, n_lines: int, minilm_lines: int, repeats: int = 7) -> dict[str, float]:
    """Milliseconds per line of each encoder."""
    from lmk_rag.encoder import LandmarkEncoder

    lines = text_lines(n_lines)
    docs = ["\n".join(lines[i : i + LINES_PER_DOC]) for i in range(0, len(lines), LINES_PER_DOC)]
    vectors = load_static_vectors()
    raw, mixed = StaticTokenEncoder(vectors), StaticTokenEncoder(vectors, mixer=mixer)
    minilm = LandmarkEncoder(granularity=None, batch_size=32, show_progress_bar=False)
    minilm.encode_documents(lines[:32])  # warm-up
    static = ms_per_line(
        {
            POOLED_SPEED: (lambda: raw.encode(lines), len(lines)),
            "static tokens (50-line docs)": (lambda: [raw.encode_document_tokens(d) for d in docs], len(lines)),
            MIXER_SPEED: (lambda: [mixed.encode_document_tokens(d) for d in docs], len(lines)),
        },
        repeats,
    )
    baseline = ms_per_line({MINILM_SPEED: (lambda: minilm.encode_documents(lines[:minilm_lines]), minilm_lines)}, 1)
    return static | baseline


def quality(mixer: Path, sets, pipelines) -> list[dict]:
    """nDCG@10 rows, one per (set, pipeline)."""
    rows = []
    for folder, max_queries, max_docs in sets:
        dataset = subsample(load_beir(DATA / folder), max_queries, max_docs, seed=0)
        for pipeline in pipelines:
            encoder = {"mixer": str(mixer)} if pipeline in STATIC else {}  # the default static model
            start = time.perf_counter()
            report = evaluate(dataset, pipeline, PipelineOptions(cache_dir=EVAL_CACHE, encoder=encoder))
            rows.append({"set": folder, "queries": report["queries"], "docs": report["docs"], "pipeline": pipeline,
                         "ndcg@10": report["ndcg@10"], "recall@10": report["recall@10"],
                         "query_ms": report["query_ms"], "wall_s": round(time.perf_counter() - start, 1)})
            print(json.dumps(rows[-1]), flush=True)
    return rows


def _selection(record: dict) -> str:
    """What the mixer's checkpoint was selected on (records from before the selection was recorded: manpages-short)."""
    selection = record.get("selection")
    if selection is None:
        return "manpages-short 200q/800d"
    return f"{selection['set']} ({selection['queries']} queries, {selection['docs']} docs)"


def _verdict(value: float, target: float) -> str:
    return f"{'met' if value <= target else 'missed'}: {value:.3f}"


def _where(folder: Path) -> str:
    """A folder as a reader on another machine can place it: inside the user cache, or the folder's name."""
    cache = user_cache_dir()
    return (f"`lmk-rag/{folder.relative_to(cache).as_posix()}` in the user cache" if folder.is_relative_to(cache)
            else f"`{folder.name}`")


def write(out: Path, speeds: dict[str, float], rows: list[dict], full_rows: list[dict], mixer: Path,
          load: tuple[float, float]) -> None:
    """The Markdown report."""
    training = mixer / "training.json"
    record = json.loads(training.read_text()) if training.exists() else {}
    lines = [
        "# Static late interaction: speed and quality",
        "",
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores shared with other jobs "
        f"(1-minute load average {load[0]:.1f} before and {load[1]:.1f} after the speed runs), 1 BLAS thread; "
        f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC. Timings swing 2-5x with the load. "
        "Produced by `python benchmarks/static_bench.py`.",
        f"Static model: model2vec distillation of all-MiniLM-L6-v2, 256 dims. Mixer: {_where(mixer)} "
        f"({record.get('parameters', '?')} parameters, objective {record.get('config', {}).get('objective', '?')}, "
        f"step {record.get('best_step', '?')} selected by nDCG@10 on {_selection(record)}).",
        "",
        "## Encoding speed (ms per text line; lines of 100-column manual pages)",
        "",
        "| encoder | ms/line | speed-up over MiniLM |",
        "|---|---|---|",
        *[f"| {name} | {value:.4f} | {speeds[MINILM_SPEED] / value:.0f}x |" for name, value in speeds.items()],
        "",
        f"Targets: static pooled <= 0.05 ms/line ({_verdict(speeds[POOLED_SPEED], 0.05)}), "
        f"mixer tokens <= 0.15 ms/line ({_verdict(speeds[MIXER_SPEED], 0.15)}).",
        "",
        "## nDCG@10 per dev set (seeded subsets of the eval sweep; seed 0)",
        "",
        "| set | queries | docs | " + " | ".join(STATIC + MINILM) + " |",
        "|---|---|---|" + "---|" * len(STATIC + MINILM),
    ]
    for folder, _, _ in SETS:
        cells = {r["pipeline"]: r for r in rows if r["set"] == folder}
        first = next(iter(cells.values()))
        lines.append(f"| {folder} | {first['queries']} | {first['docs']} | "
                     + " | ".join(f"{cells[p]['ndcg@10']:.4f}" if p in cells else "-" for p in STATIC + MINILM) + " |")
    if full_rows:
        header = "| set | pipeline | queries | docs | nDCG@10 | recall@10 | query ms |"
        lines += ["", "## Static pipelines on whole dev sets", "", header, "|---|---|---|---|---|---|---|"]
        lines += [f"| {r['set']} | {r['pipeline']} | {r['queries']} | {r['docs']} | {r['ndcg@10']:.4f} | "
                  f"{r['recall@10']:.4f} | {r['query_ms']:.2f} |" for r in full_rows]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")


def main() -> None:
    """Parse arguments, run, write the report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mixer", type=Path, default=default_mixer_dir())
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "static_bench.md")
    parser.add_argument("--lines", type=int, default=2000)
    parser.add_argument("--minilm-lines", type=int, default=320)
    parser.add_argument("--no-full", action="store_true", help="skip the whole-set static runs")
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    speeds = speed(args.mixer, args.lines, args.minilm_lines)
    load = (load_before, os.getloadavg()[0])
    print(json.dumps(speeds), flush=True)
    rows = quality(args.mixer, SETS, STATIC + MINILM)
    full_rows = [] if args.no_full else quality(args.mixer, FULL_SETS, STATIC)
    write(args.out, speeds, rows, full_rows, args.mixer, load)


if __name__ == "__main__":
    main()
