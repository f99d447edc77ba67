"""Bad inputs through the LlamaIndex store: typed errors (or LlamaIndex's own validation), nothing stored lost."""

from __future__ import annotations

import pytest
from llama_index.core.schema import TextNode
from llama_index.core.vector_stores.types import (
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryMode,
)

from lmk_rag.errors import InvalidInputError, LmkRagError


@pytest.fixture
def filled(vector_store, manpage_documents, embed_model):
    from llama_index.node_parser.landmark import LandmarkNodeParser

    nodes = LandmarkNodeParser(embed_model=embed_model).get_nodes_from_documents(manpage_documents[:2])
    vector_store.add(nodes)
    return vector_store, len(nodes)


BAD_QUERIES = [
    VectorStoreQuery(query_str="archives", similarity_top_k=0),
    VectorStoreQuery(query_str="archives", similarity_top_k=-3),
    VectorStoreQuery(similarity_top_k=2),  # neither text nor embedding
    VectorStoreQuery(query_embedding=[0.1] * 7, similarity_top_k=2),  # wrong size
    VectorStoreQuery(query_embedding=[float("nan")] * 384, similarity_top_k=2),  # nothing to compare
    VectorStoreQuery(query_embedding=[0.0] * 384, similarity_top_k=2),  # no direction
    VectorStoreQuery(query_str="archives", mode=VectorStoreQueryMode.HYBRID, alpha=1.5),
    VectorStoreQuery(query_str="archives", mode=VectorStoreQueryMode.SVM),
    VectorStoreQuery(query_str="archives", filters=MetadataFilters(
        filters=[MetadataFilter(key="rank", value=[1, 2], operator=FilterOperator.GT)])),
]


@pytest.mark.parametrize("query", BAD_QUERIES, ids=range(len(BAD_QUERIES)))
def test_bad_queries_are_typed_errors_and_lose_nothing(filled, query) -> None:
    store, n_nodes = filled
    with pytest.raises((LmkRagError, NotImplementedError)):
        store.query(query)
    assert len(store.get_nodes()) == n_nodes
    assert store.query(VectorStoreQuery(query_str="archives", similarity_top_k=1)).nodes


def test_bad_nodes_are_refused_and_lose_nothing(filled) -> None:
    store, n_nodes = filled
    vector = [1.0] + [0.0] * 383  # a valid unit vector of the store's size
    nan, zeros = [float("nan")] * 384, [0.0] * 384
    bad = [
        [TextNode(text="no embedding")],
        [TextNode(text="bad metadata", embedding=vector, metadata={"when": object()})],
        [TextNode(text="lone \ud800 surrogate", embedding=vector)],
        [TextNode(text="nan", embedding=nan)],
        [TextNode(text="zeros", embedding=zeros)],
        [TextNode(text="reversed", embedding=vector, start_char_idx=50, end_char_idx=10)],
        [TextNode(text="fine", embedding=vector), "not a node"],
        None,
        "a string",
        TextNode(text="one node, not a list", embedding=vector),
    ]
    for nodes in bad:
        with pytest.raises(LmkRagError):
            store.add(nodes)
    assert len(store.get_nodes()) == n_nodes
    for call in (lambda: store.delete_nodes(node_ids="abc"), lambda: store.get_nodes(node_ids="abc")):
        with pytest.raises(LmkRagError, match="node_ids"):
            call()
    assert len(store.get_nodes()) == n_nodes


@pytest.mark.parametrize("text", [None, 5, b"bytes", ["a list"]], ids=["none", "int", "bytes", "list"])
def test_embedding_a_text_that_is_not_a_str_is_a_typed_error(embed_model, text) -> None:
    with pytest.raises(InvalidInputError, match="must be a str"):
        embed_model.get_text_embedding(text)
    with pytest.raises(InvalidInputError, match="text 1 must be a str"):
        embed_model.get_text_embedding_batch(["fine", text])


@pytest.mark.parametrize("kwargs", [
    {"max_length": 0}, {"context": "x"}, {"backend": "tf"}, {"window_overlap": -1}, {"embed_batch_size": 0},
], ids=lambda kwargs: next(iter(kwargs)))
def test_bad_embedding_fields_are_typed_errors_naming_the_field(kwargs) -> None:
    from llama_index.embeddings.landmark import LandmarkEmbedding

    with pytest.raises(InvalidInputError, match=next(iter(kwargs))) as caught:
        LandmarkEmbedding(**kwargs)
    assert isinstance(caught.value, ValueError)  # what LlamaIndex code catches


@pytest.mark.parametrize("kwargs", [{"node_tokens": 0}, {"node_tokens": "many"}], ids=["zero", "string"])
def test_bad_node_parser_fields_are_typed_errors(embed_model, kwargs) -> None:
    from llama_index.node_parser.landmark import LandmarkNodeParser

    with pytest.raises(InvalidInputError, match="LandmarkNodeParser: node_tokens="):
        LandmarkNodeParser(embed_model=embed_model, **kwargs)


@pytest.mark.parametrize("documents", ["text", None, ["text"]], ids=["str", "none", "list-of-str"])
def test_node_parser_refuses_what_is_not_documents(embed_model, documents) -> None:
    from llama_index.node_parser.landmark import LandmarkNodeParser

    with pytest.raises(InvalidInputError, match=r"Document\(text=\.\.\.\)"):
        LandmarkNodeParser(embed_model=embed_model).get_nodes_from_documents(documents)


def test_the_all_operator_with_a_single_string_is_a_typed_error() -> None:
    from llama_index.vector_stores.landmark.filters import to_store_filter

    with pytest.raises(InvalidInputError, match=r"'all' needs a list"):
        to_store_filter(MetadataFilters(filters=[MetadataFilter(key="tags", value="abc", operator=FilterOperator.ALL)]))
    built = to_store_filter(MetadataFilters(filters=[MetadataFilter(key="tags", value=["a", "b"],
                                                                    operator=FilterOperator.ALL)]))
    assert [condition.value for condition in built.must[0].must[0].must] == ["a", "b"]


def test_node_ids_restrict_and_hybrid_without_text_is_dense(filled, embed_model) -> None:
    store, _ = filled
    one = store.get_nodes()[0]
    hits = store.query(VectorStoreQuery(query_str="archives", node_ids=[one.node_id], similarity_top_k=3)).nodes
    assert [hit.node_id for hit in hits] == [one.node_id]
    embedding = embed_model.get_query_embedding("archives")
    hybrid = store.query(VectorStoreQuery(query_embedding=embedding, mode=VectorStoreQueryMode.HYBRID,
                                          similarity_top_k=3))
    dense = store.query(VectorStoreQuery(query_embedding=embedding, similarity_top_k=3))
    assert [n.node_id for n in hybrid.nodes] == [n.node_id for n in dense.nodes] and len(dense.nodes) == 3
    with pytest.raises(InvalidInputError, match="query_str is None"):
        store.query(VectorStoreQuery(query_embedding=embedding, mode=VectorStoreQueryMode.SPARSE))
