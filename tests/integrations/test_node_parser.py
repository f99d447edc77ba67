"""LandmarkNodeParser: nodes are runs of whole landmark chunks, embedded by one encoding pass."""

from __future__ import annotations

import copy
import itertools
from bisect import bisect_left

import numpy as np
import pytest
from llama_index.core import Document, StorageContext, VectorStoreIndex
from llama_index.core.ingestion import IngestionCache, IngestionPipeline
from llama_index.core.node_parser import NodeParser
from llama_index.core.schema import MetadataMode, NodeRelationship, TextNode
from llama_index.core.storage.docstore.utils import doc_to_json, json_to_doc

from llama_index.embeddings.landmark import LandmarkEmbedding
from llama_index.node_parser.landmark import ENCODER_KEY, LandmarkNode, LandmarkNodeParser
from llama_index.vector_stores.landmark import LandmarkVectorStore

NODE_TOKENS = 96


@pytest.fixture(scope="module")
def parser(embed_model: LandmarkEmbedding) -> LandmarkNodeParser:
    return LandmarkNodeParser(embed_model=embed_model, node_tokens=NODE_TOKENS)


@pytest.fixture(scope="module")
def parsed(parser: LandmarkNodeParser, manpage_documents: list[Document]) -> list[TextNode]:
    return parser.get_nodes_from_documents(manpage_documents)


def _by_document(nodes: list[TextNode], document: Document) -> list[TextNode]:
    return [node for node in nodes if node.ref_doc_id == document.doc_id]


def test_is_a_llamaindex_node_parser() -> None:
    assert NodeParser in LandmarkNodeParser.__mro__
    assert LandmarkNodeParser.class_name() == "LandmarkNodeParser"


def test_nodes_tile_each_document(parsed: list[TextNode], manpage_documents: list[Document]) -> None:
    for document in manpage_documents:
        nodes = _by_document(parsed, document)
        assert len(nodes) > 1
        assert nodes[0].start_char_idx == 0
        assert nodes[-1].end_char_idx == len(document.text)
        for before, after in itertools.pairwise(nodes):
            assert before.end_char_idx == after.start_char_idx
        for node in nodes:
            assert node.text == document.text[node.start_char_idx : node.end_char_idx]


def test_node_vectors_are_the_encoders_chunk_pooled_vectors(
    parsed: list[TextNode], manpage_documents: list[Document], minilm_encoder
) -> None:
    for document in manpage_documents[:3]:
        encoded = minilm_encoder.encode_documents(document.text)
        starts = [start for start, _ in encoded.spans]
        for node in _by_document(parsed, document):
            first, last = starts.index(node.start_char_idx), bisect_left(starts, node.end_char_idx)
            chunks = encoded.chunk_vectors[first:last]
            assert sum(encoded.token_counts[first:last]) <= NODE_TOKENS or last - first == 1
            mean = chunks.mean(axis=0)
            np.testing.assert_allclose(node.embedding, mean / np.linalg.norm(mean), atol=1e-5)
            assert isinstance(node, LandmarkNode)
            np.testing.assert_allclose(node.chunk_vectors, chunks, atol=1e-6)
            assert node.metadata[ENCODER_KEY] == minilm_encoder.fingerprint


def test_each_document_is_encoded_once(
    parser: LandmarkNodeParser, manpage_documents: list[Document], minilm_encoder, forward_counter
) -> None:
    documents = manpage_documents[:3]
    minilm_encoder.encode_documents([document.text for document in documents])
    windows_for_one_pass = sum(forward_counter.batches)
    forward_counter.reset()
    parser.get_nodes_from_documents(documents)
    assert sum(forward_counter.batches) == windows_for_one_pass


def test_relationships_and_metadata(parsed: list[TextNode], manpage_documents: list[Document]) -> None:
    document = manpage_documents[1]
    nodes = _by_document(parsed, document)
    for index, node in enumerate(nodes):
        assert node.relationships[NodeRelationship.SOURCE].node_id == document.doc_id
        assert node.metadata["rank"] == document.metadata["rank"]
        if index > 0:
            assert node.relationships[NodeRelationship.PREVIOUS].node_id == nodes[index - 1].node_id
        if index < len(nodes) - 1:
            assert node.relationships[NodeRelationship.NEXT].node_id == nodes[index + 1].node_id
    assert NodeRelationship.PREVIOUS not in nodes[0].relationships
    assert NodeRelationship.NEXT not in nodes[-1].relationships
    for mode in (MetadataMode.LLM, MetadataMode.EMBED):
        content = nodes[0].get_content(metadata_mode=mode)
        assert ENCODER_KEY not in content and "rank: 1" in content


