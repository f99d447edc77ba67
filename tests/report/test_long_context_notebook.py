"""notebooks/long_context_eval.ipynb runs top to bottom, offline, in a fresh kernel, and plots."""

from __future__ import annotations

from pathlib import Path

import pytest

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "long_context_eval.ipynb"


@pytest.mark.slow
def test_long_context_notebook_runs(fixture_data: Path) -> None:
    import nbformat
    from nbclient import NotebookClient

    notebook = nbformat.read(NOTEBOOK, as_version=4)
    setup = f"import os\nos.environ['LMK_RAG_DATA'] = {str(fixture_data)!r}\n"  # the 10-query slice shipped in tests/
    notebook.cells[1].source = setup + notebook.cells[1].source
    NotebookClient(notebook, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(NOTEBOOK.parent)}}).execute()
    outputs = [output for cell in notebook.cells if cell.cell_type == "code" for output in cell.outputs]
    assert not [output for output in outputs if output.output_type == "error"]
    printed = "".join(output.get("text", "") for output in outputs)
    assert "manpages-needle/L2048: 10 queries, 10 documents" in printed
    for name in ("bm25", "mean", "maxsim-chunkmean", "lmk-rag"):
        assert f"\n{name} {{" in printed  # one recall@1-by-position line per pipeline
    assert any("image/png" in output.get("data", {}) for output in outputs)  # the position plot
