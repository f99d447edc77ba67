"""LlamaIndex's own tests of its core vector store, ported to LandmarkVectorStore.

Origin: run-llama/llama_index (MIT licence), ``llama-index-core/tests/vector_stores/test_simple.py`` (the
``SimpleVectorStoreTest`` cases), ``test_simple_doc_ids.py`` and ``test_simple_mmr_threshold.py``. Adapted only as
allowed for this port: each store is a LandmarkVectorStore on a fresh Qdrant Edge folder; the 2-d hand-written
embeddings are real LandmarkEmbedding vectors of texts that play the same roles (named with each fixture); queries
are given as text (the role of ``[1.0, 1.0]`` is the text of the node embedded there), or as the real query vector
where upstream queries by embedding alone; ``unittest.TestCase`` methods are plain functions calling the same
assertions. Assertions are unchanged (``doc_ids=[]`` finds nothing, as upstream: docs/llamaindex.md says why an
empty ``node_ids`` list is read the other way).

Not ported, and why:

- ``test_from_persist_dir``, ``test_from_namespaced_persist_dir``: SimpleVectorStore's JSON persistence; a
  LandmarkVectorStore lives in its folder (reopening it is tested in test_vector_store.py).
- ``test_document_filter_with_no_candidates_in_learner_modes``: the learner modes (SVM, linear and logistic
  regression fit on every stored vector) are not supported (``NotImplementedError``, see docs/llamaindex.md).
- ``test_mmr_threshold_sources``' spy on ``get_top_k_mmr_embeddings`` (pytest-mock): MMR runs inside Qdrant, so
  the threshold is checked by the ids it picks, which the parametrisation keeps.
"""

from __future__ import annotations

import unittest
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.schema import NodeRelationship, QueryBundle, RelatedNodeInfo, TextNode
from llama_index.core.vector_stores.types import (
    ExactMatchFilter,
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryMode,
)

from llama_index.embeddings.landmark import LandmarkEmbedding
from llama_index.vector_stores.landmark import LandmarkVectorStore

_NODE_ID_WEIGHT_1_RANK_A = "AF3BE6C4-5F43-4D74-B075-6B0E07900DE8"
_NODE_ID_WEIGHT_2_RANK_C = "7D9CD555-846C-445C-A9DD-F8924A01411D"
_NODE_ID_WEIGHT_3_RANK_C = "452D24AB-F185-414C-A352-590B4B9EE51B"

# the roles of [1, 0], [0, 1] and [1, 1]: two unlike texts and one holding both (also the query, [1, 1])
_TAR = "tar saves many files together into a single archive"
_GZIP = "gzip reduces the size of files with Lempel-Ziv coding"
_BOTH = f"{_TAR}, and {_GZIP}"

check = unittest.TestCase()


def _node_embeddings_for_test(embed: Callable[[str], list[float]]) -> list[TextNode]:
    return [
        TextNode(
            text=_TAR,
            id_=_NODE_ID_WEIGHT_1_RANK_A,
            embedding=embed(_TAR),
            relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id="test-0")},
            metadata={"weight": 1.0, "rank": "a", "quality": ["medium", "high"], "identifier": "6FTR78Yun"},
        ),
        TextNode(
            text=_GZIP,
            id_=_NODE_ID_WEIGHT_2_RANK_C,
            embedding=embed(_GZIP),
            relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id="test-1")},
            metadata={"weight": 2.0, "rank": "c", "quality": ["medium"], "identifier": "6FTR78Ygl"},
        ),
        TextNode(
            text=_BOTH,
            id_=_NODE_ID_WEIGHT_3_RANK_C,
            embedding=embed(_BOTH),
            relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id="test-2")},
            metadata={"weight": 3.0, "rank": "c", "quality": ["low", "medium", "high"], "identifier": "6FTR78Ztl"},
        ),
    ]


@pytest.fixture
def embed(embed_model: LandmarkEmbedding) -> Callable[[str], list[float]]:
    """Text -> its real LandmarkEmbedding vector, each text embedded once."""
    cache: dict[str, list[float]] = {}

    def _embed(text: str) -> list[float]:
        if text not in cache:
            cache[text] = embed_model.get_text_embedding(text)
        return cache[text]

    return _embed


@pytest.fixture
def new_store(tmp_path: Path, embed_model: LandmarkEmbedding) -> Iterator[Callable[[], LandmarkVectorStore]]:
    """Makes empty stores (upstream's ``SimpleVectorStore()``), each in its own folder; closed at the end."""
    opened: list[LandmarkVectorStore] = []

    def _new() -> LandmarkVectorStore:
        opened.append(LandmarkVectorStore(path=tmp_path / f"s{len(opened)}", embed_model=embed_model))
        return opened[-1]

    yield _new
    for store in opened:
        store.close()


