"""The installed packages are exactly the versions of requirements/lock.txt (what `make test` installs with -c)."""

from __future__ import annotations

import re
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / "requirements" / "lock.txt"
PYPROJECT = ROOT / "pyproject.toml"
#: What the benchmarks and the studies need beyond the package (`make install` installs them too).
BENCH_REQUIREMENTS = [ROOT / "benchmarks" / "requirements.txt", ROOT / "benchmarks" / "studies" / "requirements.txt"]
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)")


def _pins() -> dict[str, str]:
    pins = {}
    for line in LOCK.read_text().splitlines():
        match = PIN.match(line)
        if match:
            pins[match.group(1)] = match.group(2)
    return pins


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _declared() -> set[str]:
    """Every package pyproject's extras name (the dev extra installs all of them), lmk-rag itself left out, and every
    package the benchmarks' requirements files name."""
    extras = tomllib.loads(PYPROJECT.read_text())["project"]["optional-dependencies"]
    requirements = [requirement for listed in extras.values() for requirement in listed]
    for path in BENCH_REQUIREMENTS:
        requirements += [line for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")]
    names = {_normalise(re.match(r"[A-Za-z0-9._-]+", requirement).group(0)) for requirement in requirements}
    return names - {"lmk-rag"}


def test_the_lock_pins_every_direct_dependency_and_the_cpu_torch() -> None:
    pins = {_normalise(name) for name in _pins()}
    assert _pins()["torch"] == "2.13.0+cpu"
    assert not [name for name in pins if name.startswith("nvidia-")], "the lock holds CUDA packages"
    assert not _declared() - pins, f"declared but not locked: {sorted(_declared() - pins)}"
    assert "lmk-rag" not in pins and "file://" not in LOCK.read_text()


def test_every_installed_version_equals_its_pin() -> None:
    wrong = []
    for name, pinned in _pins().items():
        try:
            installed = version(name)
        except PackageNotFoundError:
            installed = "not installed"
        if installed != pinned:
            wrong.append(f"{name}: {installed}, pinned {pinned}")
    assert not wrong, f"the venv differs from {LOCK.name} (run `make install`): " + "; ".join(wrong)
