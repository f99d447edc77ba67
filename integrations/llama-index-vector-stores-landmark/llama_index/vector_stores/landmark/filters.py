"""Translate LlamaIndex ``MetadataFilters`` (plus node/doc id constraints and ``QdrantVectorStore``'s native
``qdrant_filters``) into lmk_rag store filters."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llama_index.core.vector_stores.types import FilterCondition, FilterOperator, MetadataFilter, MetadataFilters

from lmk_rag.errors import InvalidInputError, needs_extra
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
        see :func:`from_qdrant_filter`.
    :return: the store filter, or None when nothing restricts.
    :raises InvalidInputError: for an operator the store has not, or a value it cannot compare.
    """
    must: list[Condition] = []
    if node_ids is not None:
        must.append(FieldCondition("node_id", "in", list(node_ids)))
    if doc_ids is not None:
        must.append(FieldCondition("doc_id", "in", list(doc_ids)))
    if filters is not None and filters.filters:
        must.append(_translate(filters))
    if qdrant_filters is not None:
        must.append(from_qdrant_filter(qdrant_filters))
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


QDRANT_RANGE = ("gt", "gte", "lt", "lte")
QDRANT_SUPPORTED = ("Filter (must, should, must_not), FieldCondition with match (MatchValue, MatchAny, MatchExcept, "
                    "MatchText, MatchSubstring), range (Range, DatetimeRange) or is_empty, IsEmptyCondition, "
                    "HasIdCondition (node ids)")


def from_qdrant_filter(native: Any) -> Filter:
    """A qdrant-client ``models.Filter`` as a store filter, as ``QdrantVectorStore`` reads it: a key names a
    metadata key (``doc_id`` and ``node_id`` the store's own fields) and ``HasIdCondition`` names node ids.

    :param native: the ``models.Filter``.
    :return: the same conditions as a store :class:`Filter`.
    :raises InvalidInputError: for anything but a ``models.Filter``, or a condition the store has not (geo,
        ``values_count``, ``is_null``, ``min_should``, nested, ...), naming it and what is supported.
    :raises MissingExtraError: when qdrant-client is not installed.
    """
    with needs_extra("qdrant_filters"):
        from qdrant_client.http import models
    if not isinstance(native, models.Filter):
        raise InvalidInputError(
            f"qdrant_filters must be a qdrant_client.models.Filter, got {type(native).__name__}; LlamaIndex "
            "MetadataFilters go in filters="
        )
    return _qdrant_filter(native, models)


def _qdrant_filter(native: Any, models: Any) -> Filter:
    """One ``models.Filter`` level."""
    if native.min_should is not None:
        raise InvalidInputError(f"qdrant_filters: min_should is not supported; use {QDRANT_SUPPORTED}")
    must, should, must_not = (tuple(_qdrant_condition(condition, models) for condition in _clause(clause))
                              for clause in (native.must, native.should, native.must_not))
    return Filter(must=must, should=should, must_not=must_not)


def _clause(clause: Any) -> list[Any]:
    """A ``must``/``should``/``must_not`` clause as a list (qdrant-client takes one condition, a list, or None)."""
    if clause is None:
        return []
    return list(clause) if isinstance(clause, list) else [clause]


def _qdrant_condition(condition: Any, models: Any) -> Condition:
    """One native condition."""
    if isinstance(condition, models.Filter):
        return _qdrant_filter(condition, models)
    if isinstance(condition, models.FieldCondition):
        return _qdrant_field(condition, models)
    if isinstance(condition, models.IsEmptyCondition):
        return FieldCondition(condition.is_empty.key, "is_empty")
    if isinstance(condition, models.HasIdCondition):
        return FieldCondition("node_id", "in", [str(point_id) for point_id in condition.has_id])
    raise InvalidInputError(
        f"qdrant_filters: {type(condition).__name__} is not supported by LandmarkVectorStore; use {QDRANT_SUPPORTED}"
    )


def _qdrant_field(condition: Any, models: Any) -> Condition:
    """A ``models.FieldCondition``: its match, range and ``is_empty``, all of which must hold."""
    key = condition.key
    unsupported = [name for name in ("geo_bounding_box", "geo_radius", "geo_polygon", "values_count", "is_null")
                   if getattr(condition, name) is not None]
    if unsupported:
        raise InvalidInputError(
            f"qdrant_filters: FieldCondition {key!r} {unsupported[0]} is not supported by LandmarkVectorStore; use "
            f"{QDRANT_SUPPORTED}"
        )
    parts: list[Condition] = []
    if condition.match is not None:
        parts.append(_qdrant_match(key, condition.match, models))
    if condition.range is not None:
        parts += [FieldCondition(key, op, getattr(condition.range, op)) for op in QDRANT_RANGE  # type: ignore[arg-type]
                  if getattr(condition.range, op) is not None]
    if condition.is_empty is not None:
        empty = FieldCondition(key, "is_empty")
        parts.append(empty if condition.is_empty else Filter(must_not=(empty,)))
    if not parts:
        raise InvalidInputError(f"qdrant_filters: FieldCondition {key!r} has no condition (match, range or is_empty)")
    return parts[0] if len(parts) == 1 else Filter(must=tuple(parts))


def _qdrant_match(key: str, match: Any, models: Any) -> FieldCondition:
    """A ``FieldCondition``'s match."""
    if isinstance(match, models.MatchValue):
        return FieldCondition(key, "eq", match.value)
    if isinstance(match, models.MatchAny):
        return FieldCondition(key, "in", list(match.any))
    if isinstance(match, models.MatchExcept):
        return FieldCondition(key, "nin", list(match.except_))
    if isinstance(match, models.MatchText):
        return FieldCondition(key, "text", match.text)
    if isinstance(match, models.MatchSubstring):
        return FieldCondition(key, "substring", match.substring)
    raise InvalidInputError(
        f"qdrant_filters: FieldCondition {key!r} {type(match).__name__} is not supported by LandmarkVectorStore; "
        f"use {QDRANT_SUPPORTED}"
    )
