"""The silent losses and silently wrong results of the hostile trial (issue 28), each a case with its expected
outcome on a real Edge store with real MiniLM nodes: a typed error and nothing stored changed, or the correct
result. Folders, links and files are real; the CLI runs in process through Typer's runner."""

from __future__ import annotations

import dataclasses
import datetime
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from lmk_rag.cli import app
from lmk_rag.cli.store import filter_value
from lmk_rag.errors import CorruptStoreError, InvalidInputError
from lmk_rag.store import FieldCondition, Filter, LandmarkStore, SearchOptions


@pytest.fixture
def store(tmp_path: Path, minilm_encoder, docs) -> LandmarkStore:
    """A real Edge store of two real pages, ``a.txt`` and ``b.txt``."""
    texts = list(docs.values())
    with LandmarkStore(tmp_path / "store", encoder=minilm_encoder) as opened:
        opened.upsert_documents([("a.txt", texts[0], {"n": 1}), ("b.txt", texts[1], {"n": 2.0})])
        yield opened


def _state(store: LandmarkStore) -> tuple[Any, ...]:
    """What the store holds: documents with their metadata, node ids, and whether the check is clean."""
    return store.documents(), sorted(r.node_id for r in store.get_nodes()), store.check()


# ------------------------------------------------------------------ silent losses


@pytest.mark.parametrize("kwargs", [
    {"node_tokens": 0}, {"node_tokens": True}, {"node_tokens": "256"}, {"node_tokens": -1},
    {"batch_size": -1}, {"batch_size": 0}, {"batch_size": "8"}, {"batch_size": 2.0},
    {"document_batch_size": 0}, {"document_batch_size": "8"}, {"bm25": "yes"}, {"bm25": 1},
], ids=lambda kwargs: "-".join(f"{k}={v!r}" for k, v in kwargs.items()))
def test_bad_constructor_numbers_are_refused_before_anything_is_created(tmp_path: Path, minilm_encoder,
                                                                        kwargs) -> None:
    name = next(iter(kwargs))
    with pytest.raises(InvalidInputError, match=name):
        LandmarkStore(tmp_path / "new", encoder=minilm_encoder, **kwargs)
    assert not (tmp_path / "new").exists()


@pytest.mark.parametrize("kwargs", [{"hnsw_ef": -1}, {"hnsw_ef": "x"}, {"hnsw_ef": 0}, {"prefetch_limit": "x"},
                                    {"prefetch_limit": 0}],
                         ids=lambda kwargs: "-".join(f"{k}={v!r}" for k, v in kwargs.items()))
def test_bad_search_numbers_are_refused_when_the_options_are_made(kwargs) -> None:
    with pytest.raises(InvalidInputError, match=next(iter(kwargs))):
        SearchOptions(**kwargs)


@pytest.mark.parametrize("batch_size", [-1, 0, "8", True])
def test_a_bad_batch_size_stores_nothing_and_says_so(store, docs, batch_size) -> None:
    before = _state(store)
    documents = [(f"new{i}.txt", text, None) for i, text in enumerate(list(docs.values())[2:6])]
    with pytest.raises(InvalidInputError, match="batch_size"):
        store.upsert_documents(documents, document_batch_size=batch_size)
    with pytest.raises(InvalidInputError, match="batch_size"):
        store.upsert_encoded_documents([], document_batch_size=batch_size)
    assert _state(store) == before


def test_an_on_ack_that_is_not_callable_is_refused_before_the_write(store, docs) -> None:
    before = _state(store)
    with pytest.raises(InvalidInputError, match="on_ack"):
        store.upsert_documents([("c.txt", list(docs.values())[2], None)], on_ack="x")
    assert _state(store) == before


