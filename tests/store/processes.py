"""Stores in processes of their own (store_process.py), for the tests of readers and writers in several processes
(tests/store/test_readers.py, tests/store/test_handover.py), and the checks they make of what a reader sees."""

from __future__ import annotations

import json
import os
import pickle
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from store_process import tagged

from lmk_rag.store import LandmarkStore, NodeRecord

REPO = Path(__file__).resolve().parents[2]
HELPER = Path(__file__).resolve().parent / "store_process.py"
#: Seconds a process may take to answer a command before the test gives up on it (a bound, not a measure).
PATIENCE = 300


class StoreProcess:
    """A store opened in a process of its own (see store_process.py), answering one command at a time."""

    def __init__(self, folder: Path, records: Path, read_only: bool = False, wait: bool = True) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
               "HF_HUB_OFFLINE": "1"}
        args = [sys.executable, str(HELPER), str(folder), str(records)] + (["--read-only"] if read_only else [])
        self.process = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        self._lines: queue.Queue[str] = queue.Queue()
        self._closed = False  # its store was closed: the process is ending (perhaps not ended yet)
        threading.Thread(target=self._read, daemon=True).start()
        if wait:
            self.ready()

    def ready(self) -> None:
        """Wait for its store to be open."""
        assert self._answer() == {"ready": True}

    def post(self, **command: Any) -> None:
        """Send a command without waiting for its answer."""
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()

    def _read(self) -> None:
        for line in self.process.stdout:
            self._lines.put(line)
        self._lines.put("")

    def _answer(self) -> dict[str, Any]:
        try:
            line = self._lines.get(timeout=PATIENCE)
        except queue.Empty:
            self.kill()
            raise AssertionError(f"the store process gave no answer in {PATIENCE} s") from None
        assert line, f"the store process ended (exit code {self.process.wait()})"
        return json.loads(line)

    def send(self, **command: Any) -> dict[str, Any]:
        """Send a command and return its answer."""
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()
        answer = self._answer()
        self._closed = self._closed or answer == {"closed": True}
        return answer

    def kill(self) -> None:
        """Kill -9 the process."""
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait()

    def close(self) -> None:
        """Close its store (unless a command did) and wait for it to end."""
        if not self._closed and self.process.poll() is None:
            assert self.send(op="close") == {"closed": True}
        self.process.wait(PATIENCE)


def tag_of(text: str) -> int:
    """The version a node's text was written as."""
    return int(text[2 : text.index("]")])


def make_store(folder: Path, records: Path, encoder: Any) -> dict[str, list[NodeRecord]]:
    """Make the store with version 0 of every document, closed; return the documents' records."""
    chosen = pickle.loads(records.read_bytes())
    with LandmarkStore(folder, encoder=encoder) as store:
        store.upsert_encoded_documents((doc_id, tagged(nodes, doc_id, 0)) for doc_id, nodes in chosen.items())
    return chosen


def versions(store: LandmarkStore, chosen: dict[str, list[NodeRecord]], query: Any) -> dict[str, int]:
    """Each visible document's version, after checking that the store holds it whole: every node of one version,
    as many as that version has, and searches that show that version only."""
    by_doc: dict[str, set[int]] = {}
    counts: dict[str, int] = {}
    for node in store.get_nodes():
        by_doc.setdefault(node.doc_id, set()).add(tag_of(node.text))
        counts[node.doc_id] = counts.get(node.doc_id, 0) + 1
    assert all(len(tags) == 1 for tags in by_doc.values()), f"a document's nodes of two versions: {by_doc}"
    versions = {doc_id: tags.pop() for doc_id, tags in by_doc.items()}
    assert counts == {doc_id: len(chosen[doc_id]) for doc_id in versions}, "a version with nodes missing"
    assert sorted(versions) == store.doc_ids()
    for hit in store.search_encoded(query, k=20, one_per_document=False):
        assert tag_of(hit.text) == versions[hit.doc_id], "a search showed another version than the store holds"
    return versions
