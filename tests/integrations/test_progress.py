"""Progress where the time goes: an ingest through LlamaIndex with ``show_progress=True`` shows the encoder's bar in
tokens and documents, advancing per window batch, so one long document moves it too (real MiniLM, real pages)."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest
from llama_index.core import Document
from llama_index.core.ingestion import IngestionPipeline

from llama_index.embeddings.landmark import LandmarkEmbedding
from llama_index.node_parser.landmark import LandmarkNodeParser

#: Windows per forward pass: small, so a long page takes many batches.
WINDOWS_PER_BATCH = 2


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


def test_an_ingest_shows_tokens_and_documents_as_it_goes(small_batches, pages, capsys) -> None:
    pipeline = IngestionPipeline(transformations=[LandmarkNodeParser(embed_model=small_batches)])
    nodes = pipeline.run(documents=pages, show_progress=True)
    assert {node.ref_doc_id for node in nodes} == {"short-1", "short-2", "long"}
    states = _updates(capsys.readouterr().err)
    assert len(states) >= 4, states  # several updates while the long page is encoded, not one at the end
    assert all("tok/s" in state for state in states), states
    assert "3/3 documents" in states[-1] and "0/3 documents" in states[0]
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
