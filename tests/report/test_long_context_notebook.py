"""notebooks/long_context_eval.ipynb runs top to bottom, offline, in a fresh kernel, and plots."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "long_context_eval.ipynb"


def test_the_notebooks_name_no_folder_of_a_development_machine() -> None:
    for notebook in NOTEBOOK.parent.glob("*.ipynb"):
        source = notebook.read_text(encoding="utf-8")
        assert not re.search(r"\"/(work|home|Users|tmp)/", source), notebook.name


@pytest.mark.slow
def test_long_context_notebook_runs(fixture_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run as on a fresh clone without the dev sets: a copy in clone/notebooks/, beside clone/tests/fixtures/data,
    without LMK_RAG_DATA: the notebook finds the shipped 10-query slice by itself."""
    import nbformat
    from nbclient import NotebookClient

    clone = tmp_path / "clone"
    (clone / "notebooks").mkdir(parents=True)
    (clone / "tests" / "fixtures").mkdir(parents=True)
    (clone / "tests" / "fixtures" / "data").symlink_to(fixture_data)
    monkeypatch.delenv("LMK_RAG_DATA", raising=False)
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(notebook, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(clone / "notebooks")}}).execute()
    outputs = [output for cell in notebook.cells if cell.cell_type == "code" for output in cell.outputs]
    assert not [output for output in outputs if output.output_type == "error"]
    printed = "".join(output.get("text", "") for output in outputs)
    assert "manpages-needle/L2048: 10 queries, 10 documents" in printed
    for name in ("bm25", "mean", "maxsim-chunkmean", "lmk-rag"):
        assert f"\n{name} {{" in printed  # one recall@1-by-position line per pipeline
    assert any("image/png" in output.get("data", {}) for output in outputs)  # the position plot
