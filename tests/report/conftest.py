"""Fixtures for the tests of benchmarks/: its scripts and the research studies in benchmarks/studies/."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
STUDIES = BENCHMARKS / "studies"


def _importing_from(folder: Path) -> Iterator[Callable[[str], ModuleType]]:
    """``importlib.import_module`` with ``folder`` on ``sys.path`` until the session ends, as ``python
    folder/NAME.py`` runs a script: its neighbours import by name."""
    sys.path.insert(0, str(folder))
    try:
        yield importlib.import_module
    finally:
        sys.path.remove(str(folder))


@pytest.fixture(scope="session")
def benchmark_script() -> Iterator[Callable[[str], ModuleType]]:
    """Import a script of benchmarks/ by its name (``"report"``, ``"gpu_stock"``; benchmarks/ is not a package)."""
    yield from _importing_from(BENCHMARKS)


@pytest.fixture(scope="session")
def study_module() -> Iterator[Callable[[str], ModuleType]]:
    """Import a module of benchmarks/studies/ by its name (``"common"``, ``"score_study"``)."""
    yield from _importing_from(STUDIES)
