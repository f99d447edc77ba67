"""A retriever's ``vector_store_kwargs``: ``qdrant_filters`` (QdrantVectorStore's native filter) is honoured on the
Edge store and the qdrant-client backend, beside LlamaIndex ``filters``; any other unknown key is refused."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from llama_index.core.schema import TextNode
from llama_index.core.vector_stores.types import FilterOperator, MetadataFilter, MetadataFilters, VectorStoreQuery
from qdrant_client import QdrantClient, models

from llama_index.embeddings.landmark import LandmarkEmbedding
from llama_index.vector_stores.landmark import LandmarkVectorStore, to_store_filter
from lmk_rag.errors import InvalidInputError
from lmk_rag.store import FieldCondition, Filter

QUERY = "get the current working directory of the calling process"


@pytest.fixture(params=["edge", "qdrant-client"])
def filled(request: pytest.FixtureRequest, tmp_path: Path, embed_model: LandmarkEmbedding,
           nodes: list[TextNode]) -> Iterator[LandmarkVectorStore]:
    """The nodes in an Edge store on disk, or in qdrant-client's local mode on disk."""
    if request.param == "edge":
        store = LandmarkVectorStore(path=tmp_path / "store", embed_model=embed_model)
    else:
        store = LandmarkVectorStore("docs", client=QdrantClient(path=str(tmp_path / "local")), embed_model=embed_model)
    store.add(nodes)
    yield store
    store.close()


def _ranks(store: LandmarkVectorStore, nodes: list[TextNode], **kwargs) -> set[int]:
    """The ``rank`` metadata of every node a retriever over ``store`` returns."""
    retriever = store.as_index().as_retriever(similarity_top_k=len(nodes), **kwargs)
    return {result.node.metadata["rank"] for result in retriever.retrieve(QUERY)}


def test_qdrant_filters_restrict_a_retriever(filled: LandmarkVectorStore, nodes: list[TextNode]) -> None:
    odd = models.Filter(must=[models.FieldCondition(key="parity", match=models.MatchValue(value="odd"))])
    assert _ranks(filled, nodes) == {0, 1, 2, 3, 4, 5}
    assert _ranks(filled, nodes, vector_store_kwargs={"qdrant_filters": odd}) == {1, 3, 5}


def test_qdrant_filters_and_metadata_filters_both_hold(filled: LandmarkVectorStore, nodes: list[TextNode]) -> None:
    odd = models.Filter(must=[models.FieldCondition(key="parity", match=models.MatchValue(value="odd"))])
    high = MetadataFilters(filters=[MetadataFilter(key="rank", value=2, operator=FilterOperator.GTE)])
    assert _ranks(filled, nodes, filters=high, vector_store_kwargs={"qdrant_filters": odd}) == {3, 5}
    not_three = models.Filter(
        should=[models.FieldCondition(key="rank", range=models.Range(lt=2)),
                models.FieldCondition(key="rank", match=models.MatchAny(any=[4, 5]))],
        must_not=models.FieldCondition(key="rank", match=models.MatchValue(value=5)),
    )
    assert _ranks(filled, nodes, vector_store_kwargs={"qdrant_filters": not_three}) == {0, 1, 4}
    result = filled.query(VectorStoreQuery(query_str=QUERY, similarity_top_k=3), qdrant_filters=odd)
    assert result.nodes and {node.metadata["parity"] for node in result.nodes} == {"odd"}


def test_qdrant_filters_are_the_stores_native_filter_anded_with_the_rest() -> None:
    """The translation and its refusals are the store's (tests/store/test_native_filters.py)."""
    native = models.Filter(must=[models.HasIdCondition(has_id=["n1"])])
    assert to_store_filter(None, doc_ids=["d"], qdrant_filters=native) == Filter(must=(
        FieldCondition("doc_id", "in", ["d"]), Filter.from_qdrant(native)))
    geo = models.Filter(must=[models.FieldCondition(key="geo", geo_radius=models.GeoRadius(
        center=models.GeoPoint(lon=0, lat=0), radius=1))])
    with pytest.raises(InvalidInputError, match="geo_radius"):
        to_store_filter(None, qdrant_filters=geo)
    with pytest.raises(InvalidInputError, match=r"qdrant_client\.models\.Filter"):
        to_store_filter(None, qdrant_filters={"must": []})


def test_an_unknown_vector_store_kwarg_is_refused_with_the_close_name(
    filled: LandmarkVectorStore, nodes: list[TextNode]
) -> None:
    with pytest.raises(TypeError, match=r"'alpah' \(did you mean 'alpha'\?\)"):
        _ranks(filled, nodes, vector_store_kwargs={"alpah": 0.0})
    with pytest.raises(TypeError, match="vector_store_kwargs"):
        filled.query(VectorStoreQuery(query_str=QUERY), search_params={"hnsw_ef": 8})


def test_add_and_delete_refuse_keyword_arguments_they_would_ignore(vector_store, nodes) -> None:
    with pytest.raises(TypeError, match=r"LandmarkVectorStore.add\(\) got unexpected keyword argument\(s\) 'batch'"):
        vector_store.add(nodes, batch=10)
    vector_store.add(nodes)
    ref_doc_id = nodes[0].ref_doc_id
    with pytest.raises(TypeError, match=r"delete\(\) got unexpected keyword argument\(s\) 'force'"):
        vector_store.delete(ref_doc_id, force=True)
    with pytest.raises(TypeError, match=r"delete_nodes\(\) got unexpected keyword argument\(s\) 'wait'"):
        vector_store.delete_nodes([nodes[0].node_id], wait=True)
    assert len(vector_store.get_nodes(node_ids=[node.node_id for node in nodes])) == len(nodes)  # nothing deleted
