"""to_store_filter: LlamaIndex MetadataFilters -> lmk_rag store filters (pure translation)."""

from __future__ import annotations

import pytest
from llama_index.core.vector_stores.types import FilterCondition, FilterOperator, MetadataFilter, MetadataFilters

from llama_index.vector_stores.landmark import to_store_filter
from lmk_rag.store import FieldCondition, Filter


def test_nothing_to_restrict_is_none() -> None:
    assert to_store_filter(None) is None
    assert to_store_filter(MetadataFilters(filters=[])) is None


def test_ids_and_nested_conditions() -> None:
    filters = MetadataFilters(
        filters=[
            MetadataFilter(key="lang", value="en"),
            MetadataFilters(
                filters=[
                    MetadataFilter(key="year", value=2020, operator=FilterOperator.GTE),
                    MetadataFilter(key="tags", value=["a", "b"], operator=FilterOperator.ALL),
                ],
                condition=FilterCondition.OR,
            ),
        ],
        condition=FilterCondition.NOT,
    )
    assert to_store_filter(filters, node_ids=["n1"], doc_ids=["d1", "d2"]) == Filter(
        must=(
            FieldCondition("node_id", "in", ["n1"]),
            FieldCondition("doc_id", "in", ["d1", "d2"]),
            Filter(
                must_not=(
                    FieldCondition("lang", "eq", "en"),
                    Filter(
                        should=(
                            FieldCondition("year", "gte", 2020),
                            Filter(must=(FieldCondition("tags", "eq", "a"), FieldCondition("tags", "eq", "b"))),
                        )
                    ),
                )
            ),
        )
    )


@pytest.mark.parametrize(
    ("operator", "value", "expected"),
    [
        (FilterOperator.NE, "x", FieldCondition("k", "ne", "x")),
        (FilterOperator.NIN, ["x"], FieldCondition("k", "nin", ["x"])),
        (FilterOperator.ANY, ["x", "y"], FieldCondition("k", "in", ["x", "y"])),
        (FilterOperator.CONTAINS, "x", FieldCondition("k", "eq", "x")),
        (FilterOperator.TEXT_MATCH, "word", FieldCondition("k", "substring", "word")),
        (FilterOperator.TEXT_MATCH_INSENSITIVE, "Word", FieldCondition("k", "substring_any_case", "Word")),
        (FilterOperator.IS_EMPTY, None, FieldCondition("k", "is_empty", None)),
    ],
)
def test_operators(operator: FilterOperator, value: object, expected: FieldCondition) -> None:
    flt = to_store_filter(MetadataFilters(filters=[MetadataFilter(key="k", value=value, operator=operator)]))
    assert flt == Filter(must=(Filter(must=(expected,)),))


def test_empty_id_lists_restrict_to_nothing_and_empty_nested_filters_are_left_out() -> None:
    assert to_store_filter(None, node_ids=[], doc_ids=[]) == Filter(
        must=(FieldCondition("node_id", "in", []), FieldCondition("doc_id", "in", []))
    )
    nested = MetadataFilters(filters=[MetadataFilter(key="k", value=1.5), MetadataFilters(filters=[])])
    assert to_store_filter(nested) == Filter(must=(Filter(must=(FieldCondition("k", "eq", 1.5),)),))
