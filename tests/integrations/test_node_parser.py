"""LandmarkNodeParser: nodes are runs of whole landmark chunks, embedded by one encoding pass."""

from __future__ import annotations

import itertools
from bisect import bisect_left

import numpy as np
import pytest
from llama_index.core import Document, VectorStoreIndex
from llama_index.core.node_parser import NodeParser
from llama_index.core.schema import MetadataMode, NodeRelationship, TextNode

from llama_index.embeddings.landmark import LandmarkEmbedding
from llama_index.node_parser.landmark import CHUNK_VECTORS_KEY, LandmarkNodeParser, cached_chunk_vectors

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
            fingerprint, cached = cached_chunk_vectors(node)
            np.testing.assert_allclose(cached, chunks, atol=1e-6)
            assert fingerprint == minilm_encoder.fingerprint
            assert CHUNK_VECTORS_KEY not in node.metadata  # light nodes: the vectors travel outside them


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
        assert CHUNK_VECTORS_KEY not in content and "rank: 1" in content


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
