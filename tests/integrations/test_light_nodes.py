"""Light nodes: what an ingest persists (its ingestion cache and docstore) weighs about what the stock pipeline with
the same model persists, because chunk vectors never ride in what is serialised (real MiniLM, real pages)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from llama_index.core import Document
from llama_index.core.ingestion import IngestionPipeline
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.storage.docstore import SimpleDocumentStore

from llama_index.node_parser.landmark import LandmarkNodeParser
from lmk_rag.encoder import resolve_model_path


def _texts(folder: Path) -> list[str]:
    with gzip.open(folder / "corpus.jsonl.gz", "rt", encoding="utf-8") as lines:
        return [json.loads(line)["text"] for line in lines]


def _persisted(tmp_path: Path, name: str, transformations: list, documents: list[Document]) -> tuple[int, list]:
    """Run an IngestionPipeline with a docstore, persist it, and return the bytes written and the nodes."""
    pipeline = IngestionPipeline(transformations=transformations, docstore=SimpleDocumentStore())
    nodes = pipeline.run(documents=documents)
    pipeline.persist(str(tmp_path / name))
    return sum(f.stat().st_size for f in (tmp_path / name).rglob("*") if f.is_file()), nodes


def test_an_ingest_persists_no_more_than_sized_chunks_with_the_same_model(tmp_path: Path, fixture_data: Path,
                                                                          embed_model) -> None:
    """Both pipelines persist nodes with their embedding (what a vector store needs); ours 1.2x at most."""
    from llama_index.embeddings.huggingface import HuggingFaceEmbedding

    texts = _texts(fixture_data / "manpages-longdoc") + _texts(fixture_data / "manpages-needle" / "L2048")[:2]
    documents = [Document(text=text, id_=f"page-{i}") for i, text in enumerate(texts)]
    assert len(documents) == 8
    ours, nodes = _persisted(tmp_path, "ours", [LandmarkNodeParser(embed_model=embed_model)], documents)
    stock, _ = _persisted(tmp_path, "stock", [SentenceSplitter(chunk_size=256, chunk_overlap=0),
                                              HuggingFaceEmbedding(model_name=str(resolve_model_path(None)))],
                          documents)
    assert ours <= 1.2 * stock, (ours, stock)
    assert all(node.chunk_vectors is not None and "chunk_vectors" not in node.model_dump_json() for node in nodes)
    assert "chunk_vectors" not in (tmp_path / "ours" / "docstore.json").read_text()