def test_node_ids_are_stable_across_parses(
    parser: LandmarkNodeParser, parsed: list[TextNode], manpage_documents: list[Document]
) -> None:
    again = parser.get_nodes_from_documents(manpage_documents[:1])
    assert [node.node_id for node in again] == [node.node_id for node in _by_document(parsed, manpage_documents[0])]
    assert len({node.node_id for node in parsed}) == len(parsed)


def test_empty_documents_give_no_nodes(parser: LandmarkNodeParser) -> None:
    nodes = parser.get_nodes_from_documents([Document(text="  \n"), Document(text="one short sentence.")])
    assert [node.text for node in nodes] == ["one short sentence."]


def test_vector_store_index_embeds_nothing_again(
    parser: LandmarkNodeParser, embed_model: LandmarkEmbedding, manpage_documents: list[Document], forward_counter
) -> None:
    nodes = parser.get_nodes_from_documents(manpage_documents[:2])
    forward_counter.reset()
    index = VectorStoreIndex(nodes, embed_model=embed_model)
    assert forward_counter.calls == 0
    stored = index.vector_store.get(nodes[0].node_id)
    np.testing.assert_allclose(stored, nodes[0].embedding)


def test_sentence_granularity_snaps_nodes_to_sentences() -> None:
    sentence_model = LandmarkEmbedding(granularity="sentence")
    parser = LandmarkNodeParser(embed_model=sentence_model, node_tokens=40)
    text = " ".join(f"The {word} option changes how the listing is sorted and shown." for word in "abcdefghijkl")
    nodes = parser.get_nodes_from_documents([Document(text=text)])
    assert len(nodes) > 2
    assert all(node.text.rstrip().endswith(".") for node in nodes)
    assert "".join(node.text for node in nodes) == text


def test_chunk_vectors_ride_through_llamaindex_copies_and_never_into_json(
    parser: LandmarkNodeParser, manpage_documents: list[Document]
) -> None:
    """The copies LlamaIndex makes keep a node's chunk vectors; what it serialises (docstores, the ingestion cache)
    holds none and reloads as a plain TextNode; a node whose text a later transformation edits has none."""
    (node, *_) = parser.get_nodes_from_documents(manpage_documents[:1])
    for copied in (node.model_copy(), node.model_copy(deep=True), copy.deepcopy(node)):
        np.testing.assert_array_equal(copied.chunk_vectors, node.chunk_vectors)
    reloaded = json_to_doc(doc_to_json(node))
    assert type(reloaded) is TextNode and reloaded.embedding == node.embedding
    assert node.model_copy(update={"text": node.text + " edited"}).chunk_vectors is None
    cache = IngestionCache()
    first = IngestionPipeline(transformations=[parser], cache=cache).run(documents=manpage_documents[:1])
    hit = IngestionPipeline(transformations=[parser], cache=cache).run(documents=manpage_documents[:1])
    assert all(n.chunk_vectors is not None for n in first)
    assert [n.node_id for n in hit] == [n.node_id for n in first] and not any(isinstance(n, LandmarkNode) for n in hit)


def test_an_index_over_the_landmark_store_encodes_nothing_again(
    parser: LandmarkNodeParser, embed_model: LandmarkEmbedding, manpage_documents: list[Document], forward_counter,
    tmp_path,
) -> None:
    nodes = parser.get_nodes_from_documents(manpage_documents[:2])
    forward_counter.reset()
    with LandmarkVectorStore(path=tmp_path / "s", embed_model=embed_model) as vector_store:
        VectorStoreIndex(nodes, storage_context=StorageContext.from_defaults(vector_store=vector_store),
                         embed_model=embed_model)
        assert forward_counter.calls == 0 and vector_store.store.count() == len(nodes)