@pytest.fixture
def simple_vector_store(new_store, embed) -> LandmarkVectorStore:
    store = new_store()
    store.add(_node_embeddings_for_test(embed))
    return store


def _query(**kwargs: Any) -> VectorStoreQuery:
    return VectorStoreQuery(query_str=_BOTH, **kwargs)


# ---------------------------------------------------------------- test_simple.py: SimpleVectorStoreTest


def test_query_without_filters_returns_all_rows_sorted_by_similarity(simple_vector_store) -> None:
    query = _query(similarity_top_k=3)
    result = simple_vector_store.query(query)
    assert result.ids is not None
    check.assertCountEqual(
        result.ids,
        [
            _NODE_ID_WEIGHT_1_RANK_A,
            _NODE_ID_WEIGHT_2_RANK_C,
            _NODE_ID_WEIGHT_3_RANK_C,
        ],
    )
    check.assertEqual(result.ids[0], _NODE_ID_WEIGHT_3_RANK_C)


def test_query_with_filters_returns_multiple_matches(simple_vector_store) -> None:
    filters = MetadataFilters(filters=[ExactMatchFilter(key="rank", value="c")])
    query = _query(filters=filters, similarity_top_k=3)
    result = simple_vector_store.query(query)
    check.assertEqual(result.ids, [_NODE_ID_WEIGHT_3_RANK_C, _NODE_ID_WEIGHT_2_RANK_C])


def test_query_with_filter_applies_top_k(simple_vector_store) -> None:
    filters = MetadataFilters(filters=[ExactMatchFilter(key="rank", value="c")])
    query = _query(filters=filters, similarity_top_k=1)
    result = simple_vector_store.query(query)
    check.assertEqual(result.ids, [_NODE_ID_WEIGHT_3_RANK_C])


def test_query_with_filter_applies_node_id_filter(simple_vector_store) -> None:
    filters = MetadataFilters(filters=[ExactMatchFilter(key="rank", value="c")])
    query = _query(filters=filters, similarity_top_k=3, node_ids=[_NODE_ID_WEIGHT_3_RANK_C])
    result = simple_vector_store.query(query)
    check.assertEqual(result.ids, [_NODE_ID_WEIGHT_3_RANK_C])


def test_query_with_exact_filters_returns_single_match(simple_vector_store) -> None:
    filters = MetadataFilters(
        filters=[
            ExactMatchFilter(key="rank", value="c"),
            ExactMatchFilter(key="weight", value=2.0),
        ]
    )
    query = _query(filters=filters)
    result = simple_vector_store.query(query)
    check.assertEqual(result.ids, [_NODE_ID_WEIGHT_2_RANK_C])


def test_query_with_contradictive_filter_returns_no_matches(simple_vector_store) -> None:
    filters = MetadataFilters(
        filters=[
            ExactMatchFilter(key="weight", value=2),
            ExactMatchFilter(key="weight", value=3),
        ]
    )
    query = _query(filters=filters)
    result = simple_vector_store.query(query)
    assert result.ids is not None
    check.assertEqual(len(result.ids), 0)


def test_query_with_filter_on_unknown_field_returns_no_matches(simple_vector_store) -> None:
    filters = MetadataFilters(filters=[ExactMatchFilter(key="unknown_field", value="c")])
    query = _query(filters=filters)
    result = simple_vector_store.query(query)
    assert result.ids is not None
    check.assertEqual(len(result.ids), 0)


def test_delete_removes_document_from_query_results(simple_vector_store) -> None:
    simple_vector_store.delete("test-1")
    query = _query(similarity_top_k=2)
    result = simple_vector_store.query(query)
    check.assertEqual(
        result.ids,
        [_NODE_ID_WEIGHT_3_RANK_C, _NODE_ID_WEIGHT_1_RANK_A],
    )


def test_query_with_filters_with_filter_condition(simple_vector_store) -> None:
    # test OR filter
    filters = MetadataFilters(
        filters=[
            ExactMatchFilter(key="rank", value="c"),
            ExactMatchFilter(key="weight", value=1.0),
        ],
        condition=FilterCondition.OR,
    )
    query = _query(filters=filters, similarity_top_k=3)
    result = simple_vector_store.query(query)
    check.assertEqual(len(result.ids), 3)

    # test AND filter
    filters = MetadataFilters(
        filters=[
            ExactMatchFilter(key="rank", value="c"),
            ExactMatchFilter(key="weight", value=1.0),
        ],
        condition=FilterCondition.AND,
    )
    query = _query(filters=filters, similarity_top_k=3)
    result = simple_vector_store.query(query)
    check.assertEqual(len(result.ids), 0)


