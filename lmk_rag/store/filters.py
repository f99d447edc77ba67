"""Qdrant-agnostic payload filters and their one translation function.

Callers (the CLI, the LlamaIndex adapter) build a :class:`Filter` of :class:`FieldCondition`
leaves, pass a plain ``{key: value}`` mapping (every key must equal its value; a list value
means "any of"), or a qdrant-client ``models.Filter`` (:meth:`Filter.from_qdrant`). :func:`translate` walks the
tree once and asks a backend's :class:`ConditionBuilder` for the native objects, so both backends share the logic.

Keys name document metadata (stored under ``meta.`` in the payload); ``doc_id`` and ``node_id``
name the store's own fields.

Example::

    Filter(must=[FieldCondition("lang", "eq", "en"), FieldCondition("year", "gte", 2020)],
           must_not=[FieldCondition("doc_id", "in", ["a.txt"])])
"""

from __future__ import annotations

import datetime
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeAlias

from lmk_rag.errors import InvalidInputError, needs_extra

if TYPE_CHECKING:
    from qdrant_client.http.models import Filter as QdrantFilter

Operator = Literal["eq", "ne", "in", "nin", "gt", "gte", "lt", "lte", "text", "substring", "substring_any_case",
                   "is_empty"]
OPERATORS: tuple[str, ...] = ("eq", "ne", "in", "nin", "gt", "gte", "lt", "lte", "text", "substring",
                              "substring_any_case", "is_empty")
#: Operators whose value is one string.
STRING_OPERATORS = ("text", "substring", "substring_any_case")
RESERVED_KEYS = frozenset({"doc_id", "node_id"})
META_PREFIX = "meta."
#: The payload key of a node's lower-cased copy of its metadata's strings (see
#: :func:`~lmk_rag.store.records.lowered`).
LOWER_KEY = "meta_lower"
LOWER_PREFIX = LOWER_KEY + "."
#: Characters a metadata key may not hold: the path syntax's (``.`` nests, ``[]`` indexes) and what its quoting
#: cannot escape (``"``, ``\\``).
PATH_CHARS = (".", "[", "]", '"', "\\")
#: One dotted part of a filter key: a metadata key, then ``[]`` or ``[n]`` indexes.
KEY_PART = re.compile(r'(?P<name>[^.\[\]"\\]+)(?P<index>(\[\d*\])*)')
#: The largest integer a float holds exactly: integer equality is a numeric range up to here.
FLOAT_EXACT = 2**53
#: Qdrant's integers are 64-bit: a filter value beyond this range can never match.
INT64 = (-(2**63), 2**63 - 1)


