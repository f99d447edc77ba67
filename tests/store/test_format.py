"""Stores written before nodes carried ``live`` (store format 1) open: read as they are, finished and upgraded by
the first open that may write; a read-only open of one a crash cut short says how to finish it (Qdrant Edge)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import qdrant_edge as qe

from lmk_rag.errors import StoreReadOnlyError
from lmk_rag.store import LandmarkStore, NodeRecord
from lmk_rag.store import records as rec


def _as_format_1(folder: Path, deleting: dict | None = None) -> None:
    """Turn a closed Edge store into what format 1 wrote: nodes without ``live``, no ``live`` index, the record's
    ``format_version`` 1; with ``deleting``, also a format-1 delete cut short (its marker without a version, its
    nodes still there). Done with the engine itself, as the older lmk-rag left it."""
    shard = qe.EdgeShard.load(str(folder / "shard"))
    nodes = qe.Filter(must=[qe.FieldCondition(key="kind", match=qe.MatchValue(rec.NODE))])
    shard.update(qe.UpdateOperation.delete_payload_by_filter(nodes, [rec.LIVE]))
    shard.update(qe.UpdateOperation.delete_field_index(rec.LIVE))
    if deleting is not None:
        payload = {**deleting, "version": None, "pending": 0}
        shard.update(qe.UpdateOperation.upsert_points([qe.Point(id=rec.marker_point_id(payload["doc_id"]), vector={},
                                                                payload=payload)]))
    shard.flush()
    shard.close()
    meta = {**json.loads((folder / "lmk_rag.json").read_text()), "format_version": 1}
    if deleting is not None:  # the ledger of a delete under way
        meta["committed"] = {**meta["committed"], "next": "unknown"}
    (folder / "lmk_rag.json").write_text(json.dumps(meta))


def test_a_format_1_store_is_read_as_it_is_and_upgraded_by_a_writer(tmp_path: Path, minilm_encoder,
                                                                     doc_records: dict[str, list[NodeRecord]]) -> None:
    folder = tmp_path / "s"
    names = list(doc_records)[:3]
    with LandmarkStore(folder, encoder=minilm_encoder) as store:
        store.upsert_documents([(name, doc_records[name]) for name in names])
        deleting = store.backend.retrieve([rec.marker_point_id(names[2])], False)[0].payload
    total = sum(len(doc_records[name]) for name in names)
    query = np.asarray(doc_records[names[0]][0].vector)
    _as_format_1(folder)
    with LandmarkStore(folder, read_only=True) as reader:  # read as it is: a node without live is shown
        assert reader.settings["format_version"] == 1
        assert len(reader.get_nodes()) == total and reader.search_vector(query, k=1)[0].doc_id == names[0]
    _as_format_1(folder, deleting)
    with pytest.raises(StoreReadOnlyError, match="open the store once without read_only"):
        LandmarkStore(folder, read_only=True)
    with LandmarkStore(folder, encoder=minilm_encoder) as writer:  # finishes the delete, then upgrades
        assert writer.settings["format_version"] == 2
        assert writer.doc_ids() == sorted(names[:2]) and writer.check() == []
        writer.upsert_nodes(names[0], doc_records[names[0]][:1])  # a write of format 2 beside format-1 nodes
        assert writer.count() == 1 + len(doc_records[names[1]])
        assert {h.doc_id for h in writer.search_vector(query, k=5)} == set(names[:2])
    assert json.loads((folder / "lmk_rag.json").read_text())["format_version"] == 2
    with LandmarkStore(folder, read_only=True) as reader:
        assert reader.count_documents() == 2 and reader.check() == []