def test_query_with_not_filter_returns_matches(simple_vector_store) -> None:
    # Exclude all nodes where rank == "a"
    filters = MetadataFilters(
        filters=[
            MetadataFilter(key="rank", operator=FilterOperator.EQ, value="a"),
        ],
        condition=FilterCondition.NOT,
    )
    query = _query(filters=filters, similarity_top_k=3)
    result = simple_vector_store.query(query)
    assert result.ids is not None
    # Only the nodes with rank "c" should remain.
    check.assertEqual(len(result.ids), 2)


@pytest.mark.parametrize(
    ("key", "operator", "value", "expected"),
    [
        ("weight", FilterOperator.EQ, 1.0, 1),  # test_query_with_equal_filter_returns_matches
        ("weight", FilterOperator.NE, 1.0, 2),  # ..._notequal_...
        ("weight", FilterOperator.GT, 1.5, 2),  # ..._greaterthan_...
        ("weight", FilterOperator.GTE, 1.0, 3),  # ..._greaterthanequal_...
        ("weight", FilterOperator.LT, 1.1, None),  # ..._lessthan_... (upstream asserts no count)
        ("weight", FilterOperator.LTE, 1.0, 1),  # ..._lessthanequal_...
        ("rank", FilterOperator.IN, ["a", "c"], 3),  # ..._in_...
        ("rank", FilterOperator.NIN, ["c"], 1),  # ..._notin_...
        ("quality", FilterOperator.CONTAINS, "high", 2),  # ..._contains_...
        ("identifier", FilterOperator.TEXT_MATCH, "6FTR78Y", 2),  # ..._textmatch_...
        ("quality", FilterOperator.ANY, ["high", "low"], 2),  # ..._any_...
        ("quality", FilterOperator.ALL, ["medium", "high"], 2),  # ..._all_...
    ],
)
def test_query_with_operator_filter_returns_matches(
    simple_vector_store, key: str, operator: FilterOperator, value: Any, expected: int | None
) -> None:
    """The one-operator cases of ``SimpleVectorStoreTest``, one parameter set each (named in the comments)."""
    filters = MetadataFilters(filters=[MetadataFilter(key=key, operator=operator, value=value)])
    query = _query(filters=filters, similarity_top_k=3)
    result = simple_vector_store.query(query)
    assert result.ids is not None
    if expected is not None:
        check.assertEqual(len(result.ids), expected)


def test_query_with_is_empty_filter_returns_matches(simple_vector_store, embed) -> None:
    filters = MetadataFilters(
        filters=[MetadataFilter(key="not_existed_key", operator=FilterOperator.IS_EMPTY, value=None)]
    )
    query = _query(filters=filters, similarity_top_k=3)
    result = simple_vector_store.query(query)
    check.assertEqual(len(result.ids), len(_node_embeddings_for_test(embed)))


def test_clear(simple_vector_store) -> None:
    simple_vector_store.clear()
    query = _query(similarity_top_k=3)
    result = simple_vector_store.query(query)
    check.assertEqual(len(result.ids), 0)


def test_delete_nodes(simple_vector_store) -> None:
    simple_vector_store.delete_nodes([_NODE_ID_WEIGHT_1_RANK_A, _NODE_ID_WEIGHT_2_RANK_C])
    query = _query(similarity_top_k=3)
    result = simple_vector_store.query(query)
    check.assertEqual(result.ids, [_NODE_ID_WEIGHT_3_RANK_C])


# ---------------------------------------------------------------- test_simple_doc_ids.py


@pytest.fixture()
def document_nodes(embed) -> list[TextNode]:
    # upstream embeds chunk 0 at [1, 0] and chunk 1 at [1, 1]: the texts name their document and chunk
    return [
        TextNode(
            id_=f"{doc}-{chunk}",
            text=f"Document {doc}, chunk {chunk}",
            embedding=embed(f"Document {doc}, chunk {chunk}"),
            relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=doc)},
            metadata={"chunk": chunk},
        )
        for doc in ["a", "b"]
        for chunk in [0, 1]
    ]


@pytest.mark.parametrize(
    ("doc_ids", "expected"),
    [
        (None, {"a-0", "a-1", "b-0", "b-1"}),
        ([], set()),
        (["missing"], set()),
        (["a"], {"a-0", "a-1"}),
    ],
)
@pytest.mark.parametrize("mode", [VectorStoreQueryMode.DEFAULT, VectorStoreQueryMode.MMR])
def test_retriever_constrains_source_documents(
    document_nodes: list[TextNode],
    doc_ids: list[str] | None,
    expected: set[str],
    mode: VectorStoreQueryMode,
    new_store,
    embed_model: LandmarkEmbedding,
) -> None:
    index = VectorStoreIndex(
        document_nodes,
        embed_model=embed_model,
        storage_context=StorageContext.from_defaults(vector_store=new_store()),
    )
    retriever = index.as_retriever(doc_ids=doc_ids, similarity_top_k=10, vector_store_query_mode=mode)

    results = retriever.retrieve(QueryBundle(query_str="test", embedding=embed_model.get_query_embedding("test")))

    assert {item.node.node_id for item in results} == expected


