"""``lmk-rag finetune`` end to end on a tiny random model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lmk_rag.cli import app


@pytest.mark.slow
def test_finetune_command_writes_an_lmk_trained_model(pairs_file: Path, tiny_model: Path, tmp_path: Path) -> None:
    output = tmp_path / "tuned"
    result = CliRunner().invoke(app, [
        "finetune", "--train", str(pairs_file), "--output", str(output), "--model", str(tiny_model),
        "--max-steps", "2", "--batch-size", "4", "--eval-every", "0", "--device", "cpu",
    ])
    assert result.exit_code == 0, result.output
    assert '"steps": 2' in result.output
    assert json.loads((output / "lmk_model.json").read_text())["lmk_trained"] is True
    assert not (output / "lmk_rag.json").exists()  # the store's settings file name
    assert (output / "model.safetensors").is_file() and (output / "tokenizer.json").is_file()


def test_finetune_command_names_missing_training_data(tiny_model: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(app, [
        "finetune", "--train", str(tmp_path / "nope.jsonl"), "--output", str(tmp_path / "o"),
        "--model", str(tiny_model), "--device", "cpu",
    ])
    assert result.exit_code == 1
    assert "error:" in result.output and "nope.jsonl" in result.output
