"""Deleting single nodes, diverse (MMR) search, full-text keys and filters on floats, booleans and None; one test
body per backend (Edge on disk, qdrant-client local, real server if set)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from lmk_rag.errors import InvalidInputError, SettingsMismatchError
from lmk_rag.store import FieldCondition, Filter, NodeRecord

IDENTIFIERS = ["6FTR78Yun", "6FTR78Ygl", "6FTR78Ztl"]


def _typed(doc_records: dict[str, list[NodeRecord]]) -> dict[str, list[NodeRecord]]:
    """The records with metadata of every JSON kind: a float, a boolean, a float list, an identifier, None."""
    out = {}
    for i, (doc_id, records) in enumerate(doc_records.items()):
        metadata = {
            "weight": float(i % 4),
            "flag": i % 2 == 0,
            "scores": [float(i), 0.5],
            "identifier": IDENTIFIERS[i % 3],
            "maybe": None if i % 3 == 0 else "set",
            "rank": i,
        }
        out[doc_id] = [replace(record, metadata=metadata) for record in records]
    return out


def _docs(store: Any, condition: FieldCondition | Filter) -> set[str]:
    flt = condition if isinstance(condition, Filter) else Filter(must=(condition,))
    return {node.doc_id for node in store.get_nodes(filter=flt)}


def _where(records: dict[str, list[NodeRecord]], test: Any) -> set[str]:
    return {doc_id for doc_id, nodes in records.items() if test(nodes[0].metadata)}


def test_filters_on_floats_booleans_and_none(open_store, doc_records) -> None:
    store = open_store()
    records = _typed(doc_records)
    for doc_id, nodes in records.items():
        store.upsert_encoded_document(doc_id, nodes)
    assert _docs(store, FieldCondition("weight", "eq", 2.0)) == _where(records, lambda m: m["weight"] == 2.0)
    assert _docs(store, FieldCondition("weight", "ne", 1.0)) == _where(records, lambda m: m["weight"] != 1.0)
    assert _docs(store, FieldCondition("weight", "in", [0.0, 3.0])) == _where(records, lambda m: m["weight"] in (0, 3))
    assert _docs(store, FieldCondition("weight", "nin", [0.0])) == _where(records, lambda m: m["weight"] != 0)
    assert _docs(store, FieldCondition("scores", "eq", 0.5)) == set(records)  # a list holding the value
    assert _docs(store, FieldCondition("flag", "eq", True)) == _where(records, lambda m: m["flag"])
    assert _docs(store, FieldCondition("flag", "ne", True)) == _where(records, lambda m: not m["flag"])
    assert _docs(store, FieldCondition("maybe", "eq", None)) == _where(records, lambda m: m["maybe"] is None)
    assert _docs(store, FieldCondition("maybe", "ne", None)) == _where(records, lambda m: m["maybe"] is not None)
    mixed = FieldCondition("rank", "in", [1, 2.0, None, "x", True])
    assert _docs(store, mixed) == _where(records, lambda m: m["rank"] in (1, 2))
    assert _docs(store, FieldCondition("rank", "in", [])) == set()
    assert _docs(store, FieldCondition("rank", "nin", [])) == set(records)
    with pytest.raises(InvalidInputError, match=r"strings, finite numbers .*booleans or None"):
        FieldCondition("rank", "eq", {"a": 1})


def test_date_ranges_compare_points_in_time(open_store, doc_records) -> None:
    """Dates stored as ISO strings (or as ``date``/``datetime``, which the store writes as ISO strings) are
    filtered by point in time with ISO strings, dates or datetimes as bounds, as LlamaIndex's ``MetadataFilter``
    on SimpleDirectoryReader's ``creation_date`` does."""
    import datetime

    from llama_index.core.vector_stores.types import FilterOperator, MetadataFilter, MetadataFilters

    from llama_index.vector_stores.landmark.filters import to_store_filter

    store = open_store()
    stamps = ["2025-06-01", "2026-01-01T00:00:00", "2026-02-01T10:00:00+02:00", datetime.date(2026, 3, 1),
              datetime.datetime(2026, 4, 1, 12, tzinfo=datetime.timezone.utc), "2027-01-01", "not a date", None]
    records = {doc_id: [replace(record, metadata={"d": stamp}) for record in nodes]
               for (doc_id, nodes), stamp in zip(doc_records.items(), stamps)}
    for doc_id, nodes in records.items():
        store.upsert_encoded_document(doc_id, nodes)
    ids = list(records)
    assert _docs(store, FieldCondition("d", "gt", "2026-01-01")) == {ids[2], ids[3], ids[4], ids[5]}
    assert _docs(store, FieldCondition("d", "gte", datetime.date(2026, 1, 1))) == {ids[1], ids[2], ids[3], ids[4],
                                                                                  ids[5]}
    assert _docs(store, FieldCondition("d", "gte", "2026-02-01T08:00:00Z")) == {ids[2], ids[3], ids[4], ids[5]}
    assert _docs(store, FieldCondition("d", "lt", datetime.datetime(2026, 3, 1, 0, 0, 1))) == {ids[0], ids[1],
                                                                                               ids[2], ids[3]}
    llama = MetadataFilters(filters=[MetadataFilter(key="d", value="2026-03-01", operator=FilterOperator.GTE),
                                     MetadataFilter(key="d", value="2026-12-31", operator=FilterOperator.LTE)])
    assert {n.doc_id for n in store.get_nodes(filter=to_store_filter(llama))} == {ids[3], ids[4]}
    with pytest.raises(InvalidInputError, match="a number or a date"):
        FieldCondition("d", "gt", "yesterday")


