"""A long-lived reader, as an application keeps one: open a store read-only, search, sleep, search again.

    python examples/reader.py STORE SECONDS [QUERY]

Prints one JSON line per search: the documents the store holds and the search's hits. It sleeps SECONDS between
the two searches, or less when a line arrives on stdin (a test's signal). A writer (``lmk-rag ingest MORE --store
STORE``) may open the store meanwhile, whichever process came first: the reader hands the folder over, reads a copy
and sees the writer's commits on its next call (docs/store.md, "Concurrency").
"""

from __future__ import annotations

import json
import os
import select
import sys
import time

from lmk_rag.store import LandmarkStore


def search(store: LandmarkStore, query: str) -> None:
    """Print the store's documents and a search's hits as one JSON line."""
    hits = store.search(query, k=5)
    print(json.dumps({"pid": os.getpid(), "backend": store.backend.name, "documents": store.doc_ids(),
                      "hits": [hit.doc_id for hit in hits]}), flush=True)


def pause(seconds: float) -> None:
    """Sleep ``seconds``, or until a line arrives on stdin (an end of input does not end the sleep)."""
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        ready, _, _ = select.select([sys.stdin], [], [], left)
        if ready and sys.stdin.readline():
            return
        if ready:  # end of input (a shell's &): sleep the rest
            time.sleep(max(0.0, deadline - time.monotonic()))


def main() -> None:
    folder, seconds = sys.argv[1], float(sys.argv[2])
    query = sys.argv[3] if len(sys.argv) > 3 else "what does this page describe"
    with LandmarkStore(folder, read_only=True) as store:
        search(store, query)
        pause(seconds)
        search(store, query)


if __name__ == "__main__":
    main()