@dataclass(frozen=True)
class FieldCondition:
    """One condition on a metadata key.

    :param key: the metadata key (``doc_id``/``node_id`` for the store's own fields); dots reach into nested dicts.
    :param op: ``eq``/``ne`` (one value: a string, number, boolean, or None for "missing, null or ``[]``"),
        ``in``/``nin`` (a list of such values), ``gt``/``gte``/``lt``/``lte`` (a number, or a date: a
        ``datetime``/``date`` or an ISO 8601 string such as ``"2026-01-01"`` or ``"2026-01-01T10:00:00+02:00"``,
        compared as a point in time with the dates metadata holds as ISO strings; no time zone means UTC),
        ``text`` (the words of a
        string, matched as a key's words: as word prefixes in any case on keys declared with ``text_keys=`` when
        the store was created, else as whole words), ``substring`` (a string, or an element of a list of strings,
        holds the value: ``"6FTR78Y"`` matches ``"6FTR78Yun"``; case-sensitive, any key, no index needed),
        ``substring_any_case`` (the same in any case: ``"6ftr78y"`` matches ``"6FTR78Yun"``; on metadata keys),
        ``is_empty`` (key missing, null or ``[]``; value ignored).
    :param value: the value to compare with.
    """

    key: str
    op: Operator
    value: Any = None

    def __post_init__(self) -> None:
        """Reject unknown operators and keys or values of the wrong shape early, naming the condition."""
        if not isinstance(self.key, str) or not self.key:
            raise InvalidInputError(f"a filter key must be a non-empty string, got {self.key!r}")
        if self.op not in OPERATORS:
            raise InvalidInputError(f"unknown filter operator {self.op!r} for key {self.key!r}; use one of {OPERATORS}")
        if isinstance(self.value, (bytes, bytearray, memoryview)):
            raise InvalidInputError(
                f"filter {self.key!r} {self.op}: got bytes {self.value!r}; metadata holds text, so give a str "
                "(decode the bytes: value.decode())"
            )
        if self.op in ("in", "nin") and (isinstance(self.value, str) or not isinstance(self.value, Sequence)):
            raise InvalidInputError(f"filter {self.key!r} {self.op}: value must be a list, got {self.value!r}")
        ranged = self.op in ("gt", "gte", "lt", "lte")
        dated = ranged and as_datetime(self.value) is not None
        if ranged and not dated and (isinstance(self.value, bool) or not isinstance(self.value, (int, float))):
            raise InvalidInputError(
                f"filter {self.key!r} {self.op}: value must be a number or a date (an ISO 8601 string such as "
                f"'2026-01-01', or a datetime), got {self.value!r}"
            )
        if self.op in ("in", "nin"):
            values = list(self.value)
        elif self.op in (*STRING_OPERATORS, "is_empty") or dated:
            values = []
        else:  # eq, ne and numeric ranges compare one value
            values = [self.value]
        odd = [v for v in values if v is not None and not isinstance(v, (str, int, float))]
        odd += [v for v in values if isinstance(v, float) and not math.isfinite(v)]  # NaN matches nothing
        odd += [v for v in values if isinstance(v, int) and not INT64[0] <= v <= INT64[1]]  # beyond the engine's
        if odd:
            raise InvalidInputError(
                f"filter {self.key!r} {self.op}: values must be strings, finite numbers (integers within 64 bits), "
                f"booleans or None, got {odd[0]!r}"
            )
        if self.op in STRING_OPERATORS and not isinstance(self.value, str):
            raise InvalidInputError(f"filter {self.key!r} {self.op}: value must be a string, got {self.value!r}")
        if self.op == "substring_any_case" and self.key in RESERVED_KEYS:
            raise InvalidInputError(
                f"filter {self.key!r} substring_any_case: applies to metadata keys; use substring on {self.key!r}"
            )


@dataclass(frozen=True)
class Filter:
    """A boolean combination: every ``must``, at least one ``should`` (if any), no ``must_not``."""

    must: Sequence[Condition] = field(default_factory=tuple)
    should: Sequence[Condition] = field(default_factory=tuple)
    must_not: Sequence[Condition] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        """Reject clauses that are not lists of conditions (``Filter(must=FieldCondition(...))``)."""
        for name in ("must", "should", "must_not"):
            clause = getattr(self, name)
            if not isinstance(clause, Sequence) or isinstance(clause, str) or not all(
                    isinstance(condition, (FieldCondition, Filter)) for condition in clause):
                raise InvalidInputError(
                    f"Filter({name}=...) must be a list of FieldCondition or Filter, got {clause!r}; "
                    f"write Filter({name}=[condition])"
                )

    @classmethod
    def from_qdrant(cls, native: Any) -> Filter:
        """A qdrant-client ``models.Filter`` as a store filter (what a ``filter=`` argument does with one): keys name
        metadata keys (``doc_id`` and ``node_id`` the store's own fields), ``HasIdCondition`` names node ids.

        :param native: the ``models.Filter``: ``must``/``should``/``must_not`` of nested ``Filter``,
            ``IsEmptyCondition``, ``HasIdCondition`` and ``FieldCondition`` with a match (``MatchValue``,
            ``MatchAny``, ``MatchExcept``, ``MatchText``, ``MatchSubstring``), a range (``Range``,
            ``DatetimeRange``) or ``is_empty``.
        :return: the same conditions as a :class:`Filter`.
        :raises InvalidInputError: for anything but a ``models.Filter``, or a condition the store has not (geo,
            ``values_count``, ``is_null``, ``min_should``, nested arrays, prefix and phrase matches, ...), naming it and
            what is supported.
        :raises MissingExtraError: when qdrant-client is not installed.
        """
        with needs_extra("a qdrant-client filter"):
            from qdrant_client.http import models
        if not isinstance(native, models.Filter):
            raise InvalidInputError(
                f"a native filter must be a qdrant_client.models.Filter, got {type(native).__name__}"
            )
        return _native_filter(native, models)


