"""``lmk-rag ingest`` as a sync, and the store's content hashes, on real manual pages and a real Edge store.

Encoder calls and backend writes are counted by wrapping the real methods (they still run)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lmk_rag.cli import app
from lmk_rag.encoder import LandmarkEncoder
from lmk_rag.errors import InvalidInputError
from lmk_rag.store import LandmarkStore
from lmk_rag.store.edge import EdgeBackend


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, int]]:
    """Counts of ``LandmarkEncoder.encode_documents`` and ``EdgeBackend.upsert`` calls (the real ones run)."""
    counts = {"encode": 0, "upsert": 0}

    def counting(name: str, original):
        def wrapper(self, *args, **kwargs):
            counts[name] += 1
            return original(self, *args, **kwargs)

        return wrapper

    monkeypatch.setattr(LandmarkEncoder, "encode_documents", counting("encode", LandmarkEncoder.encode_documents))
    monkeypatch.setattr(EdgeBackend, "upsert", counting("upsert", EdgeBackend.upsert))
    yield counts


def _write_pages(folder: Path, docs: dict[str, str], names: list[str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in zip(names, list(docs.values())[: len(names)]):
        (folder / name).write_text(text[:900])


def _ingest(*args: str) -> object:
    result = CliRunner().invoke(app, ["ingest", *args])
    return result


@pytest.mark.slow
def test_second_ingest_of_an_unchanged_folder_encodes_and_writes_nothing(tmp_path, docs, calls) -> None:
    corpus, store = tmp_path / "corpus", str(tmp_path / "store")
    _write_pages(corpus, docs, ["a.txt", "b.md", "c.txt"])
    first = _ingest(str(corpus), "--store", store)
    assert first.exit_code == 0, first.output
    assert "3 new, 0 changed, 0 unchanged, 0 deleted, 0 skipped" in first.stdout
    assert calls["encode"] >= 1 and calls["upsert"] >= 1
    calls.update(encode=0, upsert=0)
    second = _ingest(str(corpus), "--store", store)
    assert second.exit_code == 0, second.output
    assert "0 new, 0 changed, 3 unchanged" in second.stdout and "0 nodes written" in second.stdout
    assert calls == {"encode": 0, "upsert": 0}

    (corpus / "b.md").write_text("Penguins live in Antarctica and eat fish; they cannot fly but swim well.")
    third = _ingest(str(corpus), "--store", store)
    assert "0 new, 1 changed, 2 unchanged" in third.stdout
    with LandmarkStore(store, create=False) as target:
        assert target.search("penguins in Antarctica", k=1)[0].doc_id == "b.md"
        assert target.count_documents() == 3


@pytest.mark.slow
def test_sync_deletes_only_documents_whose_file_under_the_folders_is_gone(tmp_path, docs) -> None:
    corpus, other, store = tmp_path / "corpus", tmp_path / "other", str(tmp_path / "store")
    _write_pages(corpus, docs, ["a.txt", "b.txt"])
    _write_pages(other, docs, ["x.txt"])
    assert _ingest(str(corpus), "--store", store).exit_code == 0
    assert _ingest(str(other), "--store", store).exit_code == 0
    with LandmarkStore(store) as target:
        target.upsert_document("api-doc", "Written through the API, with no source file.", None)
    (corpus / "b.txt").unlink()
    shutil.rmtree(other)  # gone too, but not under the folder given below
    dry = _ingest(str(corpus), "--store", store, "--sync", "--dry-run")
    assert dry.exit_code == 0 and "delete: b.txt" in dry.stdout and "1 deleted" in dry.stdout
    with LandmarkStore(store, create=False) as target:
        assert "b.txt" in target.doc_ids()  # a dry run changes nothing
    synced = _ingest(str(corpus), "--store", store, "--sync")
    assert synced.exit_code == 0 and "0 new, 0 changed, 1 unchanged, 1 deleted" in synced.stdout
    with LandmarkStore(store, create=False) as target:
        assert target.doc_ids() == ["a.txt", "api-doc", "x.txt"]


@pytest.mark.slow
def test_an_ingest_says_what_it_left_out_and_what_sync_would_delete(tmp_path, docs) -> None:
    corpus, store = tmp_path / "corpus", str(tmp_path / "store")
    _write_pages(corpus, docs, ["a.txt", "b.txt", "guide.rst"])
    first = _ingest(str(corpus), "--store", store)
    assert first.exit_code == 0 and "2 new, 0 changed, 0 unchanged, 0 deleted, 1 skipped" in first.stdout
    assert f"skipped 1 file(s) matching no --glob (*.txt, *.md): {corpus / 'guide.rst'}" in first.stderr
    (corpus / "b.txt").unlink()
    note = ("note: 1 stored document(s) from these folders have no file any more (b.txt); they stay in the store: "
            "ingest with --sync to delete them")
    dry = _ingest(str(corpus), "--store", store, "--dry-run")
    assert dry.exit_code == 0 and note in dry.stderr and "delete:" not in dry.stdout and "0 deleted" in dry.stdout
    kept = _ingest(str(corpus), "--store", store)
    assert kept.exit_code == 0 and "0 new, 0 changed, 1 unchanged, 0 deleted, 1 skipped" in kept.stdout
    assert note in kept.stderr
    with LandmarkStore(store, create=False) as target:
        assert target.doc_ids() == ["a.txt", "b.txt"]
    synced = _ingest(str(corpus), "--store", store, "--sync")
    assert synced.exit_code == 0 and "1 deleted" in synced.stdout and "note:" not in synced.stderr
    with LandmarkStore(store, create=False) as target:
        assert target.doc_ids() == ["a.txt"]


def test_colliding_doc_ids_across_folders_are_refused(tmp_path, docs) -> None:
    col_a, col_b = tmp_path / "colA", tmp_path / "colB"
    _write_pages(col_a, docs, ["notes.txt"])
    _write_pages(col_b, docs, ["notes.txt"])
    store = str(tmp_path / "store")
    refused = _ingest(str(col_a), str(col_b), "--store", store)
    assert refused.exit_code == 1
    assert "colA/notes.txt" in refused.stderr and "colB/notes.txt" in refused.stderr
    assert "--folder-prefix" in refused.stderr
    assert not (tmp_path / "store").exists()  # refused before anything was opened


@pytest.mark.slow
def test_folder_prefix_binary_and_latin1_files(tmp_path, docs) -> None:
    col_a, col_b = tmp_path / "colA", tmp_path / "colB"
    _write_pages(col_a, docs, ["notes.txt"])
    _write_pages(col_b, docs, ["notes.txt"])
    (col_b / "ls.txt").write_bytes(b"\x7fELF\x02\x01\x01\x00\x00\x00" + bytes(range(256)) * 8)  # a binary named .txt
    latin = "Café crème brûlée: the naïve façade of a résumé, déjà vu. " * 4
    (col_b / "latin.txt").write_bytes(latin.encode("latin-1"))
    store = str(tmp_path / "store")
    result = _ingest(str(col_a), str(col_b), "--store", store, "--folder-prefix")
    assert result.exit_code == 0, result.output
    assert "2 new" in result.stdout and "2 skipped" in result.stdout
    assert "ls.txt: binary" in result.stderr and "latin.txt: not UTF-8" in result.stderr
    assert "--encoding" in result.stderr
    result = _ingest(str(col_a), str(col_b), "--store", store, "--folder-prefix", "--encoding", "latin-1")
    assert result.exit_code == 0, result.output
    assert "1 new, 0 changed, 2 unchanged" in result.stdout and "1 skipped" in result.stdout
    with LandmarkStore(store, create=False) as target:
        assert target.doc_ids() == ["colA/notes.txt", "colB/latin.txt", "colB/notes.txt"]
        text = "".join(n.text for n in target.get_nodes(filter={"doc_id": "colB/latin.txt"}))
        assert text == latin and "\ufffd" not in text


def test_store_commands_reach_qdrant_client_backends(tmp_path, docs) -> None:
    corpus, location = tmp_path / "corpus", str(tmp_path / "local")
    _write_pages(corpus, docs, ["a.txt", "b.txt"])
    assert _ingest(str(corpus), "--location", location, "--collection-name", "pages").exit_code == 0
    query = list(docs.values())[1][:120]
    found = CliRunner().invoke(app, ["query", query, "--location", location, "--collection-name", "pages", "--json"])
    assert found.exit_code == 0, found.output
    assert json.loads(found.stdout)["hits"][0]["doc_id"] == "b.txt"
    info = CliRunner().invoke(app, ["info", "--location", location, "--collection-name", "pages"])
    assert json.loads(info.stdout)["backend"] == "qdrant-local" and json.loads(info.stdout)["documents"] == 2
    both = CliRunner().invoke(app, ["info", "--location", location, "--store", str(tmp_path / "s")])
    assert both.exit_code == 1 and "exactly one of --store, --url, --location" in both.stderr


def test_the_api_skips_unchanged_documents_and_refuses_repeated_ids(tmp_path, minilm_encoder, docs, calls) -> None:
    text = next(iter(docs.values()))[:600]
    with LandmarkStore(tmp_path / "store", encoder=minilm_encoder) as store:
        assert store.changes([("p", text, {"n": 1})]) == {"p": "new"}
        written = store.upsert_documents([("p", text, {"n": 1})])
        assert written >= 1 and store.changes([("p", text, {"n": 1})]) == {"p": "unchanged"}
        assert store.changes([("p", text, {"n": 2})]) == {"p": "changed"}  # metadata is part of the content
        calls.update(encode=0, upsert=0)
        assert store.upsert_documents([("p", text, {"n": 1})]) == 0 and calls == {"encode": 0, "upsert": 0}
        assert store.upsert_documents([("p", text, {"n": 1})], skip_unchanged=False) == written
        with pytest.raises(InvalidInputError, match="given twice"):
            store.upsert_documents([("q", text, None), ("q", text + " more", None)])
        assert store.doc_ids() == ["p"]
