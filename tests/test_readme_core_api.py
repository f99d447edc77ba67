"""The core-API block of README.md runs exactly as written (a real MiniLM encoder and a real Qdrant Edge store)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def test_core_api_block_runs_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    section = README.read_text(encoding="utf-8").split("## The core API", 1)[1]
    block = re.search(r"```python\n(.*?)```", section, flags=re.S).group(1)
    assert "LandmarkStore(path=" in block
    monkeypatch.chdir(tmp_path)
    exec(compile(block, str(README), "exec"), {"__name__": "readme_core_api"})
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "(384,)" and re.fullmatch(r"\(\d+, 384\)", lines[1])
    assert lines[3].split()[0] == "tar.txt"  # the archive question finds tar
    assert (tmp_path / "lmk_store").is_dir()