Condition = FieldCondition | Filter
FilterLike: TypeAlias = "Filter | Mapping[str, Any] | QdrantFilter | None"
"""What a ``filter=`` argument takes: a :class:`Filter`, a ``{key: value}`` mapping, a qdrant-client
``models.Filter`` (:meth:`Filter.from_qdrant`), or None (see :func:`as_filter`)."""


class ConditionBuilder(Protocol):
    """What a backend supplies to :func:`translate`: constructors of its native filter objects.

    ``key`` arguments are payload paths (already mapped by :func:`payload_key`).
    """

    def match(self, key: str, value: Any) -> Any:
        """Exact match of one value."""

    def match_any(self, key: str, values: list[Any]) -> Any:
        """Match any of the values."""

    def match_text(self, key: str, text: str) -> Any:
        """Full-text match."""

    def match_substring(self, key: str, text: str) -> Any:
        """The string (or a string element of the list) holds ``text`` (case-sensitive)."""

    def range(self, key: str, bounds: dict[str, float]) -> Any:
        """Numeric range; ``bounds`` keys are among ``gt``, ``gte``, ``lt``, ``lte``."""

    def datetime_range(self, key: str, bounds: dict[str, str]) -> Any:
        """Range of points in time (bounds as RFC 3339 strings, keys as for :meth:`range`)."""

    def is_empty(self, key: str) -> Any:
        """The key is missing, null or an empty list."""

    def combine(self, must: list[Any], should: list[Any], must_not: list[Any]) -> Any:
        """A native filter from native conditions."""


def payload_key(key: str) -> str:
    """Map a filter key to its payload path: the store's own fields stay, metadata keys go under ``meta.``, each
    dotted part quoted (``my key.sub[]`` -> ``meta."my key"."sub"[]``), so a key of any characters but
    :data:`PATH_CHARS` names its field (spaces, ``$``, quotes ``'``, emoji: what metadata may hold).

    :param key: the key as the caller wrote it: metadata keys joined by ``.`` for nested dicts, ``[]`` after a key
        holding a list of dicts.
    :return: the payload path.
    :raises InvalidInputError: for a key no path can name (empty parts, ``"`` or ``\\``, brackets elsewhere).
    """
    if not key:
        raise InvalidInputError("a filter key must be a non-empty string")
    if key in RESERVED_KEYS:
        return key
    parts = [KEY_PART.fullmatch(part) for part in key.split(".")]
    if not all(parts):
        raise InvalidInputError(
            f"filter key {key!r} cannot name a metadata field: parts joined by '.', each a key without "
            f"{' or '.join(map(repr, PATH_CHARS))}, '[]' after a list of dicts"
        )
    return META_PREFIX + ".".join(f'"{part["name"]}"{part["index"]}' for part in parts if part)


def uses_operator(value: FilterLike, op: str) -> bool:
    """Whether a filter has a condition with operator ``op`` anywhere in its tree."""
    flt = as_filter(value)
    if flt is None:
        return False
    return any(uses_operator(c, op) if isinstance(c, Filter) else c.op == op
               for c in (*flt.must, *flt.should, *flt.must_not))


def as_filter(value: FilterLike) -> Filter | None:
    """Normalise a filter argument: None, a :class:`Filter`, a ``{key: value}`` mapping (list = any of), or a
    qdrant-client ``models.Filter`` (:meth:`Filter.from_qdrant`).

    :param value: the caller's filter.
    :return: a :class:`Filter` or None.
    :raises InvalidInputError: for anything else.
    """
    if value is None or isinstance(value, Filter):
        return value
    if isinstance(value, Mapping):
        return Filter(
            must=tuple(
                FieldCondition(key, "in", list(v)) if isinstance(v, (list, tuple)) else FieldCondition(key, "eq", v)
                for key, v in value.items()
            )
        )
    if type(value).__module__.startswith("qdrant_client."):
        return Filter.from_qdrant(value)
    raise InvalidInputError(
        f"filter must be a lmk_rag.store.Filter, a dict or a qdrant_client.models.Filter, got {type(value).__name__}"
    )


