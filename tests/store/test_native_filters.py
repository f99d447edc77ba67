"""A qdrant-client ``models.Filter`` as the store's ``filter=`` (``Filter.from_qdrant``): read as QdrantVectorStore
reads it (a key is a metadata key, ``HasIdCondition`` names node ids), the same nodes as the store's own filter in
every call that takes one, on every backend (Edge on disk, qdrant-client local, real server if set); a condition
the store cannot run is refused by name before any engine call."""

from __future__ import annotations

from typing import Any

import pytest
from qdrant_client import models

from lmk_rag.errors import InvalidInputError
from lmk_rag.store import FieldCondition, Filter, NodeRecord


def test_native_conditions_translate_to_store_conditions() -> None:
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
        should=models.FieldCondition(key="k", match=models.MatchAny(any=["x", "y"])),
        must_not=[models.Filter(must=[models.FieldCondition(key="k", match=models.MatchValue(value=1))])],
    )
    assert Filter.from_qdrant(native) == Filter(
        must=(
            FieldCondition("tag", "nin", ["a", "b"]),
            Filter(must=(FieldCondition("year", "gte", 2020), FieldCondition("year", "lt", 2026))),
            FieldCondition("title", "text", "tar"),
            FieldCondition("title", "substring", "ar"),
            FieldCondition("notes", "is_empty"),
            FieldCondition("node_id", "in", ["n1"]),
            Filter(must_not=(FieldCondition("lang", "is_empty"),)),
        ),
        should=(FieldCondition("k", "in", ["x", "y"]),),
        must_not=(Filter(must=(FieldCondition("k", "eq", 1),)),),
    )
    assert Filter.from_qdrant(models.Filter()) == Filter()


@pytest.mark.parametrize(
    ("native", "named"),
    [
        (models.Filter(must=[models.FieldCondition(key="geo", geo_radius=models.GeoRadius(
            center=models.GeoPoint(lon=0, lat=0), radius=1))]), "geo_radius"),
        (models.Filter(must=[models.FieldCondition(key="k", values_count=models.ValuesCount(gt=1))]), "values_count"),
        (models.Filter(must=[models.IsNullCondition(is_null=models.PayloadField(key="k"))]), "IsNullCondition"),
        (models.Filter(must=[models.NestedCondition(nested=models.Nested(key="k", filter=models.Filter()))]),
         "NestedCondition"),
        (models.Filter(must=[models.FieldCondition(key="k", match=models.MatchPrefix(prefix="a"))]), "MatchPrefix"),
        (models.Filter(should=[models.FieldCondition(key="k", match=models.MatchValue(value=1))], min_should=
                       models.MinShould(conditions=[], min_count=1)), "min_should"),
        (models.Filter(must=[models.FieldCondition(key="k")]), "has no condition"),
        (models.FieldCondition(key="k", match=models.MatchValue(value=1)), "must be a qdrant_client.models.Filter"),
        ({"must": []}, "qdrant_client.models.Filter"),
    ],
)
def test_native_conditions_the_store_cannot_run_are_refused_by_name(native: Any, named: str) -> None:
    with pytest.raises(InvalidInputError, match=named):
        Filter.from_qdrant(native)


def test_a_filter_of_another_kind_names_the_three_the_store_takes(open_store) -> None:
    with pytest.raises(InvalidInputError, match=r"a lmk_rag\.store\.Filter, a dict or a qdrant_client\.models\.Filter"):
        open_store().get_nodes(filter=[("rank", 1)])


def test_a_native_filter_selects_what_the_stores_own_selects_in_every_call(
    open_store, doc_records: dict[str, list[NodeRecord]]
) -> None:
    store = open_store()
    for doc_id, records in doc_records.items():
        store.upsert_encoded_document(doc_id, records)
    ids = list(doc_records)
    native = models.Filter(
        must=[models.FieldCondition(key="group", match=models.MatchValue(value="even"))],
        must_not=models.FieldCondition(key="rank", range=models.Range(gte=4)),
    )
    own = Filter(must=[FieldCondition("group", "eq", "even")], must_not=[FieldCondition("rank", "gte", 4)])
    expected = {ids[0], ids[2]}
    assert {record.doc_id for record in store.get_nodes(filter=native)} == expected
    assert {hit.doc_id for hit in store.search("archive files", k=10, filter=native)} == expected
    assert store.search("archive files", k=10, filter=native) == store.search("archive files", k=10, filter=own)
    vector = doc_records[ids[1]][0].vector
    assert {hit.doc_id for hit in store.search_vector(vector, k=10, filter=native)} == expected
    assert {hit.doc_id for hit in store.search_mmr("archive files", k=10, filter=native)} <= expected
    node_id = doc_records[ids[2]][0].node_id
    assert [r.node_id for r in store.get_nodes(filter=models.Filter(must=[models.HasIdCondition(has_id=[node_id])]))
            ] == [node_id]
    with pytest.raises(InvalidInputError, match="geo_radius"):
        store.search("archive files", filter=models.Filter(must=[models.FieldCondition(
            key="geo", geo_radius=models.GeoRadius(center=models.GeoPoint(lon=0, lat=0), radius=1))]))
    store.delete_nodes(filter=native)
    assert {record.doc_id for record in store.get_nodes()} == set(ids) - expected
