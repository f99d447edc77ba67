"""Readers in other processes than the one holding an Edge folder (issue 26, item 1): each reads a copy of its own,
taken at a committed state under the folder's commit lock, and taken again when the holder commits.

Real shards on disk, real processes (tests/store/store_process.py), pre-encoded records only: the one encoder is
this process's, which encodes the query once.
"""

from __future__ import annotations

import json
import pickle
import threading
from pathlib import Path
from typing import Any

import pytest
from processes import StoreProcess, make_store, versions
from typer.testing import CliRunner

from llama_index.vector_stores.landmark import LandmarkVectorStore
from lmk_rag.cli import app
from lmk_rag.errors import StoreLockedError
from lmk_rag.store import LandmarkStore, NodeRecord
from lmk_rag.store.edge import SETTINGS_FILE, SHARD_DIR
from lmk_rag.store.folder_copy import READERS_DIR, take_copy
from lmk_rag.store.folder_locks import CommitLock

pytestmark = pytest.mark.slow
#: Copies the torn-copy test takes while the writer writes, each at a later commit than the one before.
COPIES = 8


@pytest.fixture
def four(tmp_path: Path, doc_records: dict[str, list[NodeRecord]]) -> Path:
    """Four documents' real nodes, pickled for the store processes."""
    path = tmp_path / "records.pkl"
    path.write_bytes(pickle.dumps({name: doc_records[name] for name in list(doc_records)[:4]}))
    return path


def test_readers_never_copy_a_write_half_applied(tmp_path: Path, four: Path, minilm_encoder: Any) -> None:
    """A writer process rewrites and deletes documents without pause while this process copies the store again
    and again, as a reader does (each copy at a later commit): every copy opens as a store of its own, passes the
    store's full check (no interrupted write, no orphan node, committed counts equal to what it holds) and holds
    every document whole, at one version. Copying without the commit lock fails this."""
    folder = tmp_path / "s"
    chosen = make_store(folder, four, minilm_encoder)
    query = minilm_encoder.encode_queries("what does this page describe")
    writer = StoreProcess(folder, four)
    commits = CommitLock(folder)
    seen: list[int] = []
    try:
        assert writer.send(op="churn") == {"churning": True}
        for _ in range(COPIES):
            copy = take_copy(folder, commits, (SETTINGS_FILE, SHARD_DIR))
            try:
                with LandmarkStore(copy.folder, read_only=True) as reader:
                    assert reader.check() == []
                    versions(reader, chosen, query)
            finally:
                copy.remove()
            assert not seen or copy.generation > seen[-1]
            seen.append(copy.generation)
            while commits.generation() == copy.generation:  # the next copy is of a later commit
                threading.Event().wait(0.05)
        assert writer.send(op="stop")["rounds"] > 0
        with LandmarkStore(folder, read_only=True) as reader:  # and through the store, as readers open it
            assert reader.backend.name == "qdrant-edge (reader copy)" and reader.check() == []
    finally:
        commits.close()
        writer.close()
    assert not list((folder / READERS_DIR).iterdir())  # every copy removed on close
    with LandmarkStore(folder) as store:
        assert store.check() == []


def test_a_reader_sees_each_commit_in_order(tmp_path: Path, four: Path, minilm_encoder: Any) -> None:
    """A reader opened beside a writer process sees what was committed before it opened; after each commit of the
    writer, its next read sees that commit (it takes a new copy), and nothing between two commits."""
    folder = tmp_path / "s"
    chosen = make_store(folder, four, minilm_encoder)
    names = list(chosen)
    query = minilm_encoder.encode_queries("what does this page describe")
    writer = StoreProcess(folder, four)
    try:
        reader = LandmarkStore(folder, read_only=True)
        assert versions(reader, chosen, query) == dict.fromkeys(names, 0)
        assert reader.refresh() is False  # nothing committed since the copy
        first = reader.backend.copy_folder
        assert writer.send(op="write", docs=names[:1], tag=1)["written"] > 0
        assert reader.backend.moved()
        assert versions(reader, chosen, query) == {names[0]: 1, **dict.fromkeys(names[1:], 0)}
        assert reader.backend.copy_folder != first and not first.exists()  # the old copy is gone
        assert reader.refresh() is False
        assert writer.send(op="delete", doc=names[0]) == {"deleted": True}
        assert writer.send(op="write", docs=names[1:3], tag=2)["written"] > 0
        assert reader.refresh() is True  # both commits in one new copy
        assert versions(reader, chosen, query) == {names[1]: 2, names[2]: 2, names[3]: 0}
        info = CliRunner().invoke(app, ["info", "--store", str(folder)])  # lmk-rag beside the writer
        assert info.exit_code == 0 and json.loads(info.output)["documents"] == 3, info.output
        assert CliRunner().invoke(app, ["check", "--store", str(folder)]).output.startswith("ok: 3 documents")
        with LandmarkVectorStore(path=str(folder), read_only=True) as vector_store:  # README's reader
            found = vector_store.as_index().as_retriever(similarity_top_k=2).retrieve("what does this page describe")
            assert {hit.node.ref_doc_id for hit in found} <= set(names[1:]) and found
        second = LandmarkStore(folder, read_only=True)  # another handle here shares the copy
        assert second.backend.copy_folder == reader.backend.copy_folder and second.doc_ids() == reader.doc_ids()
        with pytest.raises(StoreLockedError, match="this process reads a copy"):
            LandmarkStore(folder)
        second.close()
        assert writer.send(op="close") == {"closed": True}
        assert reader.refresh() is False and reader.doc_ids() == names[1:]  # closing changed nothing it holds
        copy = reader.backend.copy_folder
        reader.close()
        assert not copy.exists()
    finally:
        writer.close()


def test_readers_beside_a_reader_and_copies_of_dead_readers(tmp_path: Path, four: Path, minilm_encoder: Any) -> None:
    """With no writer, the first reader holds the folder and the others read copies; a writer then opens it (the
    first reader hands it over, and reads a copy from then on); the copy of a reader killed with -9 is removed by
    the next reader."""
    folder = tmp_path / "s"
    chosen = make_store(folder, four, minilm_encoder)
    first = StoreProcess(folder, four, read_only=True)
    second = StoreProcess(folder, four, read_only=True)
    try:
        assert first.send(op="where") == {"backend": "qdrant-edge", "folder": str(folder)}
        where = second.send(op="where")
        assert where["backend"] == "qdrant-edge (reader copy)"
        dead = Path(where["folder"])
        assert dead.parent == folder / READERS_DIR and dead.is_dir()
        second.kill()
        with LandmarkStore(folder) as writer:  # readers never keep a writer out (issue 46)
            assert writer.backend.name == "qdrant-edge"
            assert first.send(op="where")["backend"] == "qdrant-edge (reader copy)"
        with LandmarkStore(folder, read_only=True) as reader:
            assert not dead.exists()  # a dead reader's copy is removed
            assert reader.doc_ids() == sorted(chosen) and reader.check() == []
    finally:
        second.kill()
        first.close()