def translate(value: FilterLike, builder: ConditionBuilder, extra_must: Sequence[Any] = (),
              extra_must_not: Sequence[Any] = ()) -> Any:
    """Translate a filter into a backend's native filter.

    :param value: the caller's filter (see :func:`as_filter`).
    :param builder: the backend's constructors.
    :param extra_must: native conditions to AND in (the store's own, e.g. ``kind == "node"``).
    :param extra_must_not: native conditions no match may meet (the store's own, e.g. ``live == false``).
    :return: the native filter, or None when there is nothing to filter on.
    """
    flt = as_filter(value)
    if flt is None and not extra_must and not extra_must_not:
        return None
    if flt is None:
        return builder.combine(list(extra_must), [], list(extra_must_not))
    native = _translate_filter(flt, builder)
    if not extra_must and not extra_must_not:
        return native
    return builder.combine([*extra_must, native], [], list(extra_must_not))


def _translate_filter(flt: Filter, builder: ConditionBuilder) -> Any:
    """Translate one :class:`Filter` node."""
    return builder.combine(
        [_translate_condition(c, builder) for c in flt.must],
        [_translate_condition(c, builder) for c in flt.should],
        [_translate_condition(c, builder) for c in flt.must_not],
    )


def _translate_condition(condition: Condition, builder: ConditionBuilder) -> Any:
    """Translate one condition; negative operators become a nested ``must_not``."""
    if isinstance(condition, Filter):
        return _translate_filter(condition, builder)
    if not isinstance(condition, FieldCondition):
        raise InvalidInputError(f"filter conditions must be FieldCondition or Filter, got {type(condition).__name__}")
    key, op, value = payload_key(condition.key), condition.op, condition.value
    if op == "eq":
        return _equal(key, value, builder)
    if op == "ne":
        return builder.combine([], [], [_equal(key, value, builder)])
    if op == "in":
        return _any_of(key, list(value), builder)
    if op == "nin":
        return builder.combine([], [], [_any_of(key, list(value), builder)])
    if op == "text":
        return builder.match_text(key, str(value))
    if op == "substring":
        return builder.match_substring(key, value)
    if op == "substring_any_case":
        return builder.match_substring(LOWER_PREFIX + key.removeprefix(META_PREFIX), value.lower())
    if op == "is_empty":
        return builder.is_empty(key)
    moment = as_datetime(value)
    if moment is not None:
        return builder.datetime_range(key, {op: moment})
    return builder.range(key, {op: float(value)})


def as_datetime(value: Any) -> str | None:
    """A range bound as the RFC 3339 string of a point in time, or None when it is no date: a ``datetime`` or
    ``date`` (midnight), or an ISO 8601 string with a date (``datetime.fromisoformat``); no time zone means UTC."""
    if isinstance(value, str):
        try:
            value = datetime.datetime.fromisoformat(value)
        except ValueError:
            return None
    elif isinstance(value, datetime.date) and not isinstance(value, datetime.datetime):
        value = datetime.datetime(value.year, value.month, value.day)
    if not isinstance(value, datetime.datetime):
        return None
    return (value if value.tzinfo else value.replace(tzinfo=datetime.timezone.utc)).isoformat()


def _equal(key: str, value: Any, builder: ConditionBuilder) -> Any:
    """``key == value`` for any JSON scalar: None means missing, null or empty; a number is the range [v, v], so
    that ``2`` and ``2.0`` match each other whichever was stored (Qdrant matches only strings, integers and
    booleans exactly); an integer too large for a float to hold exactly is matched exactly."""
    if value is None:
        return builder.is_empty(key)
    if isinstance(value, float) or _exact_in_float(value):
        return builder.range(key, {"gte": float(value), "lte": float(value)})
    return builder.match(key, value)


def _exact_in_float(value: Any) -> bool:
    """Whether ``value`` is an integer (not a bool) that a float holds exactly (``|value| <= 2**53``)."""
    return isinstance(value, int) and not isinstance(value, bool) and abs(value) <= FLOAT_EXACT


