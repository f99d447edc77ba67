"""Translate LlamaIndex ``MetadataFilters`` (plus node/doc id constraints and ``QdrantVectorStore``'s native
``qdrant_filters``) into lmk_rag store filters."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llama_index.core.vector_stores.types import FilterCondition, FilterOperator, MetadataFilter, MetadataFilters

from lmk_rag.errors import InvalidInputError
from lmk_rag.store import Condition, FieldCondition, Filter

_OPERATORS = {
    FilterOperator.EQ: "eq",
    FilterOperator.NE: "ne",
    FilterOperator.GT: "gt",
    FilterOperator.GTE: "gte",
    FilterOperator.LT: "lt",
    FilterOperator.LTE: "lte",
    FilterOperator.IN: "in",
    FilterOperator.NIN: "nin",
    FilterOperator.ANY: "in",  # a list field holding any of the values
    FilterOperator.CONTAINS: "eq",  # a list field holding the value (Qdrant matches list elements)
    FilterOperator.TEXT_MATCH: "substring",  # SimpleVectorStore's `value in metadata_value`
    FilterOperator.TEXT_MATCH_INSENSITIVE: "substring_any_case",
    FilterOperator.IS_EMPTY: "is_empty",
}


def to_store_filter(
    filters: MetadataFilters | None,
    node_ids: Sequence[str] | None = None,
    doc_ids: Sequence[str] | None = None,
    qdrant_filters: Any = None,
) -> Filter | None:
    """Build the store filter of a LlamaIndex query or ``get_nodes`` call: every part given must hold (AND).

    ``AND``/``OR``/``NOT`` become ``must``/``should``/``must_not``; nested ``MetadataFilters`` nest (empty ones are
    left out). ``ALL`` (a list field holding every value) becomes one ``eq`` per value. Float values compare as
    numbers and ``None`` as "missing, null or empty" (see :class:`lmk_rag.store.FieldCondition`). ``TEXT_MATCH`` is
    LlamaIndex's substring test (``"6FTR78Y"`` matches ``"6FTR78Yun"``, case-sensitive) on any key, and
    ``TEXT_MATCH_INSENSITIVE`` the same in any case (Qdrant's substring match, no index needed).

    :param filters: LlamaIndex metadata filters, or None.
    :param node_ids: restrict to these node ids, or None (an empty list matches nothing).
    :param doc_ids: restrict to these document (``ref_doc_id``) ids, or None (an empty list matches nothing).
    :param qdrant_filters: a qdrant-client ``models.Filter`` (``QdrantVectorStore``'s ``qdrant_filters``), or None;
        read by :meth:`lmk_rag.store.Filter.from_qdrant`.
    :return: the store filter, or None when nothing restricts.
    :raises InvalidInputError: for an operator the store has not, a value it cannot compare, or a native condition it
        cannot run (named).
    """
    must: list[Condition] = []
    if node_ids is not None:
        must.append(FieldCondition("node_id", "in", list(node_ids)))
    if doc_ids is not None:
        must.append(FieldCondition("doc_id", "in", list(doc_ids)))
    if filters is not None and filters.filters:
        must.append(_translate(filters))
    if qdrant_filters is not None:
        must.append(Filter.from_qdrant(qdrant_filters))
    return Filter(must=tuple(must)) if must else None


def _translate(filters: MetadataFilters) -> Filter:
    """One ``MetadataFilters`` level."""
    conditions = [
        _translate(item) if isinstance(item, MetadataFilters) else _translate_leaf(item)
        for item in filters.filters
        if not isinstance(item, MetadataFilters) or item.filters
    ]
    condition = filters.condition or FilterCondition.AND
    if condition == FilterCondition.OR:
        return Filter(should=tuple(conditions))
    if condition == FilterCondition.NOT:
        return Filter(must_not=tuple(conditions))
    return Filter(must=tuple(conditions))


def _translate_leaf(item: MetadataFilter) -> Condition:
    """One ``MetadataFilter``."""
    if item.operator == FilterOperator.ALL:
        if not isinstance(item.value, list):
            raise InvalidInputError(
                f"metadata filter {item.key!r}: 'all' needs a list of the values the field must hold, got "
                f"{item.value!r}; write value=[{item.value!r}]"
            )
        return Filter(must=tuple(FieldCondition(item.key, "eq", value) for value in item.value))
    op = _OPERATORS.get(item.operator)
    if op is None:
        raise InvalidInputError(
            f"metadata filter {item.key!r}: operator {item.operator.value!r} is not supported by LandmarkVectorStore; "
            f"use one of {sorted(o.value for o in _OPERATORS)} or 'all'"
        )
    return FieldCondition(item.key, op, item.value)  # type: ignore[arg-type]