def test_a_node_id_of_another_document_is_refused(store, docs) -> None:
    before = _state(store)
    victim = store.get_nodes(["a.txt#0"])[0]
    thief = dataclasses.replace(victim, doc_id="thief", text="stolen")
    with pytest.raises(InvalidInputError, match=re.escape("'a.txt#0' belongs to document 'a.txt'")):
        store.upsert_encoded_document("thief", [thief])
    second = dataclasses.replace(victim, node_id="fresh#0", doc_id="other")
    with pytest.raises(InvalidInputError, match=re.escape("'fresh#0' is given for documents 'thief' and 'other'")):
        store.upsert_encoded_documents([("thief", [dataclasses.replace(second, doc_id="thief")]), ("other", [second])])
    assert _state(store) == before == (before[0], before[1], [])
    assert store.search(next(iter(docs.values()))[:150], k=1)[0].doc_id == "a.txt"
    # the document's own nodes may be rewritten under their ids
    assert store.upsert_encoded_document("a.txt", [dataclasses.replace(victim, text="rewritten")]) == 1
    assert store.get_nodes(["a.txt#0"])[0].text == "rewritten"


def _ingest(*args: str) -> Any:
    result = CliRunner().invoke(app, ["ingest", *args])
    assert result.exit_code == 0, result.output
    return result


@pytest.mark.slow
def test_sync_deletes_only_what_the_cli_ingested(tmp_path: Path, minilm_encoder, docs) -> None:
    folder, store_path = tmp_path / "docs", tmp_path / "store"
    folder.mkdir()
    texts = list(docs.values())
    (folder / "kept.txt").write_text(texts[0][:800])
    (folder / "gone.txt").write_text(texts[1][:800])
    _ingest(str(folder), "--store", str(store_path))
    with LandmarkStore(store_path) as target:  # the CLI's encoder settings, as recorded
        # an API document that names a (missing) file under the folder in its metadata, as users may
        target.upsert_document("ghost", texts[2][:800], {"path": str(folder / "ghost.txt")})
        assert target.sources() == {"kept.txt": str(folder / "kept.txt"), "gone.txt": str(folder / "gone.txt")}
    (folder / "gone.txt").unlink()
    result = _ingest(str(folder), "--store", str(store_path), "--sync")
    assert "0 new, 0 changed, 1 unchanged, 1 deleted" in result.stdout
    with LandmarkStore(store_path, read_only=True) as target:
        assert target.doc_ids() == ["ghost", "kept.txt"]


@pytest.mark.slow
def test_a_store_written_before_sources_were_recorded_gets_them_without_reencoding(tmp_path: Path, minilm_encoder,
                                                                                   docs) -> None:
    folder, store_path = tmp_path / "docs", tmp_path / "store"
    folder.mkdir()
    (folder / "a.txt").write_text(next(iter(docs.values()))[:800])
    with LandmarkStore(store_path) as target:  # as the CLI wrote it before: the path in metadata only
        target.upsert_document("a.txt", (folder / "a.txt").read_text(), {"path": str(folder / "a.txt")})
        assert target.sources() == {}
    result = _ingest(str(folder), "--store", str(store_path))
    assert "0 new, 0 changed, 1 unchanged" in result.stdout and "0 nodes written" in result.stdout
    with LandmarkStore(store_path, read_only=True) as target:
        assert target.sources() == {"a.txt": str(folder / "a.txt")}


@pytest.mark.slow
def test_symlinks_inside_are_followed_and_the_rest_reported(tmp_path: Path, minilm_encoder, docs) -> None:
    folder, outside, store_path = tmp_path / "docs", tmp_path / "outside", tmp_path / "store"
    (folder / "sub").mkdir(parents=True)
    outside.mkdir()
    texts = list(docs.values())
    (folder / "sub" / "real.txt").write_text(texts[0][:800])
    (outside / "secret.txt").write_text(texts[1][:800])
    (folder / "inside.txt").symlink_to(folder / "sub" / "real.txt")
    (folder / "escape.txt").symlink_to(outside / "secret.txt")
    (folder / "dangling.txt").symlink_to(folder / "nowhere.txt")
    (folder / "loop").symlink_to(folder)
    result = _ingest(str(folder), "--store", str(store_path))
    assert "2 new, 0 changed, 0 unchanged, 0 deleted, 3 skipped" in result.stdout
    assert f"skipped {folder / 'escape.txt'}: a link to {outside / 'secret.txt'}, outside the folder" in result.output
    assert f"skipped {folder / 'dangling.txt'}: a dangling link" in result.output
    assert f"skipped {folder / 'loop'}: a link to a folder (not followed)" in result.output
    with LandmarkStore(store_path, read_only=True) as target:
        assert target.sources() == {"inside.txt": str(folder / "inside.txt"),
                                    "sub/real.txt": str(folder / "sub" / "real.txt")}
        assert target.documents()["inside.txt"] == {"path": str(folder / "inside.txt")}  # the link, not its target
    (folder / "inside.txt").unlink()
    assert "1 deleted" in _ingest(str(folder), "--store", str(store_path), "--sync").stdout


