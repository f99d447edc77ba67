"""How many store modules one document write and one search run through (issue 45: "store paths of about six
modules"), read with a profiler on a real Edge store on disk and the real MiniLM encoder.

Each bound is what the module layout reaches now, so a change that spreads a path over more modules fails here and
names them. It can fail: on the layout before issue 45 one ``upsert_document`` ran through 18 store modules
(store, writes, documents, visibility, records, edge, base, settings, cutting, modes, points, versions, ledger,
access, commits, bm25, filters, space) and one ``search`` through 14 (store, backends, reads, settings, query,
query_vectors, points, bm25, visibility, edge, filters, access, base, records); after the first merges, through 10
each (a write also through settings, locks' read-write lock and filters, a search through backends, filters and
locks); then 8 and 7, while the thread guards lived in base beside the backend interface and the folder's locks in
locks. Issue 45 left a write running store, writes, documents, records, vectors, edge and guards, and a search store,
reads, vectors, query, records, edge and guards. Issue 62 gave each job its own module, so the same code now runs in
more of them: guards became read_write_lock, engine_errors and folder_locks (the commit lock Edge takes around every
change), and vectors lost the store's encoder (store_encoder) and BM25 (bm25). A write runs store, writes,
documents, records, store_encoder, vectors, bm25, edge, read_write_lock, folder_locks and engine_errors; a search
store, reads, store_encoder, vectors, bm25, query, records, edge, read_write_lock and engine_errors. A plain search
still translates no caller's filter (filters) and refreshes no reader's copy (backends), and a write keeps its
committed counts with the write protocol (writes).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import lmk_rag.store
from lmk_rag.store import LandmarkStore

STORE_DIR = Path(lmk_rag.store.__file__).resolve().parent
#: The store modules a warm ``upsert_document`` on Edge runs code of, at most (docs/architecture.md draws them).
WRITE_MODULES = 11
#: The store modules a warm fused ``search`` on Edge runs code of, at most.
SEARCH_MODULES = 10


def modules_run(action: Callable[[], Any]) -> list[str]:
    """The store modules whose code runs during ``action`` (a function call in this thread: the profiler's
    ``call`` events), in the order they are first entered."""
    seen: list[str] = []

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call":
            path = Path(frame.f_code.co_filename)
            if path.parent == STORE_DIR and path.stem not in seen:
                seen.append(path.stem)

    sys.setprofile(profile)
    try:
        action()
    finally:
        sys.setprofile(None)
    return seen


def test_the_counter_sees_each_module_entered(tmp_path: Path, minilm_encoder: Any) -> None:
    """The profiler sees the modules of a call, the facade first, and nothing of a call outside the store."""
    assert modules_run(lambda: sorted([3, 1])) == []
    with LandmarkStore(tmp_path / "store", encoder=minilm_encoder) as store:
        counted = modules_run(store.count)
    assert counted[0] == "store" and "reads" in counted and "edge" in counted, counted


def test_a_write_and_a_search_each_cross_few_store_modules(tmp_path: Path, minilm_encoder: Any,
                                                            docs: dict[str, str]) -> None:
    texts = list(docs.values())
    with LandmarkStore(tmp_path / "store", encoder=minilm_encoder) as store:
        store.upsert_document("warm", texts[0])  # warm: the encoder, the BM25 model and the first search's sample
        store.search("archive files", k=3)
        write = modules_run(lambda: store.upsert_document("doc", texts[1], {"kind": "manual"}))
        search = modules_run(lambda: store.search("archive files", k=3))
    assert write[0] == "store" and search[0] == "store"
    assert len(write) <= WRITE_MODULES, f"one upsert_document runs through {len(write)} store modules: {write}"
    assert len(search) <= SEARCH_MODULES, f"one search runs through {len(search)} store modules: {search}"
