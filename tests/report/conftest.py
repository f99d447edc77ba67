"""Fixtures for the tests of benchmarks/: its scripts and the research studies in benchmarks/studies/."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
STUDIES = BENCHMARKS / "studies"


@pytest.fixture(scope="session")
def benchmark_script() -> Callable[[str], ModuleType]:
    """Import ``benchmarks/NAME.py`` as a module by its name (``"report"``; benchmarks/ is not a package), registered
    in ``sys.modules``."""

    def load(name: str) -> ModuleType:
        spec = importlib.util.spec_from_file_location(f"lmk_rag_benchmark_{name}", BENCHMARKS / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        return module

    return load


@pytest.fixture(scope="session")
def study_module() -> Iterator[Callable[[str], ModuleType]]:
    """Import a module of benchmarks/studies/ by its name (``"common"``, ``"score_study"``) with that folder on
    ``sys.path``, as ``python benchmarks/studies/NAME.py`` imports ``common``."""
    sys.path.insert(0, str(STUDIES))
    try:
        yield importlib.import_module
    finally:
        sys.path.remove(str(STUDIES))