# ------------------------------------------------------------------ silently wrong


@pytest.mark.parametrize("raw, value", [
    ("1e5", 100000.0), ("100000", 100000), (".5", 0.5), ("5.", 5.0), ("007", 7), ("-5", -5), ("+3", 3),
    ("true", True), ("false", False), ("null", None), ("--5", "--5"), ("nan", "nan"), ("inf", "inf"),
    ("0x10", "0x10"), ("1_000", "1_000"), ("2026-01-01", "2026-01-01"), ("True", "True"), ("", ""),
])
def test_cli_filter_values_are_read_as_a_user_means_them(raw, value) -> None:
    parsed = filter_value(raw)
    assert parsed == value and type(parsed) is type(value)


def test_integer_and_float_equality_is_symmetric(store) -> None:
    """``a.txt`` stores ``n=1`` (an integer), ``b.txt`` ``n=2.0`` (a float)."""
    def docs(condition: FieldCondition) -> set[str]:
        return {hit.doc_id for hit in store.search("a page", k=10, filter=Filter(must=[condition]))}

    assert docs(FieldCondition("n", "eq", 1.0)) == docs(FieldCondition("n", "eq", 1)) == {"a.txt"}
    assert docs(FieldCondition("n", "eq", 2)) == docs(FieldCondition("n", "eq", 2.0)) == {"b.txt"}
    assert docs(FieldCondition("n", "in", [2])) == docs(FieldCondition("n", "in", [1.0, 2])) - {"a.txt"} == {"b.txt"}
    assert docs(FieldCondition("n", "ne", 2)) == {"a.txt"}
    assert docs(FieldCondition("n", "nin", [1, 2])) == set()


@pytest.mark.slow
def test_cli_filters_match_stored_numbers_and_booleans(tmp_path: Path, minilm_encoder, docs) -> None:
    store_path = tmp_path / "store"
    texts = list(docs.values())
    with LandmarkStore(store_path) as target:
        target.upsert_documents([("big", texts[0], {"v": 100000.0, "flag": True}), ("small", texts[1], {"v": 5})])

    def hits(*filters: str) -> list[str]:
        args = ["query", "a page", "--store", str(store_path), "--json"]
        result = CliRunner().invoke(app, [*args, *(part for f in filters for part in ("--filter", f))])
        assert result.exit_code == 0, result.output
        import json

        return sorted({hit["doc_id"] for hit in json.loads(result.stdout)["hits"]})

    assert hits("v=100000") == hits("v=1e5") == hits("flag=true") == ["big"]
    assert hits("v=5.") == hits("v=005") == ["small"]
    assert hits("v=.5") == hits("v=--5") == []


