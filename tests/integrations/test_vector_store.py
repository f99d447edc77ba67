"""LandmarkVectorStore over a real Qdrant Edge shard in tmp_path, with real MiniLM nodes."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest
from llama_index.core import Document, Settings
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode
from llama_index.core.vector_stores.types import (
    BasePydanticVectorStore,
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
    VectorStoreQuery,
)

from llama_index.embeddings.landmark import LandmarkEmbedding
from llama_index.node_parser.landmark import ENCODER_KEY, LandmarkNode, LandmarkNodeParser
from llama_index.vector_stores.landmark import CHUNK_SCORES_KEY, EVIDENCE_KEY, LandmarkVectorStore
from llama_index.vector_stores.landmark.base import NO_SOURCE
from lmk_rag.errors import EmptyTextError, InvalidInputError, SettingsMismatchError
from lmk_rag.store import LandmarkStore

QUERY = "get the current working directory of the calling process"


def _query(text: str = QUERY, k: int = 5, **kwargs) -> VectorStoreQuery:
    return VectorStoreQuery(query_str=text, similarity_top_k=k, **kwargs)


def test_is_a_pydantic_vector_store_that_stores_text_and_embeds_queries_itself() -> None:
    assert BasePydanticVectorStore in LandmarkVectorStore.__mro__
    assert LandmarkVectorStore.class_name() == "LandmarkVectorStore"
    fields = LandmarkVectorStore.model_fields
    assert fields["stores_text"].default is True
    assert fields["is_embedding_query"].default is False


def test_add_then_get_nodes_round_trips_nodes_and_vectors(filled: LandmarkVectorStore, nodes: list[TextNode]) -> None:
    assert filled.store.count() == len(nodes)
    original = nodes[3]
    (node,) = filled.get_nodes(node_ids=[original.node_id])
    assert node.text == original.text
    assert (node.start_char_idx, node.end_char_idx) == (original.start_char_idx, original.end_char_idx)
    assert node.metadata == {k: v for k, v in original.metadata.items() if k != ENCODER_KEY}
    assert node.ref_doc_id == original.ref_doc_id
    for relation in (NodeRelationship.PREVIOUS, NodeRelationship.NEXT):
        assert node.relationships[relation].node_id == original.relationships[relation].node_id
    np.testing.assert_allclose(node.embedding, original.embedding, atol=1e-6)
    (record,) = filled.store.get_nodes(node_ids=[original.node_id])
    assert isinstance(original, LandmarkNode)
    np.testing.assert_allclose(record.chunk_vectors, original.chunk_vectors, atol=1e-6)
    assert ENCODER_KEY not in record.metadata and ENCODER_KEY not in record.metadata["_node_content"]


def test_add_adds_to_a_stored_document_instead_of_replacing_it(
    vector_store: LandmarkVectorStore, nodes: list[TextNode]
) -> None:
    document_nodes = [node for node in nodes if node.ref_doc_id == nodes[0].ref_doc_id]
    vector_store.add(document_nodes[:2])
    vector_store.add(document_nodes[2:])
    vector_store.add(document_nodes[1:3])
    assert sorted(n.node_id for n in vector_store.get_nodes()) == sorted(n.node_id for n in document_nodes)


def test_delete_removes_every_node_of_one_document(filled: LandmarkVectorStore, nodes: list[TextNode]) -> None:
    doc_id = nodes[0].ref_doc_id
    filled.delete(doc_id)
    remaining = filled.get_nodes()
    assert len(remaining) == len([n for n in nodes if n.ref_doc_id != doc_id])
    assert all(node.ref_doc_id != doc_id for node in remaining)


def test_query_encodes_once_and_returns_scored_nodes(
    filled: LandmarkVectorStore, forward_counter, manpage_documents: list[Document]
) -> None:
    result = filled.query(_query())
    assert forward_counter.batches == [1]
    assert len(result.nodes) == len(result.similarities) == len(result.ids) == 5
    assert result.similarities == sorted(result.similarities, reverse=True)
    assert [node.node_id for node in result.nodes] == result.ids
    hits = filled.store.search(QUERY, k=5, one_per_document=False)
    assert [hit.node_id for hit in hits] == result.ids
    np.testing.assert_allclose(result.similarities, [hit.score for hit in hits], atol=1e-5)
    top = result.nodes[0]
    document = next(d for d in manpage_documents if d.doc_id == top.ref_doc_id)
    assert top.text == document.text[top.start_char_idx : top.end_char_idx]


def test_metadata_filters_doc_ids_and_node_ids_restrict_the_search(
    filled: LandmarkVectorStore, nodes: list[TextNode]
) -> None:
    def ranks(**kwargs) -> set[int]:
        return {node.metadata["rank"] for node in filled.query(_query(k=len(nodes), **kwargs)).nodes}

    assert ranks(filters=MetadataFilters(filters=[MetadataFilter(key="rank", value=2)])) == {2}
    odd_or_zero = MetadataFilters(
        filters=[MetadataFilter(key="parity", value="odd"), MetadataFilter(key="rank", value=0)],
        condition=FilterCondition.OR,
    )
    assert ranks(filters=odd_or_zero) == {0, 1, 3, 5}
    not_low = MetadataFilters(
        filters=[MetadataFilter(key="rank", value=3, operator=FilterOperator.LT)], condition=FilterCondition.NOT
    )
    assert ranks(filters=not_low) == {3, 4, 5}
    assert ranks(filters=MetadataFilters(filters=[MetadataFilter(key="rank", value=[1, 4], operator="in")])) == {1, 4}
    assert ranks(doc_ids=[nodes[0].ref_doc_id]) == {nodes[0].metadata["rank"]}
    picked = [nodes[1].node_id, nodes[-1].node_id]
    assert sorted(filled.query(_query(node_ids=picked)).ids) == sorted(picked)
    only_even = filled.get_nodes(filters=MetadataFilters(filters=[MetadataFilter(key="parity", value="even")]))
    assert only_even and {node.metadata["rank"] % 2 for node in only_even} == {0}


def test_async_variants_match_sync(vector_store: LandmarkVectorStore, nodes: list[TextNode]) -> None:
    doc_id = nodes[0].ref_doc_id
    asyncio.run(vector_store.async_add(nodes))
    found = asyncio.run(vector_store.aquery(_query()))
    assert found.ids == vector_store.query(_query()).ids
    np.testing.assert_allclose(found.similarities, vector_store.query(_query()).similarities, atol=1e-6)
    asyncio.run(vector_store.adelete(doc_id))
    left = asyncio.run(vector_store.aget_nodes())
    assert left and all(node.ref_doc_id != doc_id for node in left)
    asyncio.run(vector_store.aclear())
    assert vector_store.store.count() == 0


def test_clear_empties_the_store(filled: LandmarkVectorStore) -> None:
    filled.clear()
    assert filled.store.count() == 0 and filled.get_nodes() == []


def test_nodes_from_another_encoder_are_refused(vector_store: LandmarkVectorStore, nodes: list[TextNode]) -> None:
    foreign = nodes[0].model_copy(update={"metadata": {**nodes[0].metadata, ENCODER_KEY: "0123456789abcdef"}})
    with pytest.raises(SettingsMismatchError, match="0123456789abcdef"):
        vector_store.add([foreign])
    assert vector_store.store.count() == 0


def test_nodes_of_other_parsers_use_their_embedding_as_the_only_chunk(
    vector_store: LandmarkVectorStore, embed_model: LandmarkEmbedding, manpage_documents: list[Document]
) -> None:
    plain = SentenceSplitter(chunk_size=200, chunk_overlap=0).get_nodes_from_documents(manpage_documents[:1])
    for node, vector in zip(plain, embed_model.get_text_embedding_batch([n.get_content() for n in plain])):
        node.embedding = vector
    vector_store.add(plain)
    (record,) = vector_store.store.get_nodes(node_ids=[plain[0].node_id])
    np.testing.assert_allclose(record.chunk_vectors, [plain[0].embedding], atol=1e-6)
    assert len(vector_store.query(_query(k=2)).nodes) == 2
    with pytest.raises(InvalidInputError, match="no embedding"):
        vector_store.add([TextNode(text="no vector")])


def test_wraps_an_injected_store(tmp_path: Path, minilm_encoder, nodes: list[TextNode]) -> None:
    with LandmarkStore(tmp_path / "injected", encoder=minilm_encoder) as store:
        vector_store = LandmarkVectorStore(store=store)
        assert vector_store.store is store
        vector_store.add(nodes[:4])
        assert store.count() == 4
        with pytest.raises(InvalidInputError):
            LandmarkVectorStore(path=tmp_path / "other", store=store)


def test_static_rerank_runs_through_the_adapter(
    tmp_path: Path, embed_model: LandmarkEmbedding, nodes: list[TextNode], minilm_path: Path, forward_counter
) -> None:
    from safetensors.numpy import load_file
    from tokenizers import Tokenizer

    from lmk_rag.static import StaticTokenEncoder, StaticVectors, maxsim

    weights = load_file(str(minilm_path / "model.safetensors"))
    table = next(value for key, value in weights.items() if key.endswith("word_embeddings.weight"))
    tokenizer = Tokenizer.from_file(str(minilm_path / "tokenizer.json"))
    static = StaticTokenEncoder(
        StaticVectors(table.astype(np.float32), tokenizer, None, None, tokenizer.token_to_id("[UNK]"), "minilm-input")
    )
    vector_store = LandmarkVectorStore(path=tmp_path / "static", embed_model=embed_model, static_encoder=static)
    try:
        vector_store.add(nodes[:24])
        forward_counter.reset()
        result = vector_store.query(_query(k=3), rerank="static", alpha=1.0)
        assert forward_counter.batches == [1]
        query_tokens = static.encode_query_tokens(QUERY)
        for node, score in zip(result.nodes, result.similarities):
            expected = maxsim(query_tokens, static.encode_document_tokens(node.text)) / len(query_tokens)
            assert score == pytest.approx(expected, abs=1e-3)
        assert result.similarities != vector_store.query(_query(k=3)).similarities
    finally:
        vector_store.store.close()


def test_query_modes_map_onto_the_store(filled: LandmarkVectorStore, nodes: list[TextNode]) -> None:
    store = filled.store

    def store_ids(k: int = 5, **kwargs) -> list[str]:
        return [hit.node_id for hit in store.search(QUERY, k=k, one_per_document=False, **kwargs)]

    assert filled.query(_query()).ids == store_ids()
    assert filled.query(_query(mode="hybrid")).ids == store_ids()  # alpha None: the store's
    assert filled.query(_query(mode="hybrid", alpha=0.2)).ids == store_ids(alpha=0.2)
    assert filled.query(_query(mode="hybrid", alpha=0.2), alpha=0.9).ids == store_ids(alpha=0.2)
    assert len(filled.query(_query(k=1, mode="hybrid", hybrid_top_k=4)).ids) == 4
    bm25 = store_ids(alpha=0.0)
    assert filled.query(_query(mode="sparse")).ids == bm25 == filled.query(_query(mode="text_search")).ids
    assert filled.query(_query(mode="sparse", sparse_top_k=2)).ids == bm25[:2]
    vector = store.encoder.encode_queries(QUERY).vector
    cosine = {node.node_id: float(np.dot(node.embedding, vector)) for node in nodes}
    nearest = sorted(cosine, key=lambda node_id: -cosine[node_id])[:5]
    dense = filled.query(VectorStoreQuery(query_embedding=vector.tolist(), similarity_top_k=5))
    assert dense.ids == nearest
    np.testing.assert_allclose(dense.similarities, [cosine[node_id] for node_id in nearest], atol=1e-5)
    assert filled.query(_query(mode="mmr", mmr_threshold=1.0)).ids == nearest
    diverse = filled.query(_query(mode="mmr"), mmr_threshold=0.0).ids
    assert diverse[0] == nearest[0] and diverse != nearest


def test_unsupported_query_modes_and_missing_query_text_are_errors(filled: LandmarkVectorStore) -> None:
    for mode in ("svm", "linear_regression", "logistic_regression", "semantic_hybrid"):
        with pytest.raises(NotImplementedError, match=mode):
            filled.query(_query(mode=mode))
    with pytest.raises(InvalidInputError, match="neither query_str"):
        filled.query(VectorStoreQuery(similarity_top_k=2))
    with pytest.raises(InvalidInputError, match="BM25"):
        filled.query(VectorStoreQuery(query_embedding=[0.1] * 384, mode="sparse"))


def test_the_sparse_modes_never_answer_with_the_dense_ranking(filled: LandmarkVectorStore) -> None:
    for mode in ("sparse", "text_search"):
        assert filled.query(_query("the and of", mode=mode)).ids == []  # stop words only: no BM25 term
        assert filled.query(_query("zzzqqq xyzzy", mode=mode)).ids == []  # words no node holds
        assert filled.query(_query(mode=mode)).ids  # a query with BM25 terms finds its nodes
    assert filled.store.search("the and of", alpha=0.0) == []  # the store's BM25 alone, as the modes run it
    assert len(filled.query(_query("the and of")).ids) == 5  # the fused default still ranks by the rerank


def test_an_empty_or_whitespace_query_is_an_empty_text_error(filled: LandmarkVectorStore) -> None:
    for text in ("   ", "", "\n\t"):
        for mode in ("default", "hybrid", "sparse", "text_search", "mmr"):
            with pytest.raises(EmptyTextError, match="query_str is empty or whitespace-only"):
                filled.query(_query(text, mode=mode))
        with pytest.raises(EmptyTextError, match="query is empty or whitespace-only"):
            filled.store.search(text)
        with pytest.raises(EmptyTextError, match="query is empty or whitespace-only"):
            filled.store.search_mmr(text)
        with pytest.raises(EmptyTextError):
            filled.as_index().as_retriever().retrieve(text)


def test_scores_of_a_many_chunk_query_stay_cosine_like(
    filled: LandmarkVectorStore, manpage_documents: list[Document]
) -> None:
    text = manpage_documents[1].text[:1500]
    assert len(filled.store.encoder.encode_queries(text).chunk_vectors) >= 5
    for mode, kwargs in [("default", {}), ("default", {"rerank": "node"}), ("hybrid", {}), ("sparse", {}),
                         ("mmr", {})]:
        scores = filled.query(_query(text, k=10, mode=mode), **kwargs).similarities
        assert scores and all(-1.0 <= score <= 1.0 for score in scores), (mode, kwargs, scores)


def test_delete_nodes_removes_only_those_nodes(filled: LandmarkVectorStore, nodes: list[TextNode]) -> None:
    gone = [nodes[0].node_id, nodes[-1].node_id]
    filled.delete_nodes(gone)
    left = {node.node_id for node in filled.get_nodes()}
    assert left == {node.node_id for node in nodes} - set(gone)
    assert {nodes[0].ref_doc_id, nodes[-1].ref_doc_id} <= set(filled.store.doc_ids())
    filled.delete_nodes(node_ids=[])
    assert len(filled.get_nodes()) == len(left)
    asyncio.run(filled.adelete_nodes(filters=MetadataFilters(filters=[MetadataFilter(key="rank", value=2)])))
    assert {node.metadata["rank"] for node in filled.get_nodes()} == {0, 1, 3, 4, 5}
    assert filled.get_nodes(node_ids=[]) == []


def test_node_ids_are_unique_across_documents(vector_store: LandmarkVectorStore, nodes: list[TextNode]) -> None:
    document = [node for node in nodes if node.ref_doc_id == nodes[0].ref_doc_id]
    vector_store.add(document)
    vector_store.add(document)  # the document's second version: its nodes sit in the other point-id slot
    moving = document[1].model_copy(update={"relationships": {NodeRelationship.SOURCE: RelatedNodeInfo(node_id="b")}})
    vector_store.add([moving])
    (stored,) = vector_store.get_nodes(node_ids=[moving.node_id])
    assert stored.ref_doc_id == "b"
    assert vector_store.store.count() == len(document)
    found = vector_store.query(_query(document[1].text[:300], k=len(document))).ids
    assert found.count(moving.node_id) == 1


def test_delete_of_a_document_spares_a_node_without_source_of_the_same_id(
    vector_store: LandmarkVectorStore, nodes: list[TextNode]
) -> None:
    sourced = nodes[0].model_copy(update={"relationships": {NodeRelationship.SOURCE: RelatedNodeInfo(node_id="x")}})
    orphan = TextNode(id_="x", text=nodes[1].text, embedding=nodes[1].embedding)
    vector_store.add([sourced, orphan])
    vector_store.delete("x")
    (left,) = vector_store.get_nodes()
    assert left.node_id == "x" and left.ref_doc_id is None
    assert vector_store.query(_query(k=3, doc_ids=["x"])).ids == []
    with pytest.raises(InvalidInputError, match="reserved"):
        vector_store.add([nodes[2].model_copy(update={"relationships": {
            NodeRelationship.SOURCE: RelatedNodeInfo(node_id=NO_SOURCE + "y")}})])


def test_close_releases_the_store_and_works_as_a_context_manager(
    tmp_path: Path, embed_model: LandmarkEmbedding, nodes: list[TextNode]
) -> None:
    with LandmarkVectorStore(path=tmp_path / "s", embed_model=embed_model) as vector_store:
        vector_store.add(nodes[:3])
    with LandmarkStore(tmp_path / "s", encoder=embed_model.encoder) as store:  # the lock is free again
        assert store.count() == 3
        LandmarkVectorStore(store=store).close()  # a store given to it stays open
        assert store.count() == 3


def test_a_reader_opens_an_index_without_settings_or_an_llm(
    tmp_path: Path, embed_model: LandmarkEmbedding, nodes: list[TextNode], monkeypatch: pytest.MonkeyPatch
) -> None:
    with LandmarkVectorStore(path=tmp_path / "s", embed_model=embed_model) as writer:
        writer.add(nodes[:6])
    monkeypatch.setattr(Settings, "_embed_model", None)  # a new process: nothing configured
    monkeypatch.setattr(Settings, "_llm", None)
    with LandmarkVectorStore(path=tmp_path / "s") as reader:
        index = reader.as_index()
        assert index._embed_model is reader.embed_model
        assert reader.embed_model.encoder.fingerprint == embed_model.encoder.fingerprint
        assert len(index.as_retriever(similarity_top_k=2).retrieve(QUERY)) == 2
        index.insert(Document(text="pwd prints the name of the current working directory", id_="pwd"))
        assert "pwd" in reader.store.doc_ids()
    assert Settings._embed_model is None


def test_reads_a_store_written_by_the_core_api(
    tmp_path: Path, minilm_encoder, embed_model: LandmarkEmbedding, manpage_documents: list[Document]
) -> None:
    text = manpage_documents[0].text
    with LandmarkStore(tmp_path / "core", encoder=minilm_encoder) as store:
        store.upsert_document("page", text, {"rank": 0})
    vector_store = LandmarkVectorStore(path=tmp_path / "core", embed_model=embed_model)
    try:
        node = vector_store.query(_query(k=1)).nodes[0]
        assert node.ref_doc_id == "page" and node.metadata == {
            "rank": 0, EVIDENCE_KEY: node.metadata[EVIDENCE_KEY], CHUNK_SCORES_KEY: node.metadata[CHUNK_SCORES_KEY]
        }
        assert node.text == text[node.start_char_idx : node.end_char_idx]
    finally:
        vector_store.store.close()


def test_nodes_are_light_and_a_node_without_its_vectors_is_encoded_again(
    tmp_path: Path, embed_model: LandmarkEmbedding, manpage_documents
) -> None:
    """Chunk vectors travel on the node in memory only: nodes JSON-round-tripped (as through a docstore, the ingestion
    cache or another process) reach the store without them, and the store encodes them again. A document's nodes
    arriving together are joined back into its text and encoded as the parser did: the same vectors. A node arriving
    alone is encoded alone: the same chunks, close vectors (in document context a chunk then sees fewer neighbours)."""
    from llama_index.core.schema import TextNode as Node

    nodes = LandmarkNodeParser(embed_model=embed_model).get_nodes_from_documents(manpage_documents[:2])
    assert all("chunk_vectors" not in node.model_dump_json() for node in nodes)

    def elsewhere(node: TextNode) -> TextNode:  # through JSON (a plain TextNode: no vectors), under another id
        copy = Node.model_validate_json(node.model_dump_json())
        copy.id_ = node.node_id + "-copy"
        return copy

    alone = nodes[1]
    with LandmarkVectorStore(path=tmp_path / "a", embed_model=embed_model) as direct, \
            LandmarkVectorStore(path=tmp_path / "b", embed_model=embed_model) as again, \
            LandmarkVectorStore(path=tmp_path / "c", embed_model=embed_model) as single:
        direct.add(nodes)
        again.add([elsewhere(node) for node in reversed(nodes)])  # any order
        single.add([elsewhere(alone)])
        first = {r.node_id: r.chunk_vectors for r in direct.store.get_nodes()}
        second = {r.node_id.removesuffix("-copy"): r.chunk_vectors for r in again.store.get_nodes()}
        (lone,) = single.store.get_nodes()
    assert first.keys() == second.keys() == {node.node_id for node in nodes}
    for node_id, chunks in first.items():
        np.testing.assert_allclose(second[node_id], chunks, atol=1e-5)
    assert lone.chunk_vectors.shape == first[alone.node_id].shape
    assert float(np.mean(np.sum(lone.chunk_vectors * first[alone.node_id], axis=1))) > 0.8
