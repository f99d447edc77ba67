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


def test_qdrant_conditions_translate_to_store_conditions() -> None:
    native = models.Filter(
        must=[
            models.FieldCondition(key="tag", match=models.MatchExcept(**{"except": ["a", "b"]})),
            models.FieldCondition(key="year", range=models.Range(gte=2020, lt=2026)),
            models.FieldCondition(key="title", match=models.MatchText(text="tar")),
            models.FieldCondition(key="title", match=models.MatchSubstring(substring="ar")),
            models.IsEmptyCondition(is_empty=models.PayloadField(key="notes")),
            models.HasIdCondition(has_id=["n1"]),
            models.FieldCondition(key="lang", is_empty=False),
        ],
    )
    assert to_store_filter(None, qdrant_filters=native) == Filter(must=(Filter(must=(
        FieldCondition("tag", "nin", ["a", "b"]),
        Filter(must=(FieldCondition("year", "gte", 2020), FieldCondition("year", "lt", 2026))),
        FieldCondition("title", "text", "tar"),
        FieldCondition("title", "substring", "ar"),
        FieldCondition("notes", "is_empty"),
        FieldCondition("node_id", "in", ["n1"]),
        Filter(must_not=(FieldCondition("lang", "is_empty"),)),
    )),))


@pytest.mark.parametrize(
    ("native", "named"),
    [
        (models.Filter(must=[models.FieldCondition(key="geo", geo_radius=models.GeoRadius(
            center=models.GeoPoint(lon=0, lat=0), radius=1))]), "geo_radius"),
        (models.Filter(must=[models.IsNullCondition(is_null=models.PayloadField(key="k"))]), "IsNullCondition"),
        (models.Filter(must=[models.FieldCondition(key="k", match=models.MatchPrefix(prefix="a"))]), "MatchPrefix"),
        (models.Filter(should=[models.FieldCondition(key="k", match=models.MatchValue(value=1))], min_should=
                       models.MinShould(conditions=[], min_count=1)), "min_should"),
        ({"must": []}, "qdrant_client.models.Filter"),
    ],
)
def test_qdrant_filters_the_store_cannot_run_are_refused_by_name(native: object, named: str) -> None:
    with pytest.raises(InvalidInputError, match=named):
        to_store_filter(None, qdrant_filters=native)


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
