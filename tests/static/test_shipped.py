"""The static model and the mixer that ship with the package: small, git-tracked, loaded by default, and the mixer
beats raw static MaxSim on a real sample (the first 60 needle queries of L512, never used to select it)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from lmk_rag.eval.beir import load_beir
from lmk_rag.eval.pipelines import PipelineOptions
from lmk_rag.eval.run import evaluate
from lmk_rag.paths import CACHE_ENV
from lmk_rag.static import StaticTokenEncoder, load_static_vectors
from lmk_rag.static.mixer import (
    CONFIG_FILE,
    SHIPPED_MIXER_DIR,
    WEIGHTS_FILE,
    MixerWeights,
    default_mixer_dir,
    mixer_folder,
    user_mixer_dir,
)
from lmk_rag.static.model import SHIPPED_MODEL_DIR

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture()
def fresh_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty lmk_rag cache, as on a fresh install: no distilled model, no trained mixer."""
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_package_data_is_small_and_tracked_by_git() -> None:
    files = sorted([*SHIPPED_MODEL_DIR.iterdir(), *SHIPPED_MIXER_DIR.iterdir()])
    listed = subprocess.run(["git", "ls-files", "--error-unmatch", *map(str, files)], cwd=REPO,
                            capture_output=True, text=True)
    assert listed.returncode == 0, listed.stderr
    assert sum(f.stat().st_size for f in SHIPPED_MODEL_DIR.iterdir()) < 20 * 2**20
    assert sum(f.stat().st_size for f in SHIPPED_MIXER_DIR.iterdir()) < 2**20
    pyproject = (REPO / "pyproject.toml").read_text()
    assert '"lmk_rag.static" = ["data/model/*", "data/mixer/*"]' in pyproject


def test_the_default_model_is_the_shipped_one(fresh_cache: Path) -> None:
    vectors = load_static_vectors()
    assert Path(vectors.source) == SHIPPED_MODEL_DIR and vectors.dim == 256
    assert vectors.embedding.shape == (29_525, 256)
    assert not fresh_cache.exists()  # nothing distilled, nothing cached


def test_the_default_mixer_is_the_shipped_one_until_the_user_trains_one(fresh_cache: Path) -> None:
    assert default_mixer_dir() == SHIPPED_MIXER_DIR == mixer_folder("default") == mixer_folder("shipped")
    shipped = MixerWeights.load(SHIPPED_MIXER_DIR)
    assert shipped.dim == 256 and sum(w.size for w in shipped.weights.values()) == 133_632
    user = user_mixer_dir()
    user.mkdir(parents=True)
    for name in (CONFIG_FILE, WEIGHTS_FILE):
        (user / name).write_bytes((SHIPPED_MIXER_DIR / name).read_bytes())
    assert default_mixer_dir() == user == mixer_folder("default")
    assert mixer_folder("shipped") == SHIPPED_MIXER_DIR


def test_the_shipped_mixer_was_trained_on_the_shipped_model_and_selected_on_held_out_pairs() -> None:
    record = json.loads((SHIPPED_MIXER_DIR / "training.json").read_text())
    assert record["static_fingerprint"] == StaticTokenEncoder(load_static_vectors()).fingerprint
    assert record["selection"]["set"].startswith("held-out pairs of") and record["selection"]["seed"] == 0
    scores = {row["step"]: row["score"] for row in record["history"]}
    assert scores[record["best_step"]] == max(scores.values()) > scores[0]


def test_the_shipped_mixer_beats_raw_maxsim_on_a_real_sample(fixture_data: Path, fresh_cache: Path) -> None:
    dataset = load_beir(fixture_data / "manpages-needle" / "L512-60q")
    assert len(dataset.query_ids) == 60
    raw = evaluate(dataset, "static-maxsim", PipelineOptions())
    mixed = evaluate(dataset, "static-mixer", PipelineOptions())
    assert Path(mixed["encoder"]["model"]) == SHIPPED_MODEL_DIR and mixed["encoder"]["mixer"] is not None
    assert mixed["ndcg@10"] > raw["ndcg@10"] + 0.01
