"""LMK fine-tuning on a lent GPU (the H200 device tool), in three steps.

1. ``prepare`` (here): copy what the GPU machine needs into an ignored folder of the repo (``.gpu_carry``):
   the base model in float16 (MiniLM, or any model folder given with ``--model``, its sentence-transformers files
   included), the training pairs (``--train``: manual pages by default, the Perl training pages too) and the eval
   sets. The device machine reaches no registry and
   its image already has torch, transformers, numpy, typer, tqdm and filelock; ``platformdirs``, the one package
   dependency it lacks, travels in the carry folder (pure Python).
2. ``run`` (there, through ``benchmarks/gpu_finetune.sh``): fine-tune within a time budget, encode the
   eval sets with the zero-shot and the fine-tuned model, write the rankings (run files) and the
   training log to ``$OUT`` (4 files, a few MiB; with ``--return-model`` also the model in three 15 MiB parts).
   Training runs in bf16 autocast on the GPU (the trainer's default there) and holds at most ``--batch-tokens``
   padded tokens of activations at once (65536: MiniLM's steps of 64 pairs in 256-token windows hold 52-59k padded
   tokens and mostly run whole, as without a budget; a long model's 8192-token haystacks run in micro-batches of 8
   windows; docs/finetune.md).
3. ``score`` (here): score the run files with the eval harness (pytrec_eval) against the local qrels.

    python benchmarks/gpu_finetune.py prepare [--model FOLDER_OR_HUB_ID] [--sets SET ...] [--train SET ...]
    # device tool: run(command="bash benchmarks/gpu_finetune.sh", carry=[".gpu_carry"], timeout_s=540);
    # GPU_FT_ARGS="--return-model --sets ..." passes run's options (the sets prepared)
    python benchmarks/gpu_finetune.py score /work/.device/.../runs.json.gz

The device takes a working tree of 64 MiB: the carry folder (~53 MiB with MiniLM) leaves no room for the large
tracked files, which leave the index for the call (docs/finetune.md). 2026-12-04's run (600 steps in 217 s on an
H200) and what it decided: benchmarks/results/finetune.md.

Only the dataset texts reach the pipelines; ids and qrels stay in the run files' keys and here.
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DATA = Path("/work/shared/data") if Path("/work/shared/data").is_dir() else REPO.parent / "shared" / "data"
PERL_DATA = REPO / "benchmarks" / "data"
CARRY = REPO / ".gpu_carry"
#: The eval sets carried to the device, and the (max_queries, max_docs) each is scored on (None: all).
SETS: dict[str, tuple[int | None, int | None]] = {
    "manpages-needle/L2048": (None, None),
    "manpages-needle/L8192": (None, None),
    "manpages-short": (None, None),
    "manpages-longdoc": (200, 400),
    "perlfaq-answers": (None, None),
    "perlfaq-longdoc": (None, None),
    "perldoc-ref": (None, None),
    "perldoc-longdoc": (None, None),
}
#: The sets ``prepare`` carries and ``run`` ranks unless told otherwise: the manual-page sets (the training domain).
DEFAULT_SETS = ["manpages-needle/L2048", "manpages-needle/L8192", "manpages-short", "manpages-longdoc"]
#: The training sets ``prepare --train`` can join into the carried pairs: manual pages (2,356 pairs), the Perl
#: pages of no dev set (349 pairs: purposes and symbol descriptions) and natural questions of the CVS, Emacs and R
#: FAQs (468 pairs; benchmarks/data/README.md).
TRAIN_SETS: dict[str, list[Path]] = {
    "manpages-train": [DATA / "manpages-train" / "pairs.jsonl"],
    "perldoc-train": [PERL_DATA / "perldoc-train" / "pairs.jsonl", PERL_DATA / "perldoc-train" / "symbols.jsonl"],
    "faq-train": [PERL_DATA / "faq-train" / "pairs.jsonl"],
}
#: The training pairs in the carry folder.
TRAIN_PAIRS = "data/train.jsonl"
#: The fine-tuned model comes back as a float16 tar cut into parts under the device's 16 MiB limit per file.
PART_BYTES = 15 * 2**20
#: Pipelines scored for each model: zero-shot (the base model as trained) and LMK fine-tuned.
PIPELINES = {"zero-shot": ["mean", "lmk", "maxsim-landmark", "maxsim-chunkmean"],
             "finetuned": ["lmk", "maxsim-landmark", "maxsim-chunkmean"]}
#: Encoder settings for every run: granularity 32 in document context, as the eval baselines.
ENCODER = {"granularity": 32}
#: The carry folder's base model.
BASE_MODEL = "base_model"
RANK_DEPTH = 100


def write_parts(data: bytes, out: Path, stem: str) -> None:
    """Write ``data`` to ``out`` as ``STEM.part0``, ``STEM.part1``... of at most :data:`PART_BYTES` each (the
    device returns files of at most 16 MiB)."""
    for index, start in enumerate(range(0, len(data), PART_BYTES)):
        (out / f"{stem}.part{index}").write_bytes(data[start:start + PART_BYTES])


def read_parts(folder: Path, stem: str) -> bytes:
    """The bytes :func:`write_parts` cut into ``folder``'s ``STEM.partN`` files, joined in part order."""
    parts = sorted(folder.glob(f"{stem}.part*"), key=lambda path: int(path.name.removeprefix(f"{stem}.part")))
    return b"".join(path.read_bytes() for path in parts)