def test_document_node_and_metadata_filters_intersect(document_nodes: list[TextNode], new_store) -> None:
    store = new_store()
    store.add(document_nodes)
    store.add(
        [
            TextNode(
                id_="a-2",
                embedding=document_nodes[0].embedding,  # upstream: [1.0, 0.0], chunk 0's role
                relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id="a")},
                metadata={"chunk": 1},
            )
        ]
    )
    result = store.query(
        VectorStoreQuery(
            query_str="Document a, chunk 0",
            similarity_top_k=10,
            doc_ids=["a"],
            node_ids=["a-0", "a-1", "b-1"],
            filters=MetadataFilters(filters=[ExactMatchFilter(key="chunk", value=1)]),
        )
    )
    assert result.ids == ["a-1"]


@pytest.mark.parametrize(("doc_ids", "expected"), [(None, {"mapped", "unmapped"}), (["a"], {"mapped"})])
def test_document_filter_handles_missing_source_mapping(
    doc_ids: list[str] | None, expected: set[str], new_store, embed
) -> None:
    store = new_store()
    # upstream writes SimpleVectorStore's dicts directly: "mapped" ([1, 0]) belongs to document "a", "unmapped"
    # ([0, 1]) to none; here both are added as nodes, the second without a SOURCE relationship
    store.add(
        [
            TextNode(id_="mapped", text=_TAR, embedding=embed(_TAR),
                     relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id="a")}),
            TextNode(id_="unmapped", text=_GZIP, embedding=embed(_GZIP)),
        ]
    )

    result = store.query(VectorStoreQuery(query_str=_TAR, similarity_top_k=10, doc_ids=doc_ids))

    assert set(result.ids) == expected


# ---------------------------------------------------------------- test_simple_mmr_threshold.py

# the roles of upstream's a = b = [1, 0], c = [0, 1] and the query [1, 0]: "a" is nearest the query, "b" near
# the query but much like "a", "c" unlike both; upstream's exact tie at threshold 0.5 (b and c both score 0) is
# replaced by real vectors on which b wins from a threshold of about 0.37 (asserted below)
_MMR_QUERY = "compress a file"
_MMR_TEXTS = {
    "a": "gzip compresses a file",
    "b": "truncate shrinks or extends the size of a file",
    "c": "ssh logs into a remote machine",
}


@pytest.mark.parametrize(
    ("query_threshold", "kwargs", "expected_ids"),
    [
        (0.0, {}, ["a", "c"]),
        (0.25, {}, ["a", "c"]),
        (1.0, {}, ["a", "b"]),
        (None, {}, ["a", "b"]),
        (None, {"mmr_threshold": 0.0}, ["a", "c"]),
        (None, {"mmr_threshold": 1.0}, ["a", "b"]),
        (1.0, {"mmr_threshold": 0.0}, ["a", "c"]),
        (0.0, {"mmr_threshold": 1.0}, ["a", "b"]),
        (0.0, {"mmr_threshold": None}, ["a", "b"]),
    ],
)
def test_mmr_threshold_sources(
    query_threshold: float | None,
    kwargs: dict[str, Any],
    expected_ids: list[str],
    new_store,
    embed,
    embed_model: LandmarkEmbedding,
) -> None:
    store = new_store()
    store.add([TextNode(id_=node_id, text=text, embedding=embed(text)) for node_id, text in _MMR_TEXTS.items()])
    query_embedding = embed_model.get_query_embedding(_MMR_QUERY)
    _check_mmr_roles(query_embedding, {node_id: embed(text) for node_id, text in _MMR_TEXTS.items()})

    result = store.query(
        VectorStoreQuery(
            query_embedding=query_embedding,
            similarity_top_k=2,
            mode=VectorStoreQueryMode.MMR,
            mmr_threshold=query_threshold,
        ),
        **kwargs,
    )

    assert result.ids == expected_ids


def _check_mmr_roles(query: list[float], vectors: dict[str, list[float]]) -> None:
    """The texts play upstream's roles: a nearest the query, then b, then c; after a, MMR takes b over c exactly
    when the threshold exceeds one point, which lies between the parametrised 0.25 and 0.5."""
    q, a, b, c = (np.asarray(v) for v in (query, vectors["a"], vectors["b"], vectors["c"]))
    assert q @ a > q @ b > q @ c
    pivot = (a @ b - a @ c) / ((q @ b - q @ c) + (a @ b - a @ c))
    assert 0.3 < pivot < 0.45, pivot

