"""Progress where the time goes: an ingest through LlamaIndex with ``show_progress=True`` shows the encoder's bar in
tokens and documents, advancing per window batch, so one long document moves it too (real MiniLM, real pages).

The jobs here are too small to turn the bar on by themselves (fewer batches than the encoder's threshold for long
jobs), so each bar seen is one that ``show_progress`` asked for."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest
from llama_index.core import Document
from llama_index.core.ingestion import IngestionPipeline
from llama_index.core.node_parser import SentenceSplitter

from llama_index.embeddings.landmark import LandmarkEmbedding
from llama_index.node_parser.landmark import LandmarkNodeParser

#: Windows per forward pass: small, so a long page takes several batches, yet fewer than turn the bar on by itself.
WINDOWS_PER_BATCH = 4


@pytest.fixture(scope="module")
def small_batches() -> LandmarkEmbedding:
    return LandmarkEmbedding(embed_batch_size=WINDOWS_PER_BATCH)


@pytest.fixture(scope="module")
def pages(fixture_data: Path) -> list[Document]:
    """Two short pages and one long haystack (~8k tokens: ~40 windows, ~20 batches of 2)."""
    def texts(folder: str) -> list[str]:
        with gzip.open(fixture_data / folder / "corpus.jsonl.gz", "rt", encoding="utf-8") as lines:
            return [json.loads(line)["text"] for line in lines]

    short, long = texts("manpages-short"), texts("manpages-needle/L8192")[0]
    return [Document(text=short[0], id_="short-1"), Document(text=short[1], id_="short-2"),
            Document(text=long, id_="long")]


def _updates(stderr: str) -> list[str]:
    """The distinct states the encoder's bar printed (tqdm rewrites one line with carriage returns)."""
    states = [part.strip() for part in re.split(r"[\r\n]", stderr) if part.strip().startswith("Encoding")]
    return list(dict.fromkeys(states))


def test_the_job_is_too_small_to_show_a_bar_by_itself(small_batches, pages, capsys) -> None:
    pipeline = IngestionPipeline(transformations=[LandmarkNodeParser(embed_model=small_batches)])
    assert len(pipeline.run(documents=pages, show_progress=False)) > 3
    assert _updates(capsys.readouterr().err) == []


def test_an_ingest_shows_tokens_and_documents_as_it_goes(small_batches, pages, capsys) -> None:
    pipeline = IngestionPipeline(transformations=[LandmarkNodeParser(embed_model=small_batches)])
    nodes = pipeline.run(documents=pages, show_progress=True)
    assert {node.ref_doc_id for node in nodes} == {"short-1", "short-2", "long"}
    states = _updates(capsys.readouterr().err)
    assert len(states) >= 4, states  # several updates while the long page is encoded, not one at the end
    assert all("tok/s" in state for state in states), states
    # tqdm skips updates closer than its mininterval and a nested bar is cleared when it closes, so the last state
    # written may be any late one: the documents count up from 0, never past 3.
    done = [int(re.search(r"(\d)/3 documents", state).group(1)) for state in states]
    assert done[0] == 0 and done == sorted(done) and done[-1] >= 1, states
    tokens = [_count(re.search(r"\| *([\d.]+k?)/", state).group(1)) for state in states]
    assert tokens == sorted(tokens) and tokens[-1] > 10_000 and len(set(tokens)) >= 4


def _count(shown: str) -> float:
    """A tqdm count as a number (``1.97k`` -> 1970)."""
    return float(shown[:-1]) * 1000 if shown.endswith("k") else float(shown)


def test_embedding_a_batch_shows_the_encoders_bar(small_batches, pages, capsys) -> None:
    small_batches.get_text_embedding_batch([pages[0].text, pages[2].text], show_progress=True)
    states = _updates(capsys.readouterr().err)
    assert len(states) >= 4 and "2/2 documents" in states[-1], states
    small_batches.get_text_embedding_batch([pages[0].text])  # without show_progress: no bar
    assert _updates(capsys.readouterr().err) == []


def test_an_ingest_that_embeds_with_landmark_embedding_shows_its_bar(small_batches, pages, capsys) -> None:
    pipeline = IngestionPipeline(transformations=[SentenceSplitter(chunk_size=4096), small_batches])
    pipeline.run(documents=pages, show_progress=True)
    states = _updates(capsys.readouterr().err)
    assert len(states) >= 4 and "documents" in states[-1], states
    pipeline = IngestionPipeline(transformations=[SentenceSplitter(chunk_size=4096), small_batches])
    pipeline.run(documents=pages, show_progress=False)
    assert _updates(capsys.readouterr().err) == []


def test_the_cli_ingest_bar_moves_within_one_long_file(fixture_data, tmp_path) -> None:
    """One long file (~24k tokens, 3 window batches of the default 32): the encoder's bar under the ingest bar
    advances in tokens while the ingest bar still says 0/1 files."""
    from typer.testing import CliRunner

    from lmk_rag.cli import app

    with gzip.open(fixture_data / "manpages-needle" / "L8192" / "corpus.jsonl.gz", "rt", encoding="utf-8") as lines:
        long = json.loads(next(lines))["text"]
    (tmp_path / "book.txt").write_text("\n\n".join([long] * 3), encoding="utf-8")
    result = CliRunner().invoke(app, ["ingest", str(tmp_path / "book.txt"), "--store", str(tmp_path / "store")])
    assert result.exit_code == 0, result.output
    states = [state for state in _updates(result.stderr) if "0/1 documents" in state]
    tokens = [_count(re.search(r"\| *([\d.]+k?)/", state).group(1)) for state in states]
    assert len(set(tokens)) >= 3 and max(tokens) > 10_000, states  # moved within the one file, before it was done