def save_half(source: Path, target: Path) -> None:
    """Save the model and tokenizer of ``source`` to ``target`` with float16 weights (half the bytes to carry)."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    AutoModel.from_pretrained(source, dtype=torch.float16).save_pretrained(target)
    AutoTokenizer.from_pretrained(source).save_pretrained(target)


def ignore_in_git(carry: Path) -> None:
    """List a carry folder inside the repo in ``.git/info/exclude``: the device tool carries an ignored folder only
    when named in ``carry``, and an unignored one would travel with every call."""
    exclude = REPO / ".git" / "info" / "exclude"
    if not carry.resolve().is_relative_to(REPO) or not exclude.parent.is_dir():
        return
    line = f"/{carry.resolve().relative_to(REPO).as_posix()}/"
    if line not in (exclude.read_text(encoding="utf-8") if exclude.exists() else "").splitlines():
        with open(exclude, "a", encoding="utf-8") as handle:
            handle.write(line + "\n")


def prepare(carry: Path, model: str | None, sets: list[str], train: list[str]) -> None:
    """Build the carry folder: the base model in float16 (MiniLM: ~45 MB) with its sentence-transformers files
    (prompts, pooling, window), the training pairs, the eval sets.

    :param model: a model folder or hub id (resolved offline); None: the packaged MiniLM.
    :param sets: the eval sets to carry (the device's 64 MiB working-tree limit holds about four beside MiniLM).
    :param train: the training sets (:data:`TRAIN_SETS`) whose pairs are joined into one file.
    """
    import platformdirs
    from report import set_folder

    from lmk_rag.encoder import resolve_model_path

    if carry.exists():
        shutil.rmtree(carry)
    source = resolve_model_path(model)
    model_dir = carry / BASE_MODEL
    shutil.copytree(source, model_dir, ignore=shutil.ignore_patterns("*.safetensors", "*.bin", "*.onnx", "*.pt",
                                                                     "onnx", "openvino", ".git*", "*.md"))
    save_half(source, model_dir)
    # the package's one dependency the device image lacks (pure Python; gpu_finetune.sh puts site/ on the path)
    shutil.copytree(Path(platformdirs.__file__).parent, carry / "site" / "platformdirs",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (carry / "data").mkdir(parents=True)
    with open(carry / TRAIN_PAIRS, "w", encoding="utf-8") as handle:
        for name in train:
            for path in TRAIN_SETS[name]:
                handle.write(path.read_text(encoding="utf-8").rstrip("\n") + "\n")
    for name in sets:
        shutil.copytree(set_folder(name), carry / "data" / name)
    ignore_in_git(carry)
    size = sum(path.stat().st_size for path in carry.rglob("*") if path.is_file())
    print(f"{carry}: {size / 2**20:.1f} MiB")


def _rank(dataset: Any, pipeline: str, model: str | None, cache: Path, batch_size: int,
          max_queries: int | None, max_docs: int | None) -> dict[str, Any]:
    """One pipeline on one (subsampled) set: rankings by query id, timings."""
    from lmk_rag.eval import PipelineOptions, get_pipeline, subsample

    sample = subsample(dataset, max_queries, max_docs, seed=0)
    runner = get_pipeline(pipeline, PipelineOptions(model=model, cache_dir=cache, encoder=dict(ENCODER),
                                                    batch_size=batch_size))
    stats = runner.index(list(sample.doc_texts))
    start = time.perf_counter()
    rankings = runner.search(list(sample.query_texts), RANK_DEPTH)
    return {
        # document ids in rank order, no scores: 2,000 queries of 7 pipelines stay under the 16 MiB a file
        "run": {query_id: [sample.doc_ids[doc] for doc, _ in ranking]
                for query_id, ranking in zip(sample.query_ids, rankings)},
        "docs": len(sample.doc_ids),
        "encode_s": round(stats.encode_s, 2),
        "query_ms": round(1000 * (time.perf_counter() - start) / max(len(sample.query_ids), 1), 3),
    }


def _return_model(model_dir: Path, out: Path) -> None:
    """Write the fine-tuned model to ``out`` as a float16 tar in parts (``model.tar.part0``...); join them here
    with ``cat model.tar.part* | tar x``."""
    import io
    import tarfile
    import tempfile

    import torch
    from transformers import AutoModel

    with tempfile.TemporaryDirectory() as scratch:
        packed = Path(scratch) / "finetuned"
        shutil.copytree(model_dir, packed, ignore=shutil.ignore_patterns("*.safetensors", "*.bin", "checkpoint*",
                                                                         "train_log.jsonl"))
        AutoModel.from_pretrained(model_dir, dtype=torch.float16).save_pretrained(packed)
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as tar:
            tar.add(packed, arcname="finetuned")
    write_parts(buffer.getvalue(), out, "model.tar")


def run(carry: Path, out: Path, max_steps: int, max_seconds: float, batch_size: int, batch_tokens: int | None,
        hard_negatives: int, learning_rate: float, sets: list[str], encode_batch_size: int,
        limit_queries: int | None, return_model: bool) -> None:
    """Fine-tune, then rank every set with every pipeline for both models; write ``$OUT`` files.

    :param batch_tokens: the most padded tokens of activations training holds at once (``FinetuneConfig``); None:
        no bound.
    :param return_model: also write the fine-tuned model (float16 tar parts) to ``out``, before the rankings.
    """
    import torch

    from lmk_rag.eval import load_beir
    from lmk_rag.train import FinetuneConfig, Trainer

    out.mkdir(parents=True, exist_ok=True)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    hardware = torch.cuda.get_device_name(0) if device == "cuda" else "cpu"
    model_dir = Path("/tmp/lmk_finetuned")
    config = FinetuneConfig(
        train=str(carry / TRAIN_PAIRS),
        output=str(model_dir),
        model=str(carry / BASE_MODEL),
        max_steps=max_steps,
        max_seconds=max_seconds,
        batch_size=batch_size,
        batch_tokens=batch_tokens,
        hard_negatives=hard_negatives,
        learning_rate=learning_rate,
        eval_every=max(max_steps // 4, 1),
        checkpoint_every=0,
        device=device,
    )
    summary = Trainer(config).run(show_progress_bar=False)
    summary["hardware"] = hardware
    shutil.copy(model_dir / "train_log.jsonl", out / "train_log.jsonl")
    print(json.dumps({k: summary[k] for k in ("steps", "train_seconds", "heldout_before", "heldout_after")}))
    if return_model:
        _return_model(model_dir, out)

    cache = Path("/tmp/lmk_eval_cache")
    results: dict[str, Any] = {"summary": summary, "encoder": ENCODER, "runs": {}}
    models = {"zero-shot": str(carry / BASE_MODEL), "finetuned": str(model_dir)}
    for name in sets:
        dataset = load_beir(carry / "data" / name, name=name)
        max_queries, max_docs = SETS[name]
        if limit_queries is not None:
            max_queries = min(max_queries or limit_queries, limit_queries)
            max_docs = min(max_docs or limit_queries, limit_queries)
        for label, pipelines in PIPELINES.items():
            for pipeline in pipelines:
                # one cache per model: the harness keys its cache by config and weight-file size, not content
                entry = _rank(dataset, pipeline, models[label], cache / label, encode_batch_size, max_queries,
                              max_docs)
                entry.update({"max_queries": max_queries, "max_docs": max_docs})
                results["runs"][f"{name}|{label}|{pipeline}"] = entry
                print(f"{name} {label} {pipeline}: docs={entry['docs']} encode_s={entry['encode_s']}", flush=True)
        # after every set: a run stopped at the device's time limit still returns the sets it finished
        with gzip.open(out / "runs.json.gz", "wt", encoding="utf-8") as handle:
            json.dump(results, handle)


def score(runs_file: Path, output: Path) -> None:
    """Score the run files here with the eval harness; print one line per (set, model, pipeline), write JSON."""
    from report import set_folder

    from lmk_rag.eval import breakdown, load_beir, mean_metrics, per_query_metrics, subsample

    with gzip.open(runs_file, "rt", encoding="utf-8") as handle:
        results = json.load(handle)
    summary = results["summary"]
    print(f"steps={summary['steps']} train_s={summary['train_seconds']} on {summary.get('hardware')}")
    scored = {}
    for key, entry in results["runs"].items():
        name, label, pipeline = key.split("|")
        sample = subsample(load_beir(set_folder(name), name=name), entry["max_queries"], entry["max_docs"], seed=0)
        per_query = per_query_metrics(sample.qrels, entry["run"])
        row = mean_metrics([per_query[q] for q in sample.query_ids])
        positions = breakdown(per_query, sample.query_ids, sample.query_metadata, "position")
        scored[key] = {**row, "by_position": positions, "queries": len(sample.query_ids), "docs": entry["docs"]}
        by_position = " ".join(f"{p}:{m['recall@1']:.2f}" for p, m in (positions or {}).items())
        print(f"{name:24s} {label:9s} {pipeline:17s} ndcg@10={row['ndcg@10']:.4f} R@1={row['recall@1']:.4f} "
              f"{by_position}")
    output.write_text(json.dumps({"summary": summary, "scores": scored}, indent=1))


def main() -> None:
    """Command line: prepare | run | score."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    prep = commands.add_parser("prepare", help="build the carry folder (here)")
    prep.add_argument("--carry", type=Path, default=CARRY)
    prep.add_argument("--model", default=None, help="base model folder or hub id (default: all-MiniLM-L6-v2)")
    prep.add_argument("--sets", nargs="+", choices=list(SETS), default=DEFAULT_SETS)
    prep.add_argument("--train", nargs="+", choices=list(TRAIN_SETS), default=["manpages-train"],
                      help="training sets joined into the carried pairs")
    go = commands.add_parser("run", help="fine-tune and rank (on the device)")
    go.add_argument("--carry", type=Path, default=CARRY)
    go.add_argument("--out", type=Path, required=True)
    go.add_argument("--max-steps", type=int, default=600)
    go.add_argument("--max-seconds", type=float, default=240.0, help="training time budget")
    go.add_argument("--batch-size", type=int, default=64)
    go.add_argument("--batch-tokens", type=int, default=65536,
                    help="most padded tokens of activations held at once (micro-batches above it); 0: no bound")
    go.add_argument("--hard-negatives", type=int, default=1)
    go.add_argument("--learning-rate", type=float, default=1e-4, help="AdamW peak learning rate")
    go.add_argument("--sets", nargs="+", choices=list(SETS), default=DEFAULT_SETS)
    go.add_argument("--encode-batch-size", type=int, default=256)
    go.add_argument("--limit-queries", type=int, default=None, help="tiny CPU test: cap queries and docs per set")
    go.add_argument("--return-model", action="store_true", help="write the fine-tuned model to OUT (float16 parts)")
    sc = commands.add_parser("score", help="score fetched run files (here)")
    sc.add_argument("runs", type=Path)
    sc.add_argument("--output", type=Path, default=REPO / "benchmarks" / "results" / "finetune_gpu.json")
    args = parser.parse_args()
    if args.command == "prepare":
        prepare(args.carry, args.model, args.sets, args.train)
    elif args.command == "run":
        run(args.carry, args.out, args.max_steps, args.max_seconds, args.batch_size, args.batch_tokens or None,
            args.hard_negatives, args.learning_rate, args.sets, args.encode_batch_size, args.limit_queries,
            args.return_model)
    else:
        score(args.runs, args.output)


if __name__ == "__main__":
    main()
