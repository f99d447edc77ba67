"""LandmarkStore.upsert_nodes: nodes written into their documents (the other stored nodes kept, one new version
each), where upsert_encoded_document replaces the whole document; nodes moving between documents, and chunk vectors
the store encodes for records that come without them; one test body per backend (Edge on disk, qdrant-client local,
real server if set), real MiniLM records."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from lmk_rag.errors import InvalidInputError, StoreReadOnlyError
from lmk_rag.store import NodeRecord


def _ids(records: list[NodeRecord]) -> list[str]:
    return sorted(record.node_id for record in records)


def test_upsert_nodes_keeps_the_other_nodes_of_a_document(open_store, doc_records) -> None:
    store = open_store()
    records = next(iter(doc_records.values()))
    assert len(records) == 3
    assert store.upsert_nodes(records[:1]) == 1
    assert store.upsert_nodes(records[1:]) == 3  # the stored one is written again with them
    changed = replace(records[1], metadata={**records[1].metadata, "edited": True})
    store.upsert_nodes([changed])
    stored = {record.node_id: record for record in store.get_nodes()}
    assert sorted(stored) == _ids(records) and store.count_documents() == 1
    assert stored[changed.node_id].metadata["edited"] is True
    np.testing.assert_allclose(stored[records[0].node_id].chunk_vectors, records[0].chunk_vectors, atol=1e-6)


def test_the_unit_in_the_verb_is_what_is_replaced_whole(open_store, doc_records) -> None:
    """One verb, upsert (insert, or replace by id): ``upsert_nodes`` replaces nodes by node id and keeps the
    document's other nodes; ``upsert_encoded_document`` replaces the document by doc id, its other nodes dropped."""
    store = open_store()
    doc_id, records = next(iter(doc_records.items()))
    store.upsert_encoded_document(doc_id, records)
    store.upsert_nodes(records[:1])
    assert _ids(store.get_nodes()) == _ids(records)
    store.upsert_encoded_document(doc_id, records[:1])
    assert _ids(store.get_nodes()) == _ids(records[:1]) and store.count_documents() == 1


def test_a_node_given_under_another_document_moves_there(open_store, doc_records) -> None:
    store = open_store()
    (first, one), (second, two) = list(doc_records.items())[:2]
    store.upsert_nodes([*one, *two])
    moving = replace(two[0], doc_id=first)
    store.upsert_nodes([moving])
    by_doc = {doc_id: _ids(store.get_nodes(filter={"doc_id": doc_id})) for doc_id in (first, second)}
    assert by_doc == {first: _ids([*one, moving]), second: _ids(two[1:])}
    store.upsert_nodes([replace(record, doc_id="third") for record in two[1:]])  # a document emptied is deleted
    assert second not in store.doc_ids() and store.count() == len(one) + len(two)


def test_records_without_chunk_vectors_are_encoded_by_the_store(open_store, doc_records) -> None:
    """The records of a document that tile it are encoded as the document (the same vectors); a record alone is
    encoded alone (the same chunks, close vectors); a blank one keeps its node vector as its chunk vector."""
    store = open_store()
    (_, records), (other, alone) = list(doc_records.items())[:2]
    bare = [replace(record, chunk_vectors=None) for record in records]
    single = replace(alone[1], chunk_vectors=None)
    blank = NodeRecord("blank", "blank-doc", "   ", (0, 3), records[0].vector, None)
    store.upsert_nodes([*reversed(bare), single, blank])
    stored = {record.node_id: record.chunk_vectors for record in store.get_nodes()}
    for record in records:
        np.testing.assert_allclose(stored[record.node_id], record.chunk_vectors, atol=1e-5)
    lone = stored[single.node_id]
    assert lone.shape == alone[1].chunk_vectors.shape
    assert float(np.mean(np.sum(lone * alone[1].chunk_vectors, axis=1))) > 0.8
    np.testing.assert_allclose(stored["blank"], records[0].vector[None, :], atol=1e-6)
    store.upsert_encoded_document(other, [replace(record, chunk_vectors=None) for record in alone])  # encoded too
    for record in store.get_nodes(filter={"doc_id": other}):
        expected = next(r for r in alone if r.node_id == record.node_id).chunk_vectors
        np.testing.assert_allclose(record.chunk_vectors, expected, atol=1e-5)


def test_upsert_nodes_refuses_bad_calls_before_writing(open_store, doc_records) -> None:
    store = open_store()
    records = next(iter(doc_records.values()))
    with pytest.raises(InvalidInputError, match="list of NodeRecord"):
        store.upsert_nodes(records[0])  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="node id is given twice"):
        store.upsert_nodes([records[0], records[0]])
    assert store.count() == 0
    store.upsert_nodes(records)
    store.close()
    with open_store(read_only=True) as reader, pytest.raises(StoreReadOnlyError):
        reader.upsert_nodes(records[:1])
