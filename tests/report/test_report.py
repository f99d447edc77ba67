"""benchmarks/report.py writes the quality table and the needle-position plots from real eval runs."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

REPORT = Path(__file__).resolve().parents[2] / "benchmarks" / "report.py"
L2048, L8192 = "manpages-needle/L2048", "manpages-needle/L8192"


@pytest.fixture(scope="module")
def report():
    """benchmarks/report.py imported as a module (benchmarks/ is not a package)."""
    spec = importlib.util.spec_from_file_location("lmk_rag_benchmark_report", REPORT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _png_size(path: Path) -> tuple[int, int]:
    """Width and height from a PNG header (asserting the file is a PNG)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def _table_rows(markdown: str) -> dict[str, list[str]]:
    """The quality table's body rows: pipeline label -> cells."""
    rows = [line.strip("|").split(" | ") for line in markdown.splitlines() if line.startswith("| ")]
    return {cells[0].strip(): [cell.strip() for cell in cells[1:]] for cells in rows[1:]}


@pytest.mark.slow
def test_report_writes_table_and_plots_from_a_real_run(report, data_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "results"
    written = report.main(["--only", L2048, "--size", f"{L2048}=5,5", "--pipelines", "bm25,maxsim-chunkmean",
                           "--data", str(data_dir), "--cache-dir", str(tmp_path / "cache"), "--out", str(out)])
    assert {path.name for path in written} == {"quality.md", "quality.json", *report.PLOT_METRICS.values()}
    markdown = (out / "quality.md").read_text()
    assert f"| pipeline | {L2048} | mean |" in markdown
    assert f"{L2048} 5 queries / 5 docs" in markdown  # the subsample is stated
    assert "2 CPU cores" in markdown or "CPU cores" in markdown
    runs = {run["label"]: run for run in json.loads((out / "quality.json").read_text())}
    rows = _table_rows(markdown)
    assert list(rows) == ["bm25", "maxsim-chunkmean"]
    for label, cells in rows.items():
        assert cells[0] == cells[1] == f"{runs[label]['ndcg@10']:.3f}"  # one set: the mean is the set's value
        assert runs[label]["queries"] == 5 and runs[label]["docs"] == 5
        assert set(runs[label]["by_position"]) <= {"0.0", "0.25", "0.5", "0.75", "1.0"}
    width, height = _png_size(out / report.PLOT_METRICS["ndcg@10"])
    assert (width, height) == (round(report.DPI * (report.PANEL_INCHES + report.LEGEND_INCHES)),
                               round(report.DPI * (report.PANEL_INCHES - 1)))


@pytest.mark.slow
def test_report_has_one_panel_per_needle_length_and_one_column_per_set(report, data_dir: Path,
                                                                        tmp_path: Path) -> None:
    cells = [report.Cell(folder, 4, 4, "bm25") for folder in (L2048, L8192, "manpages-short")]
    reports = [report.evaluate_cell(cell, data_dir, tmp_path / "cache") for cell in cells]
    report.write_report(reports, tmp_path, "python benchmarks/report.py")
    header = next(line for line in (tmp_path / "quality.md").read_text().splitlines() if line.startswith("| pipeline"))
    assert header == f"| pipeline | {L2048} | {L8192} | manpages-short | mean |"
    width, _ = _png_size(tmp_path / report.PLOT_METRICS["recall@1"])
    assert width == round(report.DPI * (2 * report.PANEL_INCHES + report.LEGEND_INCHES))  # short has no positions


@pytest.mark.slow
def test_rerank_mode_pipelines_run_the_store_in_that_mode(report, data_dir: Path, tmp_path: Path) -> None:
    for pipeline, rerank in (("lmk-rag-static", "static"), ("lmk-rag-norerank", "none")):
        run = report.evaluate_cell(report.Cell(L2048, 3, 3, pipeline), data_dir, tmp_path / "cache")
        assert run["encoder"]["rerank"] == rerank and run["encoder"]["bm25"] is True
        assert run["queries"] == 3 and 0.0 < run["ndcg@10"] <= 1.0 and run["recall@100"] == 1.0
