"""notebooks/quickstart.ipynb runs top to bottom, offline, in a fresh kernel."""

from __future__ import annotations

import shutil
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "quickstart.ipynb"


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("man") is None, reason="the quick start renders manual pages with man")
def test_quickstart_notebook_runs(tmp_path: Path) -> None:
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    resources = {"metadata": {"path": str(tmp_path)}}
    NotebookClient(notebook, timeout=300, kernel_name="python3", resources=resources).execute()
    printed = "".join(
        output.get("text", "") for cell in notebook.cells if cell.cell_type == "code" for output in cell.outputs
    )
    assert "second run: 0 nodes written" in printed
    assert "matched chunk: chars" in printed and ", chunk)" in printed  # each hit's evidence
    shown = [output["data"]["text/html"] for cell in notebook.cells if cell.cell_type == "code"
             for output in cell.outputs if "text/html" in output.get("data", {})]
    assert len(shown) == 1 and shown[0].count("<mark>") == 1  # the best hit, its passage highlighted
    assert " passages, " in printed and " tokens sent to the LLM" in printed
