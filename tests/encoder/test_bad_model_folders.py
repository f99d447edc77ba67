"""Model folders that exist but cannot be loaded: each is a typed :class:`~lmk_rag.errors.ModelLoadError` naming the
folder, and a checkpoint that would run code is refused without running it. The folders are the real MiniLM
files (the weights linked, not copied) with one part damaged."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from lmk_rag.encoder import LandmarkEncoder, resolve_model_path
from lmk_rag.errors import ModelLoadError


def _garbage_config(folder: Path) -> None:
    (folder / "config.json").write_text("{not json")


def _no_weights(folder: Path) -> None:
    (folder / "model.safetensors").unlink()


def _garbage_marker(folder: Path) -> None:
    (folder / "lmk_model.json").write_text("{bad")


def _marker_not_an_object(folder: Path) -> None:
    (folder / "lmk_model.json").write_text("[1, 2]")


def _pickle_that_runs_code(folder: Path) -> None:
    import torch

    class Payload:
        def __reduce__(self):
            return (os.system, ("touch " + str(folder / "pwned"),))

    (folder / "model.safetensors").unlink()
    torch.save({"evil": Payload()}, folder / "pytorch_model.bin")


@pytest.mark.parametrize("damage, words", [
    (_garbage_config, "config.json"), (_no_weights, "no file named model.safetensors"),
    (_garbage_marker, "unreadable LMK model marker"), (_marker_not_an_object, "must be a JSON object"),
    (_pickle_that_runs_code, "Weights only load failed"),
], ids=lambda value: value.__name__.strip("_") if callable(value) else "")
def test_a_damaged_model_folder_is_a_typed_error(tmp_path: Path, damage: Callable[[Path], None], words: str) -> None:
    source, folder = resolve_model_path(None), tmp_path / "model"
    shutil.copytree(source, folder, ignore=shutil.ignore_patterns("model.safetensors"))
    (folder / "model.safetensors").symlink_to(source / "model.safetensors")
    damage(folder)
    with pytest.raises(ModelLoadError, match=words) as caught:
        LandmarkEncoder(model_name=folder)
    assert str(folder) in str(caught.value)
    assert not (folder / "pwned").exists()