def test_substring_filters_match_inside_words_on_any_key(open_store, doc_records) -> None:
    store = open_store()  # no text_keys, no payload index: Qdrant's substring match, on every backend
    records = _typed(doc_records)
    for doc_id, nodes in records.items():
        store.upsert_encoded_document(doc_id, nodes)
    inside = _where(records, lambda m: "R78Y" in m["identifier"])
    assert inside and inside != set(records)
    assert _docs(store, FieldCondition("identifier", "substring", "R78Y")) == inside
    assert _docs(store, FieldCondition("identifier", "substring", "r78y")) == set()  # case-sensitive
    assert _docs(store, FieldCondition("identifier", "substring_any_case", "r78y")) == inside
    assert _docs(store, FieldCondition("identifier", "substring_any_case", "6FTR78ZTL")) == _where(
        records, lambda m: m["identifier"] == "6FTR78Ztl")
    negated = Filter(must_not=(FieldCondition("identifier", "substring_any_case", "r78y"),))
    assert _docs(store, negated) == set(records) - inside
    with pytest.raises(InvalidInputError, match="substring_any_case: applies to metadata keys"):
        FieldCondition("doc_id", "substring_any_case", "a")
    with pytest.raises(InvalidInputError, match="substring: value must be a string"):
        FieldCondition("identifier", "substring", 5)


def test_text_keys_match_word_prefixes_in_any_case(open_store, doc_records, backend) -> None:
    if backend == "local":
        pytest.skip("qdrant-client local mode has no payload indexes: text filters match whole words there")
    store = open_store(text_keys=["identifier"])
    assert store.text_keys == ["identifier"] == store.settings["text_keys"]
    records = _typed(doc_records)
    for doc_id, nodes in records.items():
        store.upsert_encoded_document(doc_id, nodes)
    starts = _where(records, lambda m: m["identifier"].startswith("6FTR78Y"))
    assert starts and _docs(store, FieldCondition("identifier", "text", "6FTR78Y")) == starts
    assert _docs(store, FieldCondition("identifier", "text", "6ftr78y")) == starts
    assert _docs(store, FieldCondition("identifier", "text", "R78Y")) == set()  # prefixes, not any substring
    store.close()
    with pytest.raises(SettingsMismatchError, match="text"):
        open_store(text_keys=["title"])
    assert open_store(text_keys=["identifier"]).text_keys == ["identifier"]


def test_text_keys_are_metadata_keys(open_store) -> None:
    for bad in (["doc_id"], [""], "identifier"):
        with pytest.raises(InvalidInputError, match="text_keys"):
            open_store(text_keys=bad)


def test_delete_nodes_keeps_the_rest_of_each_document(open_store, doc_records) -> None:
    store = open_store()
    for doc_id, nodes in doc_records.items():
        store.upsert_encoded_document(doc_id, nodes)
    total = store.count()
    first, second = list(doc_records)[:2]
    one = doc_records[first][0].node_id
    assert store.delete_nodes(node_ids=[one]) == 1
    assert store.count() == total - 1 and first in store.doc_ids()
    assert sorted(n.node_id for n in store.get_nodes(filter={"doc_id": first})) == sorted(
        r.node_id for r in doc_records[first][1:]
    )
    assert store.delete_nodes(node_ids=[]) == 0 and store.count() == total - 1
    every = [r.node_id for r in doc_records[second]]
    assert store.delete_nodes(node_ids=every) == len(every)
    assert second not in store.doc_ids() and store.count_documents() == len(doc_records) - 1
    by_rank = store.delete_nodes(filter={"rank": 3})
    assert by_rank == len(doc_records["page3.txt"]) and "page3.txt" not in store.doc_ids()
    remaining = store.count()
    assert store.delete_nodes() == remaining and store.count() == 0 and store.doc_ids() == []


def test_search_mmr_trades_relevance_for_diversity(open_store, doc_records, docs) -> None:
    store = open_store()
    for doc_id, nodes in doc_records.items():
        store.upsert_encoded_document(doc_id, nodes)
    text = docs["page2.txt"].split(". ")[0]
    vector = store.encoder.encode_queries(text).vector
    nodes = {r.node_id: r for records in doc_records.values() for r in records}
    cosine = {node_id: float(r.vector @ vector) for node_id, r in nodes.items()}
    nearest = sorted(cosine, key=lambda n: -cosine[n])
    relevant = store.search_mmr(text, k=5, lambda_=1.0)
    assert [h.node_id for h in relevant] == nearest[:5]
    np.testing.assert_allclose([h.score for h in relevant], [cosine[n] for n in nearest[:5]], atol=1e-4)
    diverse = store.search_mmr(vector, k=5, lambda_=0.0, filter={"group": "even"})
    picked = [h.node_id for h in diverse]
    assert picked[0] == next(n for n in nearest if nodes[n].metadata["group"] == "even")
    assert {nodes[n].metadata["group"] for n in picked} == {"even"}
    for i in range(1, len(picked)):  # each next node is the one least like the nodes picked before it
        chosen = [nodes[n].vector for n in picked[:i]]
        redundancy = {n: max(float(nodes[n].vector @ c) for c in chosen) for n in nodes if n not in picked[:i]
                      and nodes[n].metadata["group"] == "even"}
        assert redundancy[picked[i]] == pytest.approx(min(redundancy.values()), abs=1e-4)
    assert all(-1.0 <= h.score <= 1.0 for h in diverse)
    with pytest.raises(InvalidInputError, match="lambda_"):
        store.search_mmr(text, lambda_=2.0)
