"""Training a linear projection on real MiniLM vectors of real training pairs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from lmk_rag.cli import app
from lmk_rag.encoder import LandmarkEncoder
from lmk_rag.errors import InvalidInputError
from lmk_rag.train.data import load_training_data
from lmk_rag.train.projection import EncodedPairs, ProjectionConfig, train_projection


@pytest.fixture(scope="module")
def encoded_pairs(pairs_file: Path) -> EncodedPairs:
    encoder = LandmarkEncoder(projection=None)
    pairs = [(pair.query, pair.positive) for pair in load_training_data(pairs_file)]
    return EncodedPairs(pairs, lambda texts: [text.chunk_vectors for text in encoder.encode_documents(texts)])


def test_the_fit_ranks_its_own_pairs_better_than_the_identity(encoded_pairs: EncodedPairs) -> None:
    rows = list(range(len(encoded_pairs.positive)))
    config = ProjectionConfig(epochs=15, batch_size=8, learning_rate=1e-2)
    result = train_projection(encoded_pairs, rows, rows, config, {"model_digest": "m", "chunk_vector": "mean"},
                           log=lambda line: None)
    identity = result.history[0]["heldout_mrr"]
    assert result.best_epoch > 0 and result.history[result.best_epoch]["heldout_mrr"] > identity
    assert [entry["epoch"] for entry in result.history] == list(range(16))
    assert not np.allclose(result.projection.weight, np.eye(result.projection.dim))
    assert result.projection.config["dim"] == 384 and result.projection.config["model_digest"] == "m"
    assert result.projection.config["training"]["best_epoch"] == result.best_epoch
    assert result.heldout_mrr > identity  # the projection is half the fit (mix 0.5), and still better than none


def test_the_mix_weighs_the_fit_against_the_identity(encoded_pairs: EncodedPairs) -> None:
    rows = list(range(len(encoded_pairs.positive)))

    def fitted(mix: float) -> np.ndarray:
        config = ProjectionConfig(epochs=2, batch_size=8, learning_rate=1e-2, mix=mix)
        return train_projection(encoded_pairs, rows, rows, config, {}, log=lambda line: None).projection.weight

    full, half, none = fitted(1.0), fitted(0.5), fitted(0.0)
    np.testing.assert_array_equal(none, np.eye(384, dtype=np.float32))
    np.testing.assert_allclose(half, (full + none) / 2, atol=1e-6)


def test_a_fit_needs_training_and_heldout_pairs_and_a_mix_in_range(encoded_pairs: EncodedPairs) -> None:
    with pytest.raises(InvalidInputError, match="training pairs and held-out pairs"):
        train_projection(encoded_pairs, [0, 1], [], ProjectionConfig(), {})
    with pytest.raises(InvalidInputError, match=r"mix must be in \[0, 1\]"):
        train_projection(encoded_pairs, [0, 1], [2], ProjectionConfig(mix=1.5), {})


@pytest.mark.slow
def test_train_projection_command_writes_a_projection_the_encoder_loads(pairs_file: Path, tmp_path: Path) -> None:
    output = tmp_path / "projection"
    result = CliRunner().invoke(app, ["train-projection", "--train", str(pairs_file), "--output", str(output),
                                      "--epochs", "2", "--batch-size", "8"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output.strip().splitlines()[-1])
    assert summary["heldout_mrr"] >= summary["identity_heldout_mrr"]
    encoder = LandmarkEncoder(projection=output)
    assert encoder.settings["projection"] == str(output)
    assert np.allclose(np.linalg.norm(encoder.encode_queries("compress a file").chunk_vectors, axis=1), 1.0)


@pytest.mark.parametrize(("option", "value", "match"), [("--batch-size", "0", "batch_size must be an integer"),
                                                        ("--learning-rate", "-1", "learning_rate must be"),
                                                        ("--l2", "nan", "l2 must be"), ("--mix", "1.5", "mix must be")])
def test_train_projection_command_refuses_bad_settings_before_encoding(pairs_file: Path, tmp_path: Path, option: str,
                                                                      value: str, match: str) -> None:
    result = CliRunner().invoke(app, ["train-projection", "--train", str(pairs_file), "--output", str(tmp_path / "o"),
                                      option, value])
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and match in lines[0]  # nothing encoded: no progress
    assert not (tmp_path / "o").exists()


def test_train_projection_command_names_missing_training_data(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["train-projection", "--train", str(tmp_path / "nope.jsonl"),
                                      "--output", str(tmp_path / "o")])
    assert result.exit_code == 1
    assert "error:" in result.output and "nope.jsonl" in result.output