@pytest.mark.parametrize("edit, words", [
    ({"alpha": "x"}, "alpha='x'"), ({"committed": [1, 2]}, "committed=[1, 2]"),
    ({"node_tokens": -1}, "node_tokens=-1"), ({"bm25": "yes"}, "bm25='yes'"), ({"mode": "fast"}, "mode='fast'"),
    ({"mode": "static"}, "says 'static' but names encoder settings"),
    ({"text_keys": "title"}, "text_keys='title'"), ({"quantization": "int4"}, "quantization='int4'"),
    ({"hnsw_m": "16"}, "hnsw_m='16'"),
], ids=lambda e: str(e) if isinstance(e, dict) else "")
def test_a_hand_edited_settings_record_is_a_typed_error_naming_the_value(tmp_path: Path, minilm_encoder, docs,
                                                                         edit, words) -> None:
    with LandmarkStore(tmp_path / "store", encoder=minilm_encoder) as target:
        target.upsert_document("a.txt", next(iter(docs.values())))
        original = target.settings
        target.backend.write_settings({**original, **edit})
    with pytest.raises(CorruptStoreError, match=f"{re.escape(words)}.*(restore the original value|restore the record)"):
        LandmarkStore(tmp_path / "store")
    _restore(tmp_path / "store", original)
    with LandmarkStore(tmp_path / "store", encoder=minilm_encoder) as target:
        assert target.doc_ids() == ["a.txt"] and target.check() == []


def _restore(path: Path, meta: dict[str, Any]) -> None:
    """Write a settings record back through the engine (the store cannot open with the edited one)."""
    from lmk_rag.store.edge import EdgeBackend

    backend = EdgeBackend(path)
    try:
        backend.write_settings(meta)
    finally:
        backend.close()


def test_an_unknown_recorded_encoder_setting_is_a_typed_error(tmp_path: Path, minilm_encoder, docs) -> None:
    with LandmarkStore(tmp_path / "store", encoder=minilm_encoder) as target:
        target.upsert_document("a.txt", next(iter(docs.values())))
        meta = target.settings
        meta["encoder"] = {**meta["encoder"], "settings": {**meta["encoder"]["settings"], "bogus": 1}}
        target.backend.write_settings(meta)
    with LandmarkStore(tmp_path / "store") as target, pytest.raises(CorruptStoreError, match="bogus"):
        target.search("archives", k=1)


@pytest.mark.parametrize("make", [
    lambda: Filter(must=FieldCondition("n", "eq", 1)),
    lambda: Filter(should="n"),
    lambda: FieldCondition("n", "eq", 2**63),
    lambda: FieldCondition("n", "in", [1, -(2**63) - 1]),
], ids=["must-not-a-list", "should-a-string", "int-beyond-int64", "in-beyond-int64"])
def test_filters_of_the_wrong_shape_or_range_are_typed_errors(make) -> None:
    with pytest.raises(InvalidInputError):
        make()


@pytest.mark.parametrize("node_ids", [5, "a.txt#0", [5], [None]])
def test_delete_nodes_with_bad_ids_deletes_nothing(store, node_ids) -> None:
    before = _state(store)
    with pytest.raises(InvalidInputError, match="node_ids"):
        store.delete_nodes(node_ids=node_ids)
    assert _state(store) == before


@pytest.mark.parametrize("vector", ["nan", "zeros", "text-list"])
def test_search_mmr_refuses_vectors_without_a_direction(store, vector) -> None:
    import numpy as np

    query: Any = {"nan": np.full(store.dim, np.nan), "zeros": np.zeros(store.dim), "text-list": ["a"] * store.dim}
    with pytest.raises(InvalidInputError, match=r"NaN|zeros|vector of"):
        store.search_mmr(query[vector], k=2)


@pytest.mark.parametrize("query", ["text", None, 5])
def test_search_encoded_needs_an_encoded_query(store, query) -> None:
    with pytest.raises(InvalidInputError, match="encode_queries"):
        store.search_encoded(query)


def test_a_closed_store_says_it_is_closed(tmp_path: Path, minilm_encoder, docs) -> None:
    from lmk_rag.errors import StoreClosedError

    target = LandmarkStore(tmp_path / "store", encoder=minilm_encoder)
    target.upsert_document("a.txt", next(iter(docs.values())))
    target.close()
    for call in (lambda: target.search("archives"), target.count, lambda: target.upsert_document("b", "text"),
                 target.doc_ids, target.check):
        with pytest.raises(StoreClosedError, match="this store is closed"):
            call()
    target.close()  # idempotent
    assert "closed" in repr(target)
    with LandmarkStore(tmp_path / "store", encoder=minilm_encoder) as reopened:
        assert reopened.doc_ids() == ["a.txt"]


