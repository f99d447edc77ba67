"""Writes that lose nothing: crashes between write steps, kill -9 of an ingesting process, the lock,
and damaged or foreign folders (Qdrant Edge on disk)."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from lmk_rag.errors import CorruptStoreError, StoreNotFoundError
from lmk_rag.store import LandmarkStore

REPO = Path(__file__).resolve().parents[2]


def _fail_on_call(store: LandmarkStore, method: str, n: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the n-th call of a backend method raise, like a crash at that step."""
    original = getattr(store.backend, method)
    calls = {"n": 0}

    def failing(*args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == n:
            raise RuntimeError(f"simulated crash in {method} call {n}")
        return original(*args, **kwargs)

    monkeypatch.setattr(store.backend, method, failing)


def _crash_after_prefix(store: LandmarkStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the next upsert write the first half of its points, then raise: a crash part-way through one upsert,
    which keeps a prefix of its batches (the backend's contract)."""
    original = store.backend.upsert

    def half(points: list[Any]) -> None:
        original(points[: len(points) // 2])
        raise RuntimeError("simulated crash in upsert, half written")

    monkeypatch.setattr(store.backend, "upsert", half)


#: The steps of a write (Qdrant Edge: the nodes and the commit markers in one upsert) and what a crash in each
#: leaves: (method, call, the version a reader sees before the repair, the one it sees after). A process crash keeps
#: what reached the write-ahead log, so a commit marker upserted before the flush survives it.
CRASH_POINTS = {
    "nodes half written": ("upsert", 0, "old", "old"),
    "nodes and markers not written": ("upsert", 1, "old", "old"),
    "before the flush": ("flush", 1, "old", "new"),
    "committed, new nodes not shown": ("set_payload", 1, "old", "new"),
    "shown, old nodes not dropped": ("delete", 1, "new", "new"),  # both live: a reader keeps the latest
    "done marker not written": ("upsert", 2, "new", "new"),
}


@pytest.mark.parametrize("point", list(CRASH_POINTS))
def test_a_crash_at_every_step_of_a_write_leaves_one_whole_version(tmp_path, minilm_encoder, doc_records,
                                                                   monkeypatch, point):
    method, call, before_repair, survivor = CRASH_POINTS[point]
    query = minilm_encoder.encode_queries("file tests and exit status")
    store = LandmarkStore(tmp_path / "s", encoder=minilm_encoder)
    old = doc_records["page0.txt"]
    store.upsert_encoded_document("page0.txt", old)
    new = [r.__class__(**{**r.__dict__, "text": "NEW " + r.text}) for r in doc_records["page0.txt"][:1]]
    if call == 0:
        _crash_after_prefix(store, monkeypatch)
    else:
        _fail_on_call(store, method, call, monkeypatch)
    with pytest.raises(RuntimeError, match="simulated crash"):
        store.upsert_encoded_document("page0.txt", new)
    monkeypatch.undo()
    expected = {"old": sorted(r.text for r in old), "new": [new[0].text]}
    assert sorted(n.text for n in store.get_nodes(filter={"doc_id": "page0.txt"})) == expected[before_repair]
    hits = store.search_encoded(query, k=20, one_per_document=False)
    assert hits and {h.text for h in hits} <= set(expected[before_repair])  # a search sees the same version
    store.close()
    with LandmarkStore(tmp_path / "s") as again:  # reopening repairs
        assert sorted(n.text for n in again.get_nodes()) == expected[survivor]
        assert again.count() == len(expected[survivor]) and again.check() == []
        assert {h.text for h in again.search_encoded(query, k=20, one_per_document=False)} <= set(expected[survivor])


def test_a_crash_in_a_delete_leaves_the_document_whole(tmp_path, minilm_encoder, doc_records, monkeypatch):
    store = LandmarkStore(tmp_path / "s", encoder=minilm_encoder)
    store.upsert_encoded_document("page0.txt", doc_records["page0.txt"])
    _fail_on_call(store, "delete", 1, monkeypatch)
    with pytest.raises(RuntimeError):
        store.delete_document("page0.txt")
    monkeypatch.undo()
    assert len(store.get_nodes()) == len(doc_records["page0.txt"])  # one delete: nothing of it was applied
    assert store.delete_document("page0.txt")
    store.close()
    with LandmarkStore(tmp_path / "s") as again:
        assert again.count() == 0 and again.doc_ids() == [] and again.check() == []


CHILD = textwrap.dedent(
    """
    import json, sys
    from lmk_rag.store import LandmarkStore
    docs = json.load(open(sys.argv[2]))
    store = LandmarkStore(sys.argv[1])
    store.upsert_documents([(d, t, None) for d, t in docs.items()], document_batch_size=2,
                        on_ack=lambda ids: print("ACK", json.dumps(ids), flush=True))
    nodes = {d: sorted(store.get_nodes(filter={"doc_id": d}), key=lambda n: n.span) for d in docs}
    i = 0
    while True:  # re-ingest forever, alternating full and half-size versions, until killed
        d = list(docs)[i % len(docs)]
        size = len(nodes[d]) if (i // len(docs)) % 2 == 0 else max(1, len(nodes[d]) // 2)
        store.upsert_encoded_document(d, nodes[d][:size])
        print("REINGEST", json.dumps([d, size, len(nodes[d])]), flush=True)
        i += 1
    """
)


@pytest.mark.slow
def test_kill_minus_9_during_ingest_loses_no_acknowledged_document(tmp_path, docs):
    (tmp_path / "docs.json").write_text(json.dumps(docs))
    (tmp_path / "child.py").write_text(CHILD)
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen(
        [sys.executable, str(tmp_path / "child.py"), str(tmp_path / "s"), str(tmp_path / "docs.json")],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env,
    )
    acked: set[str] = set()
    sizes: dict[str, list[int]] = defaultdict(list)  # acknowledged node counts per doc, in order
    full: dict[str, int] = {}
    reingests, target = 0, random.Random(7).randint(15, 40)
    assert proc.stdout is not None
    for line in proc.stdout:
        kind, payload = line.split(" ", 1)
        if kind == "ACK":
            acked.update(json.loads(payload))
        else:
            doc_id, size, total = json.loads(payload)
            sizes[doc_id].append(size)
            full[doc_id] = total
            reingests += 1
            if reingests == target:
                time.sleep(random.Random(reingests).random() * 0.05)
                os.kill(proc.pid, signal.SIGKILL)
                break
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    assert acked == set(docs)
    with LandmarkStore(tmp_path / "s") as store:
        assert store.doc_ids() == sorted(docs)
        nodes = store.get_nodes()
        assert len({n.node_id for n in nodes}) == len(nodes) == store.count()  # none duplicated, no orphans
        by_doc: dict[str, list[Any]] = defaultdict(list)
        for node in nodes:
            by_doc[node.doc_id].append(node)
        for doc_id, text in docs.items():
            got = len(by_doc[doc_id])
            last = sizes[doc_id][-1] if sizes[doc_id] else full.get(doc_id, got)
            other = full[doc_id] if last != full.get(doc_id) else max(1, full.get(doc_id, got) // 2)
            assert got in (last, other), (doc_id, got, last, other)  # the last acked version or the one in flight
            assert sorted(n.node_id for n in by_doc[doc_id]) == sorted(f"{doc_id}#{i}" for i in range(got))
            assert any(h.doc_id == doc_id for h in store.search(text.split(". ")[0][:200], k=3))


@pytest.mark.slow
def test_second_writer_is_refused(tmp_path, minilm_encoder):
    store = LandmarkStore(tmp_path / "s", encoder=minilm_encoder)
    child = (
        "import sys\nfrom lmk_rag.store import LandmarkStore\nfrom lmk_rag.errors import StoreLockedError\n"
        "try:\n    LandmarkStore(sys.argv[1])\nexcept StoreLockedError as e:\n    print('LOCKED', e)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
    out = subprocess.run([sys.executable, "-c", child, str(tmp_path / "s")], capture_output=True, text=True, env=env)
    assert out.stdout.startswith("LOCKED") and "lmk_rag.lock" in out.stdout, out.stderr[-2000:]
    store.close()
    out = subprocess.run([sys.executable, "-c", child, str(tmp_path / "s")], capture_output=True, text=True, env=env)
    assert "LOCKED" not in out.stdout, out.stdout  # free again once closed


def test_foreign_damaged_and_missing_folders(tmp_path, minilm_encoder):
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.csv").write_text("a,b\n")
    with pytest.raises(CorruptStoreError, match="not a lmk-rag store"):
        LandmarkStore(foreign, encoder=minilm_encoder)
    with pytest.raises(StoreNotFoundError, match="no lmk-rag store"):
        LandmarkStore(tmp_path / "missing", create=False)
    good = tmp_path / "good"
    LandmarkStore(good, encoder=minilm_encoder).close()
    meta = (good / "lmk_rag.json").read_text()
    (good / "lmk_rag.json").write_text("{not json")
    with pytest.raises(CorruptStoreError, match="unreadable"):
        LandmarkStore(good, encoder=minilm_encoder)
    (good / "lmk_rag.json").write_text(json.dumps({"format": "something-else"}))
    with pytest.raises(CorruptStoreError, match="foreign"):
        LandmarkStore(good, encoder=minilm_encoder)
    (good / "lmk_rag.json").write_text(meta)
    shutil.rmtree(good / "shard")
    with pytest.raises(CorruptStoreError, match="missing"):
        LandmarkStore(good, encoder=minilm_encoder)
    (good / "shard").mkdir()
    (good / "shard" / "edge_config.json").write_text("garbage")
    with pytest.raises(CorruptStoreError):
        LandmarkStore(good, encoder=minilm_encoder)
