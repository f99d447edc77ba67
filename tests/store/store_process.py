"""A store in a process of its own, driven by the tests of tests/store/test_readers.py: one JSON command a line on
stdin, one JSON answer a line on stdout. Writes pre-encoded records only (no encoder runs here).

    python store_process.py FOLDER RECORDS.pkl [--read-only]

Commands: ``{"op": "write", "docs": [ids], "tag": n}`` (one batch: each document's records as version ``n``),
``{"op": "delete", "doc": id}``, ``{"op": "churn"}`` (rewrite the documents round after round, deleting and
re-adding the first one, until ``{"op": "stop"}``), ``{"op": "where"}`` (the backend and the folder it reads),
``{"op": "versions"}`` (each document's version, after checking that every node of the document is of that version
and that none is missing), ``{"op": "busy", "seconds": s}`` (a call that long in flight: a thread holds the store's
read lock, as a long search does), ``{"op": "close"}``.
"""

from __future__ import annotations

import dataclasses
import json
import pickle
import sys
import threading
import time
from typing import Any

from lmk_rag.store import LandmarkStore, NodeRecord


def tagged(records: list[NodeRecord], doc_id: str, tag: int) -> list[NodeRecord]:
    """A document's records as version ``tag``: node ids ``doc#i`` and texts starting ``[v<tag>]``."""
    return [dataclasses.replace(r, doc_id=doc_id, node_id=f"{doc_id}#{i}", text=f"[v{tag}] {r.text}")
            for i, r in enumerate(records)]


def churn(store: LandmarkStore, records: dict[str, list[NodeRecord]], stop: threading.Event) -> int:
    """Rewrite every document, a batch a round (the first one deleted every third round and written again in the
    next), until ``stop`` is set; return the rounds done."""
    names = list(records)
    rounds = 0
    while not stop.is_set():
        rounds += 1
        if rounds % 3 == 0:
            store.delete_document(names[0])
            store.upsert_encoded_documents((doc_id, tagged(records[doc_id], doc_id, rounds)) for doc_id in names[1:])
        else:
            store.upsert_encoded_documents((doc_id, tagged(records[doc_id], doc_id, rounds)) for doc_id in names)
    return rounds


def main() -> None:
    """Open the store, say so, then answer commands until ``close``."""
    folder, records_file = sys.argv[1], sys.argv[2]
    with open(records_file, "rb") as handle:
        records: dict[str, list[NodeRecord]] = pickle.load(handle)
    store = LandmarkStore(folder, read_only="--read-only" in sys.argv)
    answer({"ready": True})
    churning: dict[str, Any] = {}
    for line in sys.stdin:
        command = json.loads(line)
        op = command["op"]
        if op == "write":
            docs = [(d, tagged(records[d], d, command["tag"])) for d in command["docs"]]
            answer({"written": store.upsert_encoded_documents(docs)})
        elif op == "delete":
            answer({"deleted": store.delete_document(command["doc"])})
        elif op == "churn":
            stop = threading.Event()
            thread = threading.Thread(target=lambda done=stop: churning.update(rounds=churn(store, records, done)))
            churning.update(stop=stop, thread=thread)
            thread.start()
            answer({"churning": True})
        elif op == "stop":
            answer({"rounds": stop_churning(churning)})
        elif op == "versions":
            answer(versions(store, records))
        elif op == "busy":
            started = threading.Event()
            threading.Thread(target=busy, args=(store, float(command["seconds"]), started), daemon=True).start()
            started.wait()
            answer({"busy": True})
        elif op == "where":
            backend = store.backend
            answer({"backend": backend.name, "folder": str(getattr(backend, "copy_folder", folder))})
        elif op == "close":
            stop_churning(churning)
            store.close()
            answer({"closed": True})
            return


def versions(store: LandmarkStore, records: dict[str, list[NodeRecord]]) -> dict[str, Any]:
    """Each document's version as a search-free read sees it, and whether each is whole (one version, every node)."""
    tags: dict[str, set[int]] = {}
    counts: dict[str, int] = {}
    for node in store.get_nodes():
        tags.setdefault(node.doc_id, set()).add(int(node.text[2 : node.text.index("]")]))
        counts[node.doc_id] = counts.get(node.doc_id, 0) + 1
    whole = all(len(t) == 1 and counts[d] == len(records[d]) for d, t in tags.items())
    return {"versions": {d: min(t) for d, t in sorted(tags.items())}, "whole": whole, "backend": store.backend.name}


def busy(store: LandmarkStore, seconds: float, started: threading.Event) -> None:
    """Hold the store's read lock for ``seconds``, as a search that long does."""
    with store._opened.shared.access.reading():
        started.set()
        time.sleep(seconds)


def stop_churning(churning: dict[str, Any]) -> int:
    """Stop a churn (if one runs) and return its rounds."""
    if "stop" in churning:
        churning.pop("stop").set()
        churning.pop("thread").join()
    return churning.get("rounds", 0)


def answer(message: dict[str, Any]) -> None:
    """One answer line."""
    print(json.dumps(message), flush=True)


if __name__ == "__main__":
    main()
