"""LlamaIndex over a static store: ``LandmarkEmbedding(static=True)``, the same ``LandmarkNodeParser``, and a
``LandmarkVectorStore`` that holds no chunk vectors and runs no transformer (real shipped static model, Edge)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from llama_index.core import Document, VectorStoreIndex
from llama_index.core.ingestion import IngestionPipeline

from llama_index.embeddings.landmark import LandmarkEmbedding
from llama_index.node_parser.landmark import ENCODER_KEY, LandmarkNodeParser
from llama_index.vector_stores.landmark import LandmarkVectorStore
from lmk_rag.static.document_encoder import StaticDocumentEncoder
from lmk_rag.store import LandmarkStore, Rerank, StoreMode


@pytest.fixture(scope="module")
def static_embedding() -> LandmarkEmbedding:
    return LandmarkEmbedding(static=True)


def test_the_flag_builds_the_static_encoder(static_embedding: LandmarkEmbedding) -> None:
    encoder = static_embedding.encoder
    assert isinstance(encoder, StaticDocumentEncoder) and static_embedding.encoder_settings == encoder.settings
    vector = np.asarray(static_embedding.get_text_embedding("send a signal to a process"))
    np.testing.assert_allclose(vector, encoder.encode_documents("send a signal to a process").vector, atol=1e-6)
    empty = np.asarray(static_embedding.get_text_embedding("   "))  # no tokens: the unit mean token vector
    assert empty.shape == (256,) and abs(float(np.linalg.norm(empty)) - 1.0) < 1e-5
    again = LandmarkEmbedding(encoder=encoder)
    assert again.static and again.encoder is encoder
    assert LandmarkEmbedding.from_dict(static_embedding.to_dict()).static


def test_parser_and_store_cut_the_same_nodes_as_the_store_alone(
    tmp_path: Path, static_embedding: LandmarkEmbedding, manpage_documents: list[Document]
) -> None:
    parser = LandmarkNodeParser(embed_model=static_embedding, node_tokens=128)
    vector_store = LandmarkVectorStore(path=tmp_path / "li", embed_model=static_embedding)
    try:
        store = vector_store.store
        assert store.mode == StoreMode.STATIC and store.default_rerank == Rerank.STATIC
        nodes = IngestionPipeline(transformations=[parser], vector_store=vector_store).run(
            documents=manpage_documents[:3]
        )
        assert all(node.metadata[ENCODER_KEY] == store.settings["encoder"]["fingerprint"] for node in nodes)
        with LandmarkStore(tmp_path / "alone", mode="static", node_tokens=128) as alone:
            alone.upsert_documents([(d.doc_id, d.text, None) for d in manpage_documents[:3]])
            assert sorted(n.span for n in alone.get_nodes()) == sorted(n.span for n in store.get_nodes())
        assert store.backend.vector_names() == {"node", "static", "bm25"}
        retriever = VectorStoreIndex.from_vector_store(vector_store, embed_model=static_embedding).as_retriever(
            similarity_top_k=2
        )
        first = manpage_documents[1].text.split(". ")[0][:200]
        hits = retriever.retrieve(first)
        assert hits[0].node.ref_doc_id == manpage_documents[1].doc_id
    finally:
        vector_store.store.close()


def test_reopened_static_vector_store_needs_no_configuration(
    tmp_path: Path, static_embedding: LandmarkEmbedding, manpage_documents: list[Document]
) -> None:
    with LandmarkVectorStore(path=tmp_path / "s", embed_model=static_embedding) as vector_store:
        parser = LandmarkNodeParser(embed_model=static_embedding)
        vector_store.add(parser.get_nodes_from_documents(manpage_documents[:2]))
    with LandmarkVectorStore(path=tmp_path / "s") as vector_store:
        assert vector_store.embed_model.static
        hits = vector_store.as_index().as_retriever(similarity_top_k=1).retrieve(manpage_documents[0].text[:150])
        assert hits[0].node.ref_doc_id == manpage_documents[0].doc_id
