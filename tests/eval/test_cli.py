"""``lmk-rag eval``: the JSON report's keys, breakdowns on needle sets, the cache, and errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lmk_rag.cli import app
from lmk_rag.eval.metrics import METRIC_KEYS

KEYS = {"dataset", "pipeline", "model", "queries", "encode_s", "cached", "query_ms", *METRIC_KEYS}


def _eval(*args: str) -> dict:
    result = CliRunner().invoke(app, ["eval", *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_json_has_every_key_and_needle_breakdowns(fixture_data: Path, tmp_path: Path) -> None:
    report = _eval(str(fixture_data / "manpages-needle" / "L2048"), "--pipeline", "bm25", "--max-queries", "5",
                   "--max-docs", "10", "--cache-dir", str(tmp_path))
    assert set(report) >= KEYS
    assert report["dataset"] == "manpages-needle/L2048" and report["pipeline"] == "bm25"
    assert report["queries"] == 5 and report["docs"] == 10 and isinstance(report["queries"], int)
    assert isinstance(report["cached"], bool)
    assert list(report["by_length"]) == ["2048.0"]
    assert set(report["by_position"]) <= {"0.0", "0.25", "0.5", "0.75", "1.0"}
    for metrics in [*report["by_position"].values(), *report["by_length"].values()]:
        assert set(metrics) == set(METRIC_KEYS)
    assert report["by_length"]["2048.0"] == {key: report[key] for key in METRIC_KEYS}


def test_no_breakdowns_without_metadata(fixture_data: Path, tmp_path: Path) -> None:
    report = _eval(str(fixture_data / "manpages-short"), "-p", "bm25", "--max-queries", "5", "--max-docs", "20",
                   "--cache-dir", str(tmp_path))
    assert set(report) >= KEYS and "by_position" not in report and "by_length" not in report


@pytest.mark.slow
def test_encoder_run_is_cached_with_its_cold_time(fixture_data: Path, tmp_path: Path) -> None:
    args = [str(fixture_data / "manpages-needle" / "L512"), "-p", "maxsim-landmark", "--max-queries", "3",
            "--max-docs", "4", "--granularity", "64", "--cache-dir", str(tmp_path)]
    cold, warm = _eval(*args), _eval(*args)
    assert (cold["cached"], warm["cached"]) == (False, True)
    assert warm["encode_s"] == cold["encode_s"] > 0
    assert warm["encoder"]["granularity"] == 64 and warm["encoder"]["chunk_vector"] == "landmark"
    assert {key: warm[key] for key in METRIC_KEYS} == {key: cold[key] for key in METRIC_KEYS}
    # cls/mean/lmk reuse the same document-context pass.
    assert _eval(*[arg if arg != "maxsim-landmark" else "mean" for arg in args])["cached"] is True


def test_run_file_lists_each_ranking_in_trec_format(tiny_beir: Path, tmp_path: Path) -> None:
    run_file = tmp_path / "bm25.run"
    _eval(str(tiny_beir), "-p", "bm25", "--run-file", str(run_file))
    rows = [line.split() for line in run_file.read_text().splitlines()]
    assert rows[0][:4] == ["q1", "Q0", "d1", "1"] and {row[5] for row in rows} == {"bm25"}
    for query in ("q1", "q2"):
        ranks = [int(row[3]) for row in rows if row[0] == query]
        assert ranks == list(range(1, len(ranks) + 1))


def test_bad_folder_fails_naming_file_and_line(tiny_beir: Path) -> None:
    qrels = tiny_beir / "qrels" / "test.tsv"
    qrels.write_text(qrels.read_text() + "q1\tghost\t1\n")
    result = CliRunner().invoke(app, ["eval", str(tiny_beir), "-p", "bm25"])
    assert result.exit_code == 1
    assert f"{qrels}:4: unknown document id 'ghost'" in result.output


def test_unknown_pipeline_fails_listing_names(tiny_beir: Path) -> None:
    result = CliRunner().invoke(app, ["eval", str(tiny_beir), "-p", "nope"])
    assert result.exit_code == 1 and "known pipelines:" in result.output


def test_encoder_settings_reach_the_pipeline(tiny_beir: Path) -> None:
    from lmk_rag.eval.pipelines import PipelineOptions, register_pipeline

    seen: list[PipelineOptions] = []

    @register_pipeline("test-options")
    def factory(options: PipelineOptions):
        seen.append(options)
        from lmk_rag.eval.pipelines.bm25_pipeline import BM25Pipeline

        return BM25Pipeline(options)

    _eval(str(tiny_beir), "-p", "test-options", "--granularity", "variable", "--context", "chunk",
          "--window-overlap", "16", "--encoder", "max_length=128", "--encoder", "static_model=some/dir")
    assert seen[0].encoder == {"granularity": "variable", "context": "chunk", "window_overlap": 16,
                               "max_length": 128, "static_model": "some/dir"}


def test_lmk_rag_pipeline_runs_on_the_int8_onnx_backend(fixture_data: Path, tmp_path: Path, onnx_encoders, onnx_cache,
                                                        monkeypatch) -> None:
    from lmk_rag.paths import CACHE_ENV

    monkeypatch.setenv(CACHE_ENV, str(onnx_cache))
    report = _eval(str(fixture_data / "manpages-needle" / "L2048"), "-p", "lmk-rag", "--backend", "onnx", "--dtype",
                   "int8", "--max-queries", "5", "--max-docs", "10", "--cache-dir", str(tmp_path))
    assert (report["encoder"]["backend"], report["encoder"]["dtype"]) == ("onnx", "int8")
    assert report["queries"] == 5 and report["ndcg@10"] > 0.5


def test_static_pipelines_run_on_a_fresh_install(fixture_data: Path, tmp_path: Path, monkeypatch) -> None:
    from lmk_rag.paths import CACHE_ENV

    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "empty-cache"))  # no distilled model, no trained mixer
    folder = str(fixture_data / "manpages-needle" / "L2048")
    mixer = _eval(folder, "-p", "static-mixer")
    assert mixer["queries"] == 10 and mixer["encoder"]["mixer"] is not None and mixer["ndcg@10"] > 0.5
    store = _eval(folder, "-p", "static-store")
    assert store["encoder"]["mixer"] == "shipped" and store["encoder"]["rerank"] == "static"
    assert store["ndcg@10"] > 0.5
    raw = _eval(folder, "-p", "static-store", "--encoder", "mixer=null")
    assert raw["encoder"]["mixer"] is None
    assert not (tmp_path / "empty-cache").exists()
