"""One process, many handles and threads: a second open of an Edge folder shares its shard; threads share one
handle, readers never see a half-written version and writes never interleave (issue 26, items 2 and 3)."""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path
from typing import Any

import pytest

from lmk_rag.errors import SettingsMismatchError, StoreClosedError, StoreLockedError
from lmk_rag.store import LandmarkStore, NodeRecord


def _tagged(records: list[NodeRecord], doc_id: str, tag: int) -> list[NodeRecord]:
    """A document's records as version ``tag`` of ``doc_id``: its id, node ids and texts carry the tag."""
    return [dataclasses.replace(r, doc_id=doc_id, node_id=f"{doc_id}#{i}", text=f"[v{tag}] {r.text}")
            for i, r in enumerate(records)]


def _tag(text: str) -> int:
    """The version tag ``[vN]`` a text starts with."""
    return int(text[2 : text.index("]")])


def test_a_second_handle_in_this_process_shares_the_open_store(tmp_path: Path, minilm_encoder, docs) -> None:
    first = LandmarkStore(tmp_path / "s", encoder=minilm_encoder)
    first.upsert_document("a", next(iter(docs.values())))
    second = LandmarkStore(tmp_path / "s", encoder=minilm_encoder)  # a notebook cell run again
    assert second.doc_ids() == ["a"]
    second.upsert_document("b", list(docs.values())[1])
    assert first.doc_ids() == ["a", "b"] and first.check() == [] and second.check() == []
    reader = LandmarkStore(tmp_path / "s", read_only=True)
    assert reader.count() == first.count()
    with pytest.raises(SettingsMismatchError, match="cuts nodes of"):
        LandmarkStore(tmp_path / "s", node_tokens=17)
    first.close()
    assert second.search("archives", k=1) and reader.doc_ids() == ["a", "b"]  # the others still work
    with pytest.raises(StoreClosedError):
        first.count()
    second.close()
    reader.close()
    with LandmarkStore(tmp_path / "s") as again:  # every handle closed: the shard was released
        assert again.doc_ids() == ["a", "b"] and again.check() == []


def test_a_local_mode_folder_open_twice_says_this_process(tmp_path: Path, minilm_encoder) -> None:
    with LandmarkStore(location=str(tmp_path / "local"), encoder=minilm_encoder), \
            pytest.raises(StoreLockedError, match="already open in this process"):
        LandmarkStore(location=str(tmp_path / "local"), encoder=minilm_encoder)
    LandmarkStore(location=str(tmp_path / "local"), encoder=minilm_encoder).close()


def test_readers_in_threads_never_see_a_half_written_version(tmp_path: Path, minilm_encoder,
                                                             doc_records: dict[str, list[NodeRecord]]) -> None:
    """A writer thread rewrites one document, version after version (pre-encoded records), while reader threads
    search pre-encoded queries and read its nodes: every answer holds one whole version, and versions only move
    forward for each reader."""
    names = list(doc_records)
    base = doc_records[names[0]]
    other = doc_records[names[1]]
    versions = [_tagged(base if tag % 2 else other, "doc", tag) for tag in range(8)]
    query = minilm_encoder.encode_queries("what does this page describe")
    problems: list[str] = []
    with LandmarkStore(tmp_path / "s", encoder=minilm_encoder) as store:
        store.upsert_encoded_document("doc", versions[0])
        done = threading.Event()

        def read() -> None:
            last = 0
            while not done.is_set():
                nodes = store.get_nodes(filter={"doc_id": "doc"})
                tags = {_tag(node.text) for node in nodes}
                if len(tags) != 1:
                    problems.append(f"nodes of versions {sorted(tags)} at once")
                    continue
                tag = tags.pop()
                if len(nodes) != len(versions[tag]):
                    problems.append(f"version {tag} with {len(nodes)} of its {len(versions[tag])} nodes")
                if tag < last:
                    problems.append(f"version went back from {last} to {tag}")
                last = tag
                hits = store.search_encoded(query, k=5, one_per_document=False)
                if len({_tag(hit.text) for hit in hits}) != 1:
                    problems.append("a search mixed two versions")

        readers = [threading.Thread(target=read) for _ in range(3)]
        for thread in readers:
            thread.start()
        for records in versions[1:]:
            store.upsert_encoded_document("doc", records)
        done.set()
        for thread in readers:
            thread.join()
        assert problems == []
        assert {_tag(node.text) for node in store.get_nodes()} == {7} and store.check() == []


def test_writes_from_two_threads_are_serialised(tmp_path: Path, minilm_encoder,
                                                doc_records: dict[str, list[NodeRecord]]) -> None:
    names = list(doc_records)
    errors: list[BaseException] = []
    with LandmarkStore(tmp_path / "s", encoder=minilm_encoder) as store:

        def write(prefix: str) -> None:
            try:
                for round_ in range(4):
                    for name in names[:3]:
                        records = doc_records[name]
                        doc_id = f"{prefix}-{name}"
                        store.upsert_encoded_document(doc_id, [
                            dataclasses.replace(r, doc_id=doc_id, node_id=f"{doc_id}#{i}")
                            for i, r in enumerate(records)])
                    if round_ == 2:
                        store.delete_document(f"{prefix}-{names[0]}")
            except BaseException as error:  # reported below
                errors.append(error)

        threads = [threading.Thread(target=write, args=(prefix,)) for prefix in ("x", "y")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        expected: dict[str, Any] = {f"{p}-{n}" for p in ("x", "y") for n in names[:3]}
        assert set(store.doc_ids()) == expected
        assert store.count() == 2 * sum(len(doc_records[n]) for n in names[:3])
        assert store.check() == []  # the committed counts, the markers and the nodes agree
    with LandmarkStore(tmp_path / "s") as reopened:  # and the committed counts verify on open
        assert set(reopened.doc_ids()) == expected