def _any_of(key: str, values: list[Any], builder: ConditionBuilder) -> Any:
    """``key`` equal to any of ``values``: one match-any of the strings (and of integers too large for a float), one
    :func:`_equal` per other value (numbers as ranges, booleans, None); an empty list matches nothing."""
    strings = [v for v in values if isinstance(v, str)]
    large = [v for v in values if isinstance(v, int) and not isinstance(v, bool) and not _exact_in_float(v)]
    conditions = [builder.match_any(key, group) for group in (strings, large) if group]
    conditions += [_equal(key, v, builder) for v in values
                   if v is None or isinstance(v, (bool, float)) or _exact_in_float(v)]
    if len(conditions) == 1:
        return conditions[0]
    if not conditions:
        return builder.match_any(key, [])
    return builder.combine([], conditions, [])


#: What :meth:`Filter.from_qdrant` reads, named in its refusals.
NATIVE_SUPPORTED = ("Filter (must, should, must_not), FieldCondition with match (MatchValue, MatchAny, MatchExcept, "
                    "MatchText, MatchSubstring), range (Range, DatetimeRange) or is_empty, IsEmptyCondition, "
                    "HasIdCondition (node ids)")
#: ``FieldCondition`` fields the store cannot run.
NATIVE_UNSUPPORTED = ("geo_bounding_box", "geo_radius", "geo_polygon", "values_count", "is_null")


def _native_filter(native: Any, models: Any) -> Filter:
    """One ``models.Filter`` level (a clause is one condition, a list, or None)."""
    if native.min_should is not None:
        raise InvalidInputError(f"qdrant-client filter: min_should is not supported; use {NATIVE_SUPPORTED}")
    clauses = [[] if c is None else c if isinstance(c, list) else [c] for c in (native.must, native.should,
                                                                              native.must_not)]
    must, should, must_not = (tuple(_native_condition(c, models) for c in clause) for clause in clauses)
    return Filter(must=must, should=should, must_not=must_not)


def _native_condition(condition: Any, models: Any) -> Condition:
    """One native condition."""
    if isinstance(condition, models.Filter):
        return _native_filter(condition, models)
    if isinstance(condition, models.FieldCondition):
        return _native_field(condition, models)
    if isinstance(condition, models.IsEmptyCondition):
        return FieldCondition(condition.is_empty.key, "is_empty")
    if isinstance(condition, models.HasIdCondition):
        return FieldCondition("node_id", "in", [str(point_id) for point_id in condition.has_id])
    raise InvalidInputError(
        f"qdrant-client filter: {type(condition).__name__} is not supported by the store; use {NATIVE_SUPPORTED}"
    )


def _native_field(condition: Any, models: Any) -> Condition:
    """A ``models.FieldCondition``: its match, range and ``is_empty``, all of which must hold."""
    key = condition.key
    unsupported = [name for name in NATIVE_UNSUPPORTED if getattr(condition, name) is not None]
    if unsupported:
        raise InvalidInputError(f"qdrant-client filter: FieldCondition {key!r} {unsupported[0]} is not supported by "
                                f"the store; use {NATIVE_SUPPORTED}")
    parts: list[Condition] = []
    if condition.match is not None:
        parts.append(_native_match(key, condition.match, models))
    if condition.range is not None:
        parts += [FieldCondition(key, op, getattr(condition.range, op)) for op in ("gt", "gte", "lt", "lte")
                  if getattr(condition.range, op) is not None]
    if condition.is_empty is not None:
        empty = FieldCondition(key, "is_empty")
        parts.append(empty if condition.is_empty else Filter(must_not=(empty,)))
    if not parts:
        raise InvalidInputError(f"qdrant-client filter: FieldCondition {key!r} has no condition (match, range or "
                                "is_empty)")
    return parts[0] if len(parts) == 1 else Filter(must=tuple(parts))


def _native_match(key: str, match: Any, models: Any) -> FieldCondition:
    """A ``FieldCondition``'s match."""
    matches = {models.MatchValue: ("eq", "value"), models.MatchAny: ("in", "any"),
               models.MatchExcept: ("nin", "except_"), models.MatchText: ("text", "text"),
               models.MatchSubstring: ("substring", "substring")}
    if type(match) not in matches:
        raise InvalidInputError(f"qdrant-client filter: FieldCondition {key!r} {type(match).__name__} is not "
                                f"supported by the store; use {NATIVE_SUPPORTED}")
    op, name = matches[type(match)]
    value = getattr(match, name)
    return FieldCondition(key, op, list(value) if op in ("in", "nin") else value)