# ------------------------------------------------------------------ untyped crashes at the constructor


@pytest.mark.parametrize("make", [
    lambda tmp: {"path": 123}, lambda tmp: {"path": b"/tmp/store"}, lambda tmp: {"path": str(tmp / "a\0b")},
    lambda tmp: {"path": tmp / "file.txt" / "store"}, lambda tmp: {"path": "/proc/lmk_rag_store"},
    lambda tmp: {"url": 123}, lambda tmp: {"location": 5}, lambda tmp: {"path": tmp / "s", "encoder": "minilm"},
    lambda tmp: {"path": tmp / "s", "static_encoder": Path("model")},
], ids=["path-int", "path-bytes", "path-nul", "path-under-a-file", "path-in-proc", "url-int", "location-int",
        "encoder-str", "static-encoder-path"])
def test_bad_locations_and_encoders_are_typed_errors(tmp_path: Path, make) -> None:
    (tmp_path / "file.txt").write_text("a file")
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(InvalidInputError):
        LandmarkStore(**make(tmp_path))
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_a_lock_path_that_is_a_folder_is_named(tmp_path: Path, minilm_encoder) -> None:
    (tmp_path / "store" / "lmk_rag.lock").mkdir(parents=True)
    with pytest.raises(CorruptStoreError, match="is a folder, not the store's lock file"):
        LandmarkStore(tmp_path / "store", encoder=minilm_encoder)


@pytest.fixture
def read_only_mount(tmp_path: Path, minilm_encoder, docs):
    """A real store seen through a read-only bind mount (needs root and mount; skips cleanly elsewhere)."""
    import shutil
    import subprocess

    source, mounted = tmp_path / "source", tmp_path / "mounted"
    with LandmarkStore(source / "store", encoder=minilm_encoder) as target:
        target.upsert_document("a.txt", next(iter(docs.values())))
    mounted.mkdir()
    if shutil.which("mount") is None:
        pytest.skip("no mount command")
    bind = subprocess.run(["mount", "--bind", str(source), str(mounted)], capture_output=True, text=True)
    if bind.returncode != 0:
        pytest.skip(f"cannot bind-mount here: {bind.stderr.strip()}")
    try:
        subprocess.run(["mount", "-o", "remount,ro,bind", str(mounted)], check=True, capture_output=True)
        yield mounted / "store"
    finally:
        subprocess.run(["umount", str(mounted)], check=True)


def test_a_store_on_a_read_only_mount_is_a_typed_error_that_says_copy_it(read_only_mount: Path,
                                                                        minilm_encoder) -> None:
    from lmk_rag.errors import StoreReadOnlyError

    for kwargs in ({}, {"read_only": True}):
        with pytest.raises(StoreReadOnlyError, match="copy"):
            LandmarkStore(read_only_mount, encoder=minilm_encoder, **kwargs)
    for command in (["query", "archives"], ["info"]):
        result = CliRunner().invoke(app, [*command, "--store", str(read_only_mount)])
        assert result.exit_code == 1 and result.output.startswith("error: ") and "copy" in result.output
        assert len(result.output.strip().splitlines()) == 1


# ------------------------------------------------------------------ a full disk

FILL = """
import sys
from pathlib import Path
import numpy as np
from lmk_rag.errors import StoreFullError
from lmk_rag.store import LandmarkStore, NodeRecord
rng = np.random.default_rng(0)
def unit(n):
    v = rng.normal(size=(n, 384)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)
acked = []
try:
    with LandmarkStore(Path(sys.argv[1]), bm25=False) as store:
        for batch in range(1000):
            docs = [(f"b{batch}d{d}", [NodeRecord(node_id=f"b{batch}d{d}#{i}", doc_id=f"b{batch}d{d}", text="x" * 1000,
                    span=(0, 1000), vector=unit(1)[0], chunk_vectors=unit(8)) for i in range(5)]) for d in range(100)]
            store.upsert_encoded_documents(docs, on_ack=acked.extend)
except StoreFullError as error:
    print(len(acked), "StoreFullError", error)
"""


