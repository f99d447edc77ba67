"""Fixtures for the fine-tuning tests: real training pairs (the tiny random BERT is in tests/conftest.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def pairs_file(tmp_path_factory: pytest.TempPathFactory, fixture_data: Path) -> Path:
    """The first 40 real training pairs (manpages-train) as a pairs JSONL file."""
    with open(fixture_data / "manpages-train" / "pairs.jsonl", encoding="utf-8") as handle:
        rows = [json.loads(next(handle)) for _ in range(40)]
    path = tmp_path_factory.mktemp("pairs") / "pairs.jsonl"
    path.write_text("".join(json.dumps({"query": row["query"], "positive": row["positive"]}) + "\n" for row in rows))
    return path


@pytest.fixture(autouse=True)
def one_torch_thread():
    """Tiny models run fastest on one thread; on a shared, busy CPU more threads mostly wait on each other."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
