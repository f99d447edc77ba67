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


@pytest.mark.parametrize(("value", "message"), [
    ("0", "error: batch_tokens must be an integer from 1 to"),
    ("32", "error: batch_tokens 32 is less than the model window of 64 tokens: give at least 64"),
])
def test_finetune_command_refuses_a_bad_token_budget(
    value: str, message: str, pairs_file: Path, tiny_model: Path, tmp_path: Path
) -> None:
    result = CliRunner().invoke(app, [
        "finetune", "--train", str(pairs_file), "--output", str(tmp_path / "o"), "--model", str(tiny_model),
        "--batch-tokens", value, "--device", "cpu",
    ])
    assert result.exit_code == 1
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]  # beside the loading bar
    assert len(errors) == 1 and errors[0].startswith(message) and "Traceback" not in result.output, result.output
    assert not (tmp_path / "o").exists()