@pytest.fixture
def small_disk(tmp_path: Path):
    """A real 320 MB tmpfs (needs root and mount; skips cleanly elsewhere); ``grow(size)`` remounts it larger."""
    import shutil
    import subprocess

    mounted = tmp_path / "disk"
    mounted.mkdir()
    if shutil.which("mount") is None:
        pytest.skip("no mount command")
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=320m", "tmpfs", str(mounted)], capture_output=True,
                            text=True)
    if result.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {result.stderr.strip()}")

    def grow(size: str) -> None:
        subprocess.run(["mount", "-o", f"remount,size={size}", str(mounted)], check=True)

    try:
        yield mounted, grow
    finally:
        subprocess.run(["umount", str(mounted)], check=True)


@pytest.mark.slow
def test_a_full_disk_is_a_typed_error_that_loses_nothing_and_retries_after_space_is_freed(small_disk) -> None:
    import subprocess
    import sys

    from lmk_rag.errors import StoreFullError

    disk, grow = small_disk
    fill = subprocess.run([sys.executable, "-c", FILL, str(disk / "store")], capture_output=True, text=True,
                          timeout=600)
    assert fill.returncode == 0, fill.stderr[-2000:]  # no SIGBUS: the process ends on its own
    acked, kind, message = fill.stdout.split(" ", 2)
    assert kind == "StoreFullError" and "free space and retry" in message and "Nothing was written" in message
    with pytest.raises(StoreFullError, match="free space and retry"):  # the disk is still full: typed, not "damaged"
        LandmarkStore(disk / "store")
    grow("1g")
    with LandmarkStore(disk / "store") as target:
        assert target.count_documents() == int(acked) > 0 and target.check() == []
        record = target.get_nodes([f"{target.doc_ids()[0]}#0"])[0]
        after = [dataclasses.replace(record, node_id="after#0", doc_id="after")]
        assert target.upsert_encoded_document("after", after) == 1
        assert target.count_documents() == int(acked) + 1 and target.check() == []


@pytest.mark.slow
def test_cli_ingest_on_a_full_disk_fails_with_one_error_line(small_disk, tmp_path: Path, docs) -> None:
    disk, _ = small_disk
    (disk / "ballast").write_bytes(b"\0" * (250 * 2**20))  # leaves ~70 MB: less than a new store needs
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.txt").write_text(next(iter(docs.values())))
    result = CliRunner().invoke(app, ["ingest", str(folder), "--store", str(disk / "store")])
    assert result.exit_code == 1, result.output
    lines = [line for line in result.output.splitlines() if line.strip() and not line.startswith("Loading weights")]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "free space and retry" in lines[0]


@pytest.mark.slow
def test_an_unreadable_file_is_skipped_and_reported_and_the_rest_ingested(tmp_path: Path, docs) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.txt").write_text(next(iter(docs.values())))
    unreadable = Path("/proc/self/mem")  # a regular file whose read fails (EIO) even for root
    if not unreadable.is_file():
        pytest.skip("no /proc/self/mem")
    result = _ingest(str(folder), str(unreadable), "--store", str(tmp_path / "store"))
    assert "1 new, 0 changed, 0 unchanged, 0 deleted, 1 skipped" in result.stdout
    assert f"skipped {unreadable}: cannot be read (" in result.output


def test_cli_eval_with_an_unknown_encoder_setting_is_one_error_line(fixture_data: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["eval", str(fixture_data / "manpages-short"), "--pipeline", "lmk-rag",
                                      "--encoder", "bogus_key=1", "--cache-dir", str(tmp_path / "cache")])
    assert result.exit_code == 1
    lines = [line for line in result.output.splitlines() if line.strip() and not line.startswith("Loading weights")]
    assert len(lines) == 1 and lines[0].startswith("error: unknown encoder setting(s) ['bogus_key']")


