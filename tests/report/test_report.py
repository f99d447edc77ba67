"""benchmarks/report.py writes the quality table and the needle-position plots from real eval runs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from lmk_rag.errors import InvalidInputError

L2048, L8192 = "manpages-needle/L2048", "manpages-needle/L8192"


@pytest.fixture(scope="module")
def report(benchmark_script):
    """benchmarks/report.py imported as a module."""
    return benchmark_script("report")


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
def test_report_writes_tables_intervals_and_plots_from_a_real_run(report, fixture_data: Path, tmp_path: Path) -> None:
    out = tmp_path / "results"
    written = report.main(["--only", L2048, "--size", f"{L2048}=6,6", "--pipelines", "bm25,lmk-rag-alpha1,lmk-rag",
                           "--data", str(fixture_data), "--cache-dir", str(tmp_path / "cache"), "--out", str(out)])
    assert {path.name for path in written} == {"quality.md", "quality.json", *report.PLOT_METRICS.values()}
    markdown = (out / "quality.md").read_text()
    assert f"| pipeline | {L2048} | mean |" in markdown
    assert f"Subsampled**, seed 0: {L2048} 6 queries / 6 docs" in markdown  # the subsample is stated
    assert "CPU cores" in markdown
    runs = {run["label"]: run for run in json.loads((out / "quality.json").read_text())}
    rows = _table_rows(markdown.split("## Recall@1")[0])
    assert list(rows) == ["bm25", "lmk-rag-alpha1", "lmk-rag"]
    for label, cells in rows.items():
        value, low, high = (float(x) for x in cells[0].replace("[", "").replace("]", "").replace(",", "").split())
        assert value == pytest.approx(runs[label]["ndcg@10"], abs=5e-4) and low <= value <= high
        assert cells[1] == f"{runs[label]['ndcg@10']:.3f}"  # one set: the mean is the set's value
        assert len(runs[label]["per_query"]) == 6 and set(runs[label]["positions"].values()) <= {0, 0.25, 0.5, 0.75, 1}
    assert "| lmk-rag - bm25 |" in markdown and "| lmk-rag - lmk-rag-alpha1 |" in markdown
    width, height = _png_size(out / report.PLOT_METRICS["ndcg@10"])
    assert (width, height) == (round(report.DPI * (report.PANEL_INCHES + report.LEGEND_INCHES)),
                               round(report.DPI * (report.PANEL_INCHES - 1)))


@pytest.mark.slow
def test_report_has_one_panel_per_needle_length_and_one_column_per_set(report, fixture_data: Path,
                                                                        tmp_path: Path) -> None:
    cells = [report.Cell(folder, 4, 4, "bm25") for folder in (L2048, L8192, "manpages-short")]
    reports = [report.evaluate_cell(cell, fixture_data, tmp_path / "cache") for cell in cells]
    report.write_report(reports, tmp_path, "python benchmarks/report.py")
    header = next(line for line in (tmp_path / "quality.md").read_text().splitlines() if line.startswith("| pipeline"))
    assert header == f"| pipeline | {L2048} | {L8192} | manpages-short | mean |"
    width, _ = _png_size(tmp_path / report.PLOT_METRICS["recall@1"])
    assert width == round(report.DPI * (2 * report.PANEL_INCHES + report.LEGEND_INCHES))  # short has no positions


def test_intervals_cover_the_mean_and_pairing_removes_shared_noise(benchmark_script) -> None:
    intervals = benchmark_script("intervals")  # benchmarks/intervals.py
    bootstrap_interval, paired_difference = intervals.bootstrap_interval, intervals.paired_difference

    rng = np.random.default_rng(0)
    a = rng.random(300)
    low, high = bootstrap_interval(a)
    assert low < a.mean() < high and high - low < 0.1
    b = a - 0.02 + rng.normal(0, 0.01, 300)  # b tracks a, 0.02 lower: paired, the difference is clear
    diff, low, high = paired_difference(a, b)
    assert diff == pytest.approx(0.02, abs=0.003) and 0 < low < high
    with pytest.raises(ValueError):
        paired_difference(a, b[:10])


def _fake_run(label: str, dataset: str, values: list[float]) -> dict:
    """A report of one pipeline on one set with the given per-query nDCG@10."""
    per_query = {f"q{i}": {"ndcg@10": v, "recall@1": v} for i, v in enumerate(values)}
    return {"label": label, "pipeline": label, "dataset": dataset, "ndcg@10": float(np.mean(values)),
            "recall@1": float(np.mean(values)), "per_query": per_query, "queries": len(values), "docs": 9,
            "max_queries": None, "max_docs": None, "model": "m", "date": "2026-11-30"}


def test_the_product_is_paired_with_the_best_stock_pipeline_of_each_set(report) -> None:
    rng = np.random.default_rng(0)
    base = rng.random(200)
    runs = [_fake_run("lmk-rag", "a", list(base)), _fake_run("lmk-rag", "b", list(base)),
            _fake_run("bm25", "a", list(base - 0.10)), _fake_run("llamaindex-fused", "a", list(base - 0.02)),
            _fake_run("bm25", "b", list(base - 0.01)), _fake_run("llamaindex-fused", "b", list(base - 0.30))]
    rows = _table_rows(report.differences(runs))
    best_a, best_b = rows[f"{report.PRODUCT} - {report.BEST_STOCK}"]
    assert best_a.startswith("+0.020 ") and best_a.endswith("(llamaindex-fused)")
    assert best_b.startswith("+0.010 ") and best_b.endswith("(bm25)")
    assert rows["lmk-rag - bm25"][0].startswith("+0.100 ")


@pytest.mark.slow
def test_resume_keeps_earlier_runs_and_runs_only_the_missing_cells(report, fixture_data: Path, tmp_path: Path) -> None:
    out, size = tmp_path / "results", f"{L2048}=6,6"
    common = ["--only", L2048, "--size", size, "--data", str(fixture_data), "--cache-dir", str(tmp_path / "cache"),
              "--out", str(out)]
    report.main([*common, "--pipelines", "bm25"])
    runs = json.loads((out / "quality.json").read_text())
    runs[0]["ndcg@10"], runs[0]["date"] = 0.123456, "2026-01-02"  # a run from an earlier day, told apart by value
    runs.append(_fake_run("other-pipeline", "another-set", [0.5, 0.5]))  # a cell of another report: kept as is
    (out / "quality.json").write_text(json.dumps(runs))
    report.main([*common, "--pipelines", "bm25,llamaindex-chunked-bm25", "--resume"])
    after = {(run["label"], run["dataset"]): run for run in json.loads((out / "quality.json").read_text())}
    assert after["bm25", L2048]["ndcg@10"] == 0.123456  # kept, not rerun
    assert after["llamaindex-chunked-bm25", L2048]["date"] != "2026-01-02"  # the missing cell ran
    assert ("other-pipeline", "another-set") in after
    markdown = (out / "quality.md").read_text()
    assert f"Kept from earlier reports (`--resume`): 2026-01-02: bm25 on {L2048}; 2026-11-30: other-pipeline on " \
           "another-set." in markdown
    runs = [*after.values(), _fake_run("llamaindex-fused", L2048, [0.1] * 6) | {"max_queries": 6, "max_docs": 6}]
    (out / "quality.json").write_text(json.dumps(runs))
    with pytest.raises(InvalidInputError, match="unknown pipeline"):  # interrupted at its second cell
        report.main([*common, "--pipelines", "bm25,no-such-pipeline,llamaindex-fused", "--resume"])
    left = {(run["label"], run["dataset"]) for run in json.loads((out / "quality.json").read_text())}
    assert ("llamaindex-fused", L2048) in left  # a planned cell not reached yet keeps its earlier run


def test_perldoc_sets_are_read_from_the_repository(report, tmp_path: Path) -> None:
    assert report.set_folder("perldoc-ref", tmp_path) == report.SHIPPED_DATA / "perldoc-ref"
    assert (report.set_folder("perldoc-longdoc", tmp_path) / "corpus.jsonl.gz").is_file()
    assert report.set_folder("manpages-short", tmp_path) == tmp_path / "manpages-short"


def test_render_lays_out_kept_runs_in_report_order(report, tmp_path: Path) -> None:
    runs = [_fake_run(label, dataset, [0.5, 0.7]) for dataset in ("perldoc-ref", "manpages-short")
            for label in ("lmk-rag", "bm25")]
    (tmp_path / "quality.json").write_text(json.dumps(runs))
    report.main(["--render", "--out", str(tmp_path)])
    markdown = (tmp_path / "quality.md").read_text()
    assert "| pipeline | manpages-short | perldoc-ref | mean |" in markdown
    assert list(_table_rows(markdown.split("## Recall@1")[0])) == ["bm25", "lmk-rag"]


@pytest.mark.slow
def test_the_tuned_stock_row_is_llamaindex_fused_at_its_best_weight(report, fixture_data: Path, tmp_path: Path) -> None:
    from lmk_rag.eval.beir import load_beir
    from lmk_rag.eval.pipelines import PipelineOptions
    from lmk_rag.eval.run import evaluate
    from lmk_rag.eval.sample import subsample

    dataset = subsample(load_beir(fixture_data / "manpages-short"), 12, 30, seed=0)
    options = PipelineOptions(cache_dir=tmp_path / "cache")
    tuned = report.evaluate_tuned(dataset, options)
    assert set(tuned["weights"]) == {str(weight) for weight in report.TUNED_WEIGHTS}
    assert tuned["ndcg@10"] == pytest.approx(max(tuned["weights"].values()), abs=1e-4)
    assert list(tuned["per_query"]) == dataset.query_ids
    # the chosen weight is llamaindex-fused's own result at that weight, run through the eval harness
    fixed = evaluate(dataset, "llamaindex-fused", PipelineOptions(cache_dir=tmp_path / "cache",
                                                                  encoder={"weight": tuned["weight"]}))
    assert fixed["ndcg@10"] == pytest.approx(tuned["ndcg@10"], abs=1e-9)

