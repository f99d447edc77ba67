"""benchmarks/gpu_finetune.py's two halves that meet here: the fine-tuned model comes back from the device as
float16 tar parts that join to the same weights, and ``score`` scores run files of document ids (no scores) with the
eval harness against the local qrels. The device run itself needs the GPU and is not tested here."""

from __future__ import annotations

import gzip
import json
import shutil
import tarfile
from pathlib import Path

import pytest
import torch


@pytest.fixture(scope="module")
def gpu_finetune(benchmark_script):
    """benchmarks/gpu_finetune.py imported as a module."""
    return benchmark_script("gpu_finetune")


def test_the_model_comes_back_in_parts_that_join_to_its_float16_weights(gpu_finetune, tiny_model: Path,
                                                                        tmp_path: Path, monkeypatch) -> None:
    from transformers import AutoModel

    trained = tmp_path / "trained"
    shutil.copytree(tiny_model, trained)
    (trained / "lmk_model.json").write_text(json.dumps({"lmk_trained": True, "chunk_vector": "mean"}))
    (trained / "train_log.jsonl").write_text('{"step": 1}\n')
    monkeypatch.setattr(gpu_finetune, "PART_BYTES", 200_000)  # the tiny model's ~1 MB: several parts
    out = tmp_path / "out"
    out.mkdir()
    gpu_finetune._return_model(trained, out)

    parts = sorted(out.glob("model.tar.part*"), key=lambda path: int(path.name.removeprefix("model.tar.part")))
    assert len(parts) >= 3
    assert all(path.stat().st_size <= 200_000 for path in parts)
    joined = tmp_path / "model.tar"
    joined.write_bytes(b"".join(path.read_bytes() for path in parts))
    with tarfile.open(joined) as tar:
        tar.extractall(tmp_path / "joined", filter="data")
    back = tmp_path / "joined" / "finetuned"
    assert json.loads((back / "lmk_model.json").read_text())["chunk_vector"] == "mean"
    assert not (back / "train_log.jsonl").exists()
    assert (back / "tokenizer.json").exists()
    original = AutoModel.from_pretrained(trained).state_dict()
    returned = AutoModel.from_pretrained(back).state_dict()
    assert returned.keys() == original.keys()
    for name, weight in original.items():
        assert returned[name].dtype == torch.float16, name
        assert torch.equal(returned[name], weight.to(torch.float16)), name


def test_score_reads_run_files_of_document_ids(gpu_finetune, tmp_path: Path) -> None:
    from lmk_rag.eval.beir import load_beir

    name = "perlfaq-answers"  # shipped with the repo, so no ../shared
    dataset = load_beir(gpu_finetune.PERL_DATA / name, name=name)
    ideal = {query: sorted((doc for doc, grade in dataset.qrels[query].items() if grade > 0),
                           key=lambda doc: -dataset.qrels[query][doc]) for query in dataset.query_ids}
    perfect = {query: ideal[query] + [doc for doc in dataset.doc_ids if doc not in ideal[query]][:50]
               for query in dataset.query_ids}
    missing = {query: [doc for doc in dataset.doc_ids if doc not in dataset.qrels[query]][:100]
               for query in dataset.query_ids}
    entry = {"max_queries": None, "max_docs": None, "docs": len(dataset.doc_ids)}
    runs = {"summary": {"steps": 3, "train_seconds": 1.0, "hardware": "test"},
            "runs": {f"{name}|finetuned|perfect": {**entry, "run": perfect},
                     f"{name}|zero-shot|missing": {**entry, "run": missing}}}
    runs_file = tmp_path / "runs.json.gz"
    with gzip.open(runs_file, "wt", encoding="utf-8") as handle:
        json.dump(runs, handle)
    output = tmp_path / "scores.json"

    gpu_finetune.score(runs_file, output)

    scores = json.loads(output.read_text())["scores"]
    assert scores[f"{name}|finetuned|perfect"]["ndcg@10"] == pytest.approx(1.0)
    assert scores[f"{name}|finetuned|perfect"]["recall@1"] == pytest.approx(1.0)
    assert scores[f"{name}|zero-shot|missing"]["ndcg@10"] == 0.0
    assert scores[f"{name}|finetuned|perfect"]["queries"] == len(dataset.query_ids)


def test_prepare_joins_the_training_sets_and_carries_the_eval_sets(gpu_finetune, tmp_path: Path) -> None:
    carry = tmp_path / "carry"
    gpu_finetune.prepare(carry, None, ["perlfaq-answers"], ["perldoc-train", "faq-train"])  # shipped: no ../shared

    pairs = [json.loads(line) for line in (carry / gpu_finetune.TRAIN_PAIRS).read_text().splitlines()]
    shipped = sum(len(path.read_text().splitlines()) for name in ("perldoc-train", "faq-train")
                  for path in gpu_finetune.TRAIN_SETS[name])
    assert len(pairs) == shipped > 800
    assert all(pair["query"] and pair["positive"] for pair in pairs)
    assert (carry / "data" / "perlfaq-answers" / "queries.jsonl").is_file()
    assert (carry / "site" / "platformdirs" / "__init__.py").is_file()
    config = json.loads((carry / gpu_finetune.BASE_MODEL / "config.json").read_text())
    assert config["torch_dtype" if "torch_dtype" in config else "dtype"] == "float16"