# ------------------------------------------------------------------ one metadata policy for the API and LlamaIndex

CONVERTED = [
    (datetime.date(2026, 1, 2), "2026-01-02"),
    (datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc), "2026-01-02T03:04:05+00:00"),
    (datetime.datetime(2026, 1, 2, 3, 4, 5), "2026-01-02T03:04:05"),
    ((1, "a"), [1, "a"]), ({"b", "a", "c"}, ["a", "b", "c"]), (frozenset({2, 1}), [1, 2]),
    ({"nested": ({3, 1},)}, {"nested": [[1, 3]]}),
]


@pytest.mark.parametrize("value, stored", CONVERTED, ids=lambda v: type(v).__name__)
def test_dates_tuples_and_sets_are_stored_as_strings_and_lists(store, docs, value, stored) -> None:
    text = list(docs.values())[2]
    store.upsert_document("c.txt", text, {"key": value})
    assert store.documents()["c.txt"] == {"key": stored}
    assert store.changes([("c.txt", text, {"key": value})]) == {"c.txt": "unchanged"}  # same hash as stored
    assert {r.doc_id: r.metadata for r in store.get_nodes()}["c.txt"] == {"key": stored}
    if isinstance(stored, str):  # a date is filtered by its string
        assert {r.doc_id for r in store.get_nodes(filter={"key": stored})} == {"c.txt"}


@pytest.mark.parametrize("value", [float("nan"), float("inf"), b"bytes", {"deep": [b"x"]}],
                         ids=["nan", "inf", "bytes", "nested-bytes"])
def test_nan_infinity_and_bytes_are_refused_by_the_api_and_the_llamaindex_store(store, tmp_path: Path, value) -> None:
    from llama_index.core.schema import TextNode

    from lmk_rag.store.documents import clean_metadata

    before = _state(store)
    with pytest.raises(InvalidInputError, match="metadata"):
        store.upsert_document("c.txt", "A page about archives.", {"key": value})
    assert _state(store) == before
    from llama_index.vector_stores.landmark.base import _node_metadata

    node = TextNode(text="A page about archives.", id_="n1", metadata={"key": value})
    with pytest.raises(InvalidInputError, match="metadata"):
        _node_metadata(node)
    with pytest.raises(InvalidInputError):
        clean_metadata({"key": value}, "x")


def test_the_llamaindex_store_keeps_dates_as_the_api_does() -> None:
    from llama_index.core.schema import TextNode

    from llama_index.vector_stores.landmark.base import _node_metadata

    node = TextNode(text="A page.", id_="n1", metadata={"when": datetime.date(2026, 1, 2), "tags": {"b", "a"}})
    stored = _node_metadata(node)
    assert stored["when"] == "2026-01-02" and stored["tags"] == ["a", "b"]


def test_metadata_nested_too_deep_is_refused_not_a_recursion_error(store) -> None:
    deep: dict[str, Any] = {}
    inner = deep
    for _ in range(5000):
        inner["a"] = {}
        inner = inner["a"]
    with pytest.raises(InvalidInputError, match="nests deeper than"):
        store.upsert_document("c.txt", "A page about archives.", {"deep": deep})


ODD_KEYS = ["my key", "$where", "it's", "emoji\U0001f600", "nul\0x", "a:b", "-dash", "1digit", "a/b", "ünï"]


def test_every_metadata_key_add_accepts_a_filter_can_name(store) -> None:
    from llama_index.core.vector_stores.types import MetadataFilter, MetadataFilters

    from llama_index.vector_stores.landmark.filters import to_store_filter

    for i, key in enumerate(ODD_KEYS):
        store.upsert_document(f"odd{i}", f"A page about archives number {i}.", {key: "v", "nest": {key: i}})
    for i, key in enumerate(ODD_KEYS):
        assert {r.doc_id for r in store.get_nodes(filter={key: "v"})} == {f"odd{i}"}, key
        assert {r.doc_id for r in store.get_nodes(filter={f"nest.{key}": i})} == {f"odd{i}"}, key
        llama = to_store_filter(MetadataFilters(filters=[MetadataFilter(key=key, value="v")]))
        assert {hit.doc_id for hit in store.search("archives", k=20, filter=llama)} == {f"odd{i}"}, key


