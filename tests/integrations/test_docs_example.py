"""The LlamaIndex quick start of README.md and docs/llamaindex.md runs exactly as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from llama_index.core import Settings

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("doc", [ROOT / "README.md", ROOT / "docs" / "llamaindex.md"], ids=["README", "llamaindex.md"])
def test_quick_start_runs_as_written(doc: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    blocks = re.findall(r"```python\n(.*?)```", doc.read_text(encoding="utf-8"), flags=re.S)
    assert "Settings.embed_model = LandmarkEmbedding(" in blocks[0]
    monkeypatch.chdir(tmp_path)
    previous = Settings._embed_model, Settings._llm
    try:
        exec(compile(blocks[0], str(doc), "exec"), {"__name__": "docs_example"})
    finally:
        Settings._embed_model, Settings._llm = previous
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[1] == "gzip"
    assert (tmp_path / "lmk_store").is_dir()
