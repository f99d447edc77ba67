"""Two filter rules of LandmarkVectorStore: a bytes value is refused (never read as a list of ints), and in a query
an empty ``doc_ids`` list restricts to nothing while an empty ``node_ids`` list restricts nothing (docs/llamaindex.md
says why)."""

from __future__ import annotations

import pytest
from llama_index.core.schema import TextNode
from llama_index.core.vector_stores.types import FilterOperator, MetadataFilter, MetadataFilters, VectorStoreQuery

from llama_index.vector_stores.landmark import LandmarkVectorStore
from lmk_rag.errors import InvalidInputError

QUERY = "get the current working directory of the calling process"


def _ids(store: LandmarkVectorStore, nodes: list[TextNode], **kwargs) -> set[str]:
    return set(store.query(VectorStoreQuery(query_str=QUERY, similarity_top_k=len(nodes), **kwargs)).ids)


def test_a_bytes_filter_value_is_refused(filled: LandmarkVectorStore) -> None:
    # pydantic refuses bytes in MetadataFilter(...); model_construct (and code that builds filters so) does not
    excluded = MetadataFilter.model_construct(key="parity", operator=FilterOperator.NIN, value=b"odd")
    with pytest.raises(InvalidInputError, match=r"bytes b'odd'"):
        filled.query(VectorStoreQuery(query_str=QUERY, filters=MetadataFilters(filters=[excluded])))


@pytest.mark.parametrize("mode", ["default", "hybrid", "sparse", "mmr"])
def test_empty_doc_ids_restrict_to_nothing_and_empty_node_ids_restrict_nothing(
    filled: LandmarkVectorStore, nodes: list[TextNode], mode: str
) -> None:
    every = _ids(filled, nodes, mode=mode)
    assert every and (mode == "sparse" or len(every) == len(nodes))  # sparse: the nodes sharing a word
    assert _ids(filled, nodes, node_ids=[], mode=mode) == every  # what as_retriever passes for a store keeping text
    assert _ids(filled, nodes, doc_ids=[], mode=mode) == set()  # an emptied allow-list never opens the whole store
    assert _ids(filled, nodes, doc_ids=[], node_ids=[], mode=mode) == set()
    assert _ids(filled, nodes, doc_ids=["missing"]) == _ids(filled, nodes, node_ids=["missing"]) == set()
    assert filled.get_nodes(node_ids=[]) == []  # get_nodes and delete_nodes: an empty list names no node
