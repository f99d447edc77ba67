"""LlamaIndex end to end: IngestionPipeline, VectorStoreIndex, retriever and query engine over a real Edge shard."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from llama_index.core import Document, Settings, StorageContext, VectorStoreIndex
from llama_index.core.ingestion import IngestionPipeline
from llama_index.core.llms import MockLLM
from llama_index.core.schema import ImageNode, MetadataMode, NodeWithScore, TextNode
from llama_index.core.storage.docstore import SimpleDocumentStore
from llama_index.core.utils import get_tokenizer

from llama_index.embeddings.landmark import LandmarkEmbedding
from llama_index.node_parser.landmark import LandmarkNodeParser
from llama_index.vector_stores.landmark import LandmarkVectorStore, MaxContextTokens

QUERY = "terminate the calling process"


@pytest.fixture
def pipeline(vector_store: LandmarkVectorStore, embed_model: LandmarkEmbedding) -> IngestionPipeline:
    parser = LandmarkNodeParser(embed_model=embed_model, node_tokens=128)
    return IngestionPipeline(transformations=[parser], vector_store=vector_store, docstore=SimpleDocumentStore())


def _copy(document: Document, text: str | None = None) -> Document:
    return Document(text=document.text if text is None else text, id_=document.doc_id, metadata=dict(document.metadata))


def test_ingestion_pipeline_reingests_idempotently(
    pipeline: IngestionPipeline,
    vector_store: LandmarkVectorStore,
    manpage_documents: list[Document],
    forward_counter,
) -> None:
    documents = manpage_documents[:3]
    first = pipeline.run(documents=documents)
    assert vector_store.store.count() == len(first)
    assert {node.ref_doc_id for node in first} == {document.doc_id for document in documents}

    forward_counter.reset()
    assert pipeline.run(documents=[_copy(document) for document in documents]) == []
    assert forward_counter.calls == 0
    assert vector_store.store.count() == len(first)

    changed = _copy(documents[1], documents[1].text + "\n\nSEE ALSO\n       exit(3), wait(2)\n")
    rerun = pipeline.run(documents=[_copy(documents[0]), changed, _copy(documents[2])])
    assert {node.ref_doc_id for node in rerun} == {changed.doc_id}
    old = [node for node in first if node.ref_doc_id == changed.doc_id]
    assert vector_store.store.count() == len(first) - len(old) + len(rerun)
    stored = sorted(
        (node for node in vector_store.get_nodes() if node.ref_doc_id == changed.doc_id),
        key=lambda node: node.start_char_idx,
    )
    assert "".join(node.text for node in stored) == changed.text


def test_index_over_the_store_embeds_nothing_at_index_time(
    vector_store: LandmarkVectorStore,
    embed_model: LandmarkEmbedding,
    manpage_documents: list[Document],
    forward_counter,
) -> None:
    nodes = LandmarkNodeParser(embed_model=embed_model).get_nodes_from_documents(manpage_documents[:2])
    forward_counter.reset()
    storage = StorageContext.from_defaults(vector_store=vector_store)
    VectorStoreIndex(nodes, storage_context=storage, embed_model=embed_model)
    assert forward_counter.calls == 0
    assert vector_store.store.count() == len(nodes)


def test_retriever_and_query_engine_encode_each_query_once(
    pipeline: IngestionPipeline,
    vector_store: LandmarkVectorStore,
    embed_model: LandmarkEmbedding,
    manpage_documents: list[Document],
    forward_counter,
) -> None:
    pipeline.run(documents=manpage_documents)
    previous = Settings._embed_model
    try:
        Settings.embed_model = embed_model
        index = VectorStoreIndex.from_vector_store(vector_store)
        forward_counter.reset()
        retrieved = index.as_retriever(similarity_top_k=5).retrieve(QUERY)
        assert forward_counter.batches == [1]
        assert len(retrieved) == 5 and all(isinstance(n.node, TextNode) and n.score is not None for n in retrieved)

        budget = MaxContextTokens(max_context_tokens=300)
        engine = index.as_query_engine(llm=MockLLM(), similarity_top_k=5, node_postprocessors=[budget])
        forward_counter.reset()
        response = engine.query(QUERY)
        assert forward_counter.batches == [1]
        assert str(response)
    finally:
        Settings._embed_model = previous
    kept = response.source_nodes
    assert [n.node.node_id for n in kept] == [n.node.node_id for n in retrieved[: len(kept)]]
    used = sum(budget.count_tokens(n) for n in kept)
    whole = sum(budget.count_tokens(n) for n in retrieved[: len(kept)])
    assert 0 < used <= 300 < whole  # the last node kept is cut down to its evidence, not dropped
    assert kept[-1].node.text in retrieved[len(kept) - 1].node.text and len(kept[-1].node.text) < len(
        retrieved[len(kept) - 1].node.text)


def test_max_context_tokens_counts_llm_content_with_llamaindex_tokenizer() -> None:
    nodes = [
        NodeWithScore(node=TextNode(text="word " * size, metadata={"page": f"p{size}"}), score=1.0 / size)
        for size in (40, 30, 50, 10)
    ]
    tokenizer = get_tokenizer()
    costs = [len(tokenizer(n.node.get_content(metadata_mode=MetadataMode.LLM))) for n in nodes]
    budget = costs[0] + costs[1]
    kept = MaxContextTokens(max_context_tokens=budget).postprocess_nodes(nodes)
    assert kept == nodes[:2]
    assert MaxContextTokens(max_context_tokens=budget - 1).postprocess_nodes(nodes) == nodes[:1]
    assert MaxContextTokens(max_context_tokens=costs[0] - 1).postprocess_nodes(nodes) == []


def test_empty_documents_and_image_nodes_are_indexed_as_with_a_huggingface_embedding(
    vector_store: LandmarkVectorStore, embed_model: LandmarkEmbedding
) -> None:
    storage = StorageContext.from_defaults(vector_store=vector_store)
    index = VectorStoreIndex.from_documents([], storage_context=storage, embed_model=embed_model)
    index.insert(Document(text="", id_="empty"))  # LlamaIndex's SentenceSplitter makes one empty node of it
    asyncio.run(index.ainsert(Document(text="", id_="empty-async")))
    image = ImageNode(image="potato")
    index.insert_nodes([image])
    stored = {node.ref_doc_id or node.node_id: node for node in vector_store.get_nodes()}
    assert set(stored) == {"empty", "empty-async", image.node_id}
    for node in stored.values():
        np.testing.assert_allclose(node.embedding, embed_model.empty_text_embedding(), atol=1e-6)
    assert isinstance(stored[image.node_id], ImageNode) and stored[image.node_id].image == "potato"
