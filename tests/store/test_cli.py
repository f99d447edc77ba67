"""``lmk-rag ingest / query / info`` on real manual-page text."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import click
import pytest
from typer.testing import CliRunner

from lmk_rag.cli import app
from lmk_rag.paths import CACHE_ENV
from lmk_rag.store import LandmarkStore

REPO = Path(__file__).resolve().parents[2]
#: Runs the command line given as arguments, then prints which of the heavy packages it imported.
CLI_IMPORTS = textwrap.dedent(
    """
    import json, sys
    from lmk_rag.cli import app
    sys.argv = ["lmk-rag", *sys.argv[1:]]
    try:
        app()
    finally:
        heavy = ("qdrant_client", "torch", "transformers")
        print("imported " + json.dumps(sorted(name for name in heavy if name in sys.modules)))
    """
)


@pytest.mark.slow
def test_ingest_query_info(tmp_path, docs):
    corpus = tmp_path / "corpus"
    (corpus / "sub").mkdir(parents=True)
    names = ["a.txt", "sub/b.md", "c.txt"]
    texts = list(docs.values())[:3]
    for name, text in zip(names, texts):
        (corpus / name).write_text(text)
    (corpus / "empty.txt").write_text("  \n")
    (corpus / "skip.json").write_text("{}")
    runner = CliRunner()
    store = str(tmp_path / "store")

    result = runner.invoke(app, ["ingest", str(corpus), "--store", store, "--document-batch-size", "2"])
    assert result.exit_code == 0, result.output
    assert "3 new, 0 changed, 0 unchanged, 0 deleted, 2 skipped" in result.stdout  # empty.txt, skip.json (no glob)
    assert "skip.json" in result.stderr and "empty.txt: empty" in result.stderr

    query = texts[1].split(". ")[0][:200]
    result = runner.invoke(app, ["query", query, "--store", store, "-k", "2", "--rerank", "chunks", "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["query"] == query
    assert out["hits"][0]["doc_id"] == "sub/b.md"
    assert set(out["hits"][0]) == {"doc_id", "node_id", "score", "text", "span", "metadata", "evidence",
                                   "chunk_scores"}
    assert {"start", "end", "score"} == set(out["hits"][0]["chunk_scores"][0])
    assert out["hits"][0]["metadata"]["path"].endswith("b.md")

    scores = {}
    for alpha in ("0", "1"):
        result = runner.invoke(app, ["query", query, "--store", store, "-k", "3", "--alpha", alpha, "--json"])
        assert result.exit_code == 0, result.output
        scores[alpha] = [hit["score"] for hit in json.loads(result.stdout)["hits"]]
    assert scores["0"][0] == 1.0 and scores["1"][0] < 1.0  # BM25 alone is relative to the best; MaxSim is a cosine
    result = runner.invoke(app, ["query", query, "--store", store, "--alpha", "2"])
    assert result.exit_code != 0 and "alpha" in result.output

    result = runner.invoke(app, ["query", query, "--store", store, "--filter", "path=nowhere"])
    assert result.exit_code == 0 and result.stdout == ""

    result = runner.invoke(app, ["info", "--store", store])
    assert result.exit_code == 0, result.output
    info = json.loads(result.stdout)
    assert info["documents"] == 3 and info["backend"] == "qdrant-edge" and info["encoder"]["dim"] == 384
    assert info["bm25"] is True and info["bm25_tokenizer"] == "code" and info["alpha"] == 0.7
    assert json.loads(runner.invoke(app, ["info", "--store", store, "--json"]).stdout) == info  # as query --json

    result = runner.invoke(app, ["query", "x", "--store", str(tmp_path / "nothing")])
    assert result.exit_code == 1 and "no lmk-rag store" in result.stderr


def test_ingest_records_the_storage_options_of_a_new_store(tmp_path, docs):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.txt").write_text(next(iter(docs.values())))
    runner = CliRunner()
    store = str(tmp_path / "store")
    result = runner.invoke(app, ["ingest", str(corpus), "--store", store, "--static", "--quantization", "int8",
                                 "--node-quantization", "binary", "--on-disk", "--hnsw-on-disk"])
    assert result.exit_code == 0, result.output
    info = json.loads(runner.invoke(app, ["info", "--store", store]).stdout)
    assert [info[key] for key in ("quantization", "node_quantization", "on_disk", "hnsw_on_disk")] == [
        "int8", "binary", True, True]
    result = runner.invoke(app, ["ingest", str(corpus), "--store", store, "--in-memory"])
    assert result.exit_code == 1 and result.output.startswith("error: ") and "on_disk: store=True given=False" in \
        result.output and len(result.output.strip().splitlines()) == 1
    result = runner.invoke(app, ["ingest", str(corpus), "--store", str(tmp_path / "other"), "--quantization", "int4"])
    assert result.exit_code != 0 and "quantization must be one of" in result.output


def test_ingest_static_makes_a_static_store_that_query_reranks_statically(tmp_path, docs):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    texts = list(docs.values())[:3]
    for i, text in enumerate(texts):
        (corpus / f"{i}.txt").write_text(text)
    runner = CliRunner()
    store = str(tmp_path / "store")
    result = runner.invoke(app, ["ingest", str(corpus), "--store", store, "--static"])
    assert result.exit_code == 0, result.output
    info = json.loads(runner.invoke(app, ["info", "--store", store]).stdout)
    assert info["mode"] == "static" and info["encoder"]["dim"] == 256 and info["static"]["dim"] == 256

    query = texts[1].split(". ")[0][:200]
    hits = {}
    for rerank in ([], ["--rerank", "static"], ["--rerank", "node"]):
        result = runner.invoke(app, ["query", query, "--store", store, "-k", "2", "--json", *rerank])
        assert result.exit_code == 0, result.output
        hits[tuple(rerank)] = json.loads(result.stdout)["hits"]
        assert hits[tuple(rerank)][0]["doc_id"] == "1.txt"
    assert hits[()] == hits[("--rerank", "static")]  # a static store's default rerank
    result = runner.invoke(app, ["query", query, "--store", store, "--rerank", "chunks"])
    assert result.exit_code == 1 and "no chunk vectors" in result.stderr
    result = runner.invoke(app, ["query", query, "--store", store, "--rerank", "none"])  # the old name of "node"
    assert result.exit_code == 1 and "rerank 'none' is now called 'node'" in result.stderr, result.output

    (corpus / "3.txt").write_text(list(docs.values())[3])
    result = runner.invoke(app, ["ingest", str(corpus), "--store", store])  # an existing store keeps its mode
    assert result.exit_code == 0 and "1 new, 0 changed, 3 unchanged" in result.stdout, result.output
    result = runner.invoke(app, ["ingest", str(corpus), "--store", store, "--static", "--backend", "onnx"])
    assert result.exit_code == 1 and "--static store has none" in result.stderr


@pytest.mark.slow
def test_query_imports_no_torch_transformers_or_qdrant_client_and_info_neither(tmp_path, minilm_encoder, docs,
                                                                               onnx_encoders, onnx_cache):
    doc_id, text = next(iter(docs.items()))
    with LandmarkStore(tmp_path / "store", encoder=minilm_encoder) as store:
        store.upsert_documents([(doc_id, text, None)])
        query = text.split(". ")[0][:200]
        best = store.search(query, k=1)[0]

    def run(*args: str) -> tuple[list[str], list[str]]:
        env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", CACHE_ENV: str(onnx_cache)}
        out = subprocess.run([sys.executable, "-c", CLI_IMPORTS, *args, "--store", str(tmp_path / "store")],
                             capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
        assert out.returncode == 0, out.stderr[-3000:]
        *printed, imported = out.stdout.rstrip("\n").splitlines()
        return printed, json.loads(imported.removeprefix("imported "))

    assert run("info")[1] == []  # no model, and an Edge store needs no qdrant-client
    printed, imported = run("query", query, "-k", "1")
    assert imported == []  # the query runs on the model's ONNX float32 twin (tests/store/test_torch_free_queries.py)
    snippet = " ".join(best.text.split())[:100]
    evidence = best.evidence[0]
    line, passage = printed  # the hit, then the passage that matched
    score, rest = line.removeprefix(" 1. ").split("  ", 1)
    assert rest == f"{doc_id} [{best.span[0]}:{best.span[1]}]  {snippet}" and abs(float(score) - best.score) <= 2e-4
    assert passage.startswith(f"    chunk [{evidence.start}:{evidence.end}] ") and best.passage().split()[0] in passage


def test_query_shows_the_passage_that_matched(tmp_path, needle_document) -> None:
    from lmk_rag.encoder import LandmarkEncoder
    from tests.conftest import NEEDLE_QUERY, NEEDLE_SENTENCE

    text, (start, end) = needle_document
    store = str(tmp_path / "store")
    with LandmarkStore(store, encoder=LandmarkEncoder(granularity="sentence")) as target:  # one chunk per sentence
        target.upsert_documents([("doc.txt", text, None), ("gzip.txt", "gzip compresses files with LZ77.", None)])
    runner = CliRunner()
    result = runner.invoke(app, ["query", NEEDLE_QUERY, "--store", store, "-k", "1"])
    assert result.exit_code == 0, result.output
    head, passage = result.stdout.splitlines()
    assert head.startswith(" 1. ") and " doc.txt [" in head
    assert passage == f"    chunk [{start}:{end + 1}] {passage.split()[2]}  {NEEDLE_SENTENCE} "  # piped: plain
    colored = runner.invoke(app, ["query", NEEDLE_QUERY, "--store", store, "-k", "1"], color=True).stdout
    highlighted = colored.splitlines()[1]
    assert click.unstyle(highlighted) == passage and f"{NEEDLE_SENTENCE} \x1b[0m" in highlighted  # styled apart
    assert highlighted.index("\x1b[1m") < highlighted.index(NEEDLE_SENTENCE)  # bold, from the passage's start
    shown = json.loads(runner.invoke(app, ["query", NEEDLE_QUERY, "--store", store, "-k", "1", "--json"]).stdout)
    (evidence, *_) = shown["hits"][0]["evidence"]
    assert (evidence["start"], evidence["end"], evidence["kind"]) == (start, end + 1, "chunk")
    assert evidence["text"] == NEEDLE_SENTENCE + " " and isinstance(evidence["score"], float)
