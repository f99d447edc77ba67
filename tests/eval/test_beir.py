"""The BEIR loader: every set of the dev-set fixture loads; bad folders fail naming the file and line."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from lmk_rag.errors import DatasetError
from lmk_rag.eval.beir import load_beir

FIXTURE_SETS = [
    ("manpages-longdoc", False),
    ("manpages-short", False),
    ("manpages-needle/L512", True),
    ("manpages-needle/L2048", True),
    ("manpages-needle/L8192", True),
]


@pytest.mark.parametrize(("folder", "needle"), FIXTURE_SETS)
def test_loader_reads_every_fixture_set(fixture_data: Path, folder: str, needle: bool) -> None:
    dataset = load_beir(fixture_data / folder)
    assert dataset.name == folder
    assert len(dataset.doc_ids) == len(dataset.doc_texts) == len(set(dataset.doc_ids)) > 0
    assert len(dataset.query_ids) == len(dataset.query_texts) == len(dataset.query_metadata) > 0
    assert set(dataset.query_ids) == set(dataset.qrels)
    known = set(dataset.doc_ids)
    assert all(doc_id in known for judged in dataset.qrels.values() for doc_id in judged)
    assert all(isinstance(text, str) and text.strip() for text in dataset.doc_texts + dataset.query_texts)
    if needle:
        lengths = {meta["length"] for meta in dataset.query_metadata}
        assert len(lengths) == 1 and str(next(iter(lengths))) in folder
        assert {meta["position"] for meta in dataset.query_metadata} == {0, 0.25, 0.5, 0.75, 1}
    else:
        assert all(meta == {} for meta in dataset.query_metadata)


def test_gzipped_corpus_and_titles(tiny_beir: Path) -> None:
    lines = (tiny_beir / "corpus.jsonl").read_text().splitlines()
    record = json.loads(lines[0])
    record["title"] = "Mats"
    lines[0] = json.dumps(record)
    with gzip.open(tiny_beir / "corpus.jsonl.gz", "wt") as handle:
        handle.write("\n".join(lines) + "\n")
    (tiny_beir / "corpus.jsonl").unlink()
    dataset = load_beir(tiny_beir)
    assert dataset.doc_texts[0] == "Mats\nthe cat sat on the mat"
    assert dataset.query_metadata[1] == {"position": 1, "length": 512}


def test_queries_without_qrels_are_dropped(tmp_path: Path, make_beir) -> None:
    folder = make_beir(tmp_path / "b", {"d1": "a text"}, [{"_id": "q1", "text": "x"}, {"_id": "q2", "text": "y"}],
                        [("q2", "d1", 1)])
    assert load_beir(folder).query_ids == ["q2"]


@pytest.mark.parametrize("missing", ["corpus.jsonl", "queries.jsonl", "qrels/test.tsv"])
def test_missing_file_is_named(tiny_beir: Path, missing: str) -> None:
    (tiny_beir / missing).unlink()
    with pytest.raises(DatasetError, match=f"{tiny_beir / missing}: file not found"):
        load_beir(tiny_beir)


def test_missing_folder(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="not a folder"):
        load_beir(tmp_path / "nowhere")


@pytest.mark.parametrize(
    ("file", "line", "content", "message"),
    [
        ("corpus.jsonl", 2, '{"_id": "d2", "text": broken', "not valid JSON"),
        ("corpus.jsonl", 3, '{"_id": "d3"}', "missing or non-string 'text'"),
        ("corpus.jsonl", 3, '{"_id": "d1", "text": "again"}', "duplicate document id 'd1'"),
        ("queries.jsonl", 2, '["not", "an", "object"]', "expected a JSON object"),
        ("queries.jsonl", 1, '{"text": "no id"}', "missing or non-string '_id'"),
        ("qrels/test.tsv", 2, "q9\td1\t1", "unknown query id 'q9'"),
        ("qrels/test.tsv", 3, "q2\td9\t1", "unknown document id 'd9'"),
        ("qrels/test.tsv", 2, "q1 d1 1", "expected 3 tab-separated fields"),
        ("qrels/test.tsv", 3, "q2\td2\thigh", "score 'high' is not an integer"),
    ],
)
def test_bad_line_is_named(tiny_beir: Path, file: str, line: int, content: str, message: str) -> None:
    path = tiny_beir / file
    lines = path.read_text().splitlines()
    lines[line - 1] = content
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(DatasetError, match=f"{path}:{line}: {message}"):
        load_beir(tiny_beir)


def test_shared_layout_with_broken_copy(fixture_data: Path, tmp_path: Path) -> None:
    copy = tmp_path / "L512"
    shutil.copytree(fixture_data / "manpages-needle" / "L512", copy)
    copy.chmod(0o755)
    queries = copy / "queries.jsonl"
    queries.chmod(0o644)
    lines = queries.read_text().splitlines()
    lines[6] = lines[6][:-5]
    queries.write_text("\n".join(lines) + "\n")
    with pytest.raises(DatasetError, match=f"{queries}:7: not valid JSON"):
        load_beir(copy)
