"""``lmk-rag distill-static`` and ``lmk-rag train-mixer`` end to end (real static model, tiny data)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from lmk_rag.cli import app
from lmk_rag.static import StaticTokenEncoder, StaticVectors, load_static_vectors

PAGES = {
    "kill": ("send signal to a process", "The kill() system call can be used to send any signal to any process."),
    "mmap": ("map files into memory", "The mmap() function creates a new mapping in the virtual address space."),
    "chmod": ("change file permissions", "The chmod() call changes the mode bits of a file: read, write, execute."),
    "nice": ("change process priority", "The nice() call adds inc to the nice value of the calling thread."),
}

NEIGHBOUR_WORDS = ["signal", "process", "memory", "file", "permission", "network", "archive", "compress"]


def _pairs(folder: Path) -> Path:
    path = folder / "pairs.jsonl"
    path.write_text("".join(json.dumps({"query": q, "positive": t}) + "\n" for q, t in PAGES.values()) * 3)
    return path


def _beir(folder: Path) -> Path:
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text("".join(json.dumps({"_id": k, "title": "", "text": t}) + "\n"
                                                 for k, (_, t) in PAGES.items()))
    (folder / "queries.jsonl").write_text("".join(json.dumps({"_id": "q" + k, "text": q}) + "\n"
                                                  for k, (q, _) in PAGES.items()))
    qrels = "".join(f"q{k}\t{k}\t1\n" for k in PAGES)
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + qrels)
    return folder


@pytest.mark.slow
def test_distill_static_reproduces_the_shipped_model(static_vectors, tmp_path) -> None:
    result = CliRunner().invoke(app, ["distill-static", "--output", str(tmp_path / "distilled")])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["folder"] == str(tmp_path / "distilled") and report["pca_dims"] == 256
    assert report["source"].endswith("model")  # the local all-MiniLM-L6-v2 folder
    distilled = load_static_vectors(report["folder"])
    # The same vocabulary and shapes; the vectors agree row by row up to the CPU's float kernels (PCA and the
    # forward passes differ in their last bits between AVX2 and AVX-512 machines, so no bit-exact hash).
    assert distilled.tokenizer.get_vocab() == static_vectors.tokenizer.get_vocab()
    assert distilled.embedding.shape == static_vectors.embedding.shape
    assert (distilled.weights is None) == (static_vectors.weights is None)
    if static_vectors.weights is not None:
        np.testing.assert_allclose(distilled.weights, static_vectors.weights, rtol=1e-3, atol=1e-5)
    cosines = np.sum(distilled.unit_table * static_vectors.unit_table, axis=1)
    assert cosines.min() >= 0.999, f"{int(np.sum(cosines < 0.999))} token vectors moved (min cosine {cosines.min()})"
    # and behave the same: every word of a fixed list has the same nearest tokens
    for word in NEIGHBOUR_WORDS:
        assert _nearest_tokens(distilled, word) == _nearest_tokens(static_vectors, word), word


def _nearest_tokens(vectors: StaticVectors, word: str, n: int = 3) -> list[str]:
    """The ``n`` tokens whose unit vectors are nearest to the first token of ``word``, excluding itself."""
    token_id = vectors.tokenizer.encode(word, add_special_tokens=False).ids[0]
    similarities = vectors.unit_table @ vectors.unit_table[token_id]
    similarities[token_id] = -np.inf
    return [vectors.tokenizer.id_to_token(int(i)) for i in np.argsort(-similarities, kind="stable")[:n]]


@pytest.mark.slow
def test_train_mixer_writes_a_loadable_mixer(static_vectors, tmp_path) -> None:
    out = tmp_path / "mixer"
    result = CliRunner().invoke(app, [
        "train-mixer", "--train", str(_pairs(tmp_path)), "--select-on", str(_beir(tmp_path / "beir")),
        "--output", str(out), "--objective", "contrastive", "--max-steps", "2", "--batch-size", "4",
        "--learning-rate", "0.002", "--eval-every", "1", "--select-queries", "0", "--select-docs", "0",
        "--heldout-fraction", "0.25",
    ])
    assert result.exit_code == 0, result.output
    assert "deprecated" not in result.stderr
    record = json.loads((out / "training.json").read_text())
    assert [row["step"] for row in record["history"]] == [0, 1, 2]
    assert all(0 <= row["score"] <= 1 for row in record["history"])
    assert record["parameters"] == 133_632
    assert record["static_fingerprint"] == StaticTokenEncoder(static_vectors).fingerprint
    encoder = StaticTokenEncoder(static_vectors, mixer=out)
    assert encoder.encode_query_tokens("send a signal").shape == (3, 256)


@pytest.mark.parametrize("old", ["--pairs", "--steps", "--lr", "--val-fraction"])
def test_train_mixer_refuses_the_old_spellings(old) -> None:
    result = CliRunner().invoke(app, ["train-mixer", "--train", "pairs.jsonl", old, "1"])
    assert result.exit_code == 2 and "No such option" in result.output, result.output
    assert "Missing option '--train'" in CliRunner().invoke(app, ["train-mixer"]).output


@pytest.mark.slow
def test_train_mixer_selects_on_held_out_pairs_by_default(static_vectors, fixture_data, tmp_path) -> None:
    out = tmp_path / "mixer"
    result = CliRunner().invoke(app, [
        "train-mixer", "--train", str(fixture_data / "manpages-train" / "pairs.jsonl"), "--output", str(out),
        "--objective", "contrastive", "--max-steps", "2", "--batch-size", "8", "--eval-every", "1",
        "--heldout-fraction", "0.2", "--seed", "3",
    ])
    assert result.exit_code == 0, result.output
    assert "held-out pairs" in result.stdout and "(20 queries, 20 docs)" in result.stdout
    record = json.loads((out / "training.json").read_text())
    assert record["selection"] == {"set": f"held-out pairs of {fixture_data / 'manpages-train' / 'pairs.jsonl'}",
                                   "queries": 20, "docs": 20, "seed": 3}
    assert [row["step"] for row in record["history"]] == [0, 1, 2] and record["config"]["seed"] == 3
    scores = {row["step"]: row["score"] for row in record["history"]}
    assert scores[record["best_step"]] == max(scores.values())


def test_train_mixer_needs_training_pairs(tmp_path) -> None:
    result = CliRunner().invoke(app, ["train-mixer", "--select-on", str(tmp_path)])
    assert result.exit_code == 2 and "--train" in result.output
