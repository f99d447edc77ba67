"""Fixtures of the LlamaIndex integration tests: real MiniLM, real Edge shards, model-call counting."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from llama_index.core import Document
from llama_index.core.schema import TextNode

from llama_index.embeddings.landmark import LandmarkEmbedding
from llama_index.node_parser.landmark import LandmarkNodeParser
from llama_index.vector_stores.landmark import LandmarkVectorStore


class ForwardCounter:
    """Records the batch size of every forward pass of a transformer."""

    def __init__(self) -> None:
        self.batches: list[int] = []

    @property
    def calls(self) -> int:
        """The number of forward passes."""
        return len(self.batches)

    def reset(self) -> None:
        """Forget the passes so far."""
        self.batches.clear()


@pytest.fixture(scope="session")
def embed_model(minilm_encoder) -> LandmarkEmbedding:
    """LandmarkEmbedding over the suite's shared real-MiniLM encoder (k=32, document context)."""
    return LandmarkEmbedding(encoder=minilm_encoder)


@pytest.fixture
def forward_counter(minilm_encoder, monkeypatch: pytest.MonkeyPatch) -> Iterator[ForwardCounter]:
    """Count the real model's forward passes (the model still runs; this only counts)."""
    counter = ForwardCounter()
    model = minilm_encoder.model
    forward = model.forward

    def counting_forward(*args, **kwargs):
        input_ids = kwargs.get("input_ids", args[0] if args else None)
        counter.batches.append(int(input_ids.shape[0]))
        return forward(*args, **kwargs)

    monkeypatch.setattr(model, "forward", counting_forward)
    yield counter


@pytest.fixture(scope="session")
def manpage_documents(fixture_data: Path) -> list[Document]:
    """Six real manual pages (manpages-longdoc corpus) as Documents; metadata ``rank`` 0-5 and ``parity``."""
    documents: list[Document] = []
    with gzip.open(fixture_data / "manpages-longdoc" / "corpus.jsonl.gz", "rt", encoding="utf-8") as lines:
        for line in lines:
            row = json.loads(line)
            if 2_000 <= len(row["text"]) <= 5_000:
                rank = len(documents)
                metadata = {"rank": rank, "parity": "even" if rank % 2 == 0 else "odd"}
                documents.append(Document(text=row["text"], id_=f"page-{rank}", metadata=metadata))
            if len(documents) == 6:
                break
    return documents


@pytest.fixture
def vector_store(tmp_path: Path, embed_model: LandmarkEmbedding) -> Iterator[LandmarkVectorStore]:
    """A LandmarkVectorStore over a fresh Qdrant Edge shard in tmp_path."""
    store = LandmarkVectorStore(path=tmp_path / "store", embed_model=embed_model)
    yield store
    store.store.close()


@pytest.fixture(scope="module")
def nodes(embed_model: LandmarkEmbedding, manpage_documents: list[Document]) -> list[TextNode]:
    """The six pages cut by the landmark node parser into nodes of 128 tokens, embedded."""
    return LandmarkNodeParser(embed_model=embed_model, node_tokens=128).get_nodes_from_documents(manpage_documents)


@pytest.fixture
def filled(vector_store: LandmarkVectorStore, nodes: list[TextNode]) -> LandmarkVectorStore:
    """:func:`vector_store` holding :func:`nodes`."""
    vector_store.add(nodes)
    return vector_store