@pytest.mark.parametrize("key", ['q"uote', "back\\slash", "a.b", "x[0]", ""])
def test_keys_no_filter_can_name_are_refused_at_add_and_in_filters(store, key) -> None:
    before = _state(store)
    with pytest.raises(InvalidInputError, match="no filter can name"):
        store.upsert_document("c.txt", "A page about archives.", {key: 1})
    assert _state(store) == before
    if key and key not in ("a.b", "x[0]"):  # dotted and indexed keys are paths into nested metadata
        with pytest.raises(InvalidInputError, match="cannot name a metadata field"):
            store.get_nodes(filter={key: 1})


# ------------------------------------------------------------------ BM25 in another language (issue 27)

GERMAN = ["Die Katzen schlafen den ganzen Tag auf dem warmen Sofa im Wohnzimmer.",
          "Der Zug nach Berlin fährt jeden Morgen pünktlich um acht Uhr ab.",
          "Im Garten wachsen Tomaten, Bohnen und viele bunte Blumen."]


def test_bm25_speaks_the_stores_language(tmp_path: Path, minilm_encoder) -> None:
    from lmk_rag.errors import SettingsMismatchError
    from lmk_rag.store.bm25 import Bm25Encoder

    german, english = Bm25Encoder(language="german"), Bm25Encoder(language="english")
    stemmed = set(german.embed_query("Katze").indices) & set(german.embed_document(GERMAN[0]).indices)
    assert stemmed and not set(english.embed_query("Katze").indices) & set(english.embed_document(GERMAN[0]).indices)
    assert len(german.embed_query("die der und").indices) == 0  # German stop words
    with LandmarkStore(tmp_path / "de", encoder=minilm_encoder, bm25_language="German") as store:
        store.upsert_documents([(f"de{i}", text) for i, text in enumerate(GERMAN)])
        assert store.settings["bm25_language"] == "german" and store.info()["bm25_language"] == "german"
        assert store.search("Katze", k=1, alpha=0.0)[0].doc_id == "de0"  # BM25 alone: the stem matches
    with pytest.raises(SettingsMismatchError, match="bm25_language='german'"):
        LandmarkStore(tmp_path / "de", encoder=minilm_encoder, bm25_language="english")
    with LandmarkStore(tmp_path / "de", encoder=minilm_encoder) as reopened:  # as recorded
        assert reopened.search("Katze", k=1, alpha=0.0)[0].doc_id == "de0"
    for bad in ("klingon", 5):
        with pytest.raises(InvalidInputError, match="bm25_language must be one of"):
            LandmarkStore(tmp_path / "x", encoder=minilm_encoder, bm25_language=bad)
    with pytest.raises(InvalidInputError, match="needs bm25=True"):
        LandmarkStore(tmp_path / "y", encoder=minilm_encoder, bm25=False, bm25_language="german")
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()


@pytest.mark.parametrize(("kwargs", "hint"), [({"aplha": 0.5}, "did you mean 'alpha'"),
                                              ({"collection": "docs"}, "did you mean 'collection_name'"),
                                              ({"enable_hybrid": True}, "")],
                         ids=["typo", "collection", "enable_hybrid"])
def test_unknown_keyword_arguments_are_a_type_error_naming_the_valid_ones(tmp_path: Path, kwargs, hint) -> None:
    """LandmarkVectorStore's own: tests/integrations/test_constructor.py."""
    with pytest.raises(TypeError, match=r"LandmarkStore\(\) got unexpected keyword argument.*search, server") as caught:
        LandmarkStore(tmp_path / "s", **kwargs)
    assert hint in str(caught.value) and "Backend" not in str(caught.value)
    assert not (tmp_path / "s").exists()
