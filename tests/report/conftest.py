"""Fixtures for the tests of the research studies in benchmarks/studies/."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest

STUDIES = Path(__file__).resolve().parents[2] / "benchmarks" / "studies"


@pytest.fixture(scope="session")
def study_module() -> Iterator[Callable[[str], ModuleType]]:
    """Import a module of benchmarks/studies/ by its name (``"common"``, ``"score_study"``) with that folder on
    ``sys.path``, as ``python benchmarks/studies/NAME.py`` imports ``common``."""
    sys.path.insert(0, str(STUDIES))
    try:
        yield importlib.import_module
    finally:
        sys.path.remove(str(STUDIES))
