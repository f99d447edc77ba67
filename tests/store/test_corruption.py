"""Damage done to a real Qdrant Edge store folder is detected: opening, searching or ``check`` raises
:class:`CorruptStoreError` (the CLI: one ``error:`` line and status 1), never a silently wrong answer."""

from __future__ import annotations

import glob
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lmk_rag.cli import app
from lmk_rag.errors import CorruptStoreError
from lmk_rag.store import LandmarkStore


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory, minilm_encoder, docs) -> Path:
    """A store of the eight real pages, written, optimized and closed."""
    folder = tmp_path_factory.mktemp("template") / "store"
    with LandmarkStore(folder, encoder=minilm_encoder) as store:
        store.upsert_documents([(doc_id, text, {"n": i}) for i, (doc_id, text) in enumerate(docs.items())])
        store.optimize()
    return folder


def _files(folder: Path, pattern: str) -> list[str]:
    found = glob.glob(str(folder / "shard" / "segments" / "*" / pattern))
    assert found, pattern
    return found


def _garbage(path: str) -> None:
    with open(path, "r+b") as handle:
        handle.write(os.urandom(os.path.getsize(path)))


def _zeros(path: str) -> None:
    with open(path, "r+b") as handle:
        handle.write(bytes(os.path.getsize(path)))


def _truncate(path: str) -> None:
    os.truncate(path, 64)


DAMAGE: dict[str, Callable[[Path], None]] = {
    "segments deleted": lambda f: [shutil.rmtree(p) for p in _files(f, "")],
    "id tracker truncated": lambda f: [_truncate(p) for p in _files(f, "*id_tracker*")],
    "chunk vectors overwritten": lambda f: [_garbage(p) for p in _files(f, "vector_storage-chunks/vectors/chunk_*")],
    "node vectors overwritten": lambda f: [_garbage(p) for p in _files(f, "vector_storage-node/vectors/chunk_*")],
    "chunk vectors truncated": lambda f: [_truncate(p) for p in _files(f, "vector_storage-chunks/vectors/chunk_*")],
    "payload storage overwritten": lambda f: [_garbage(p) for p in _files(f, "payload_storage/page_*")],
    "node vectors zeroed": lambda f: [_zeros(p) for p in _files(f, "vector_storage-node/vectors/chunk_*")],
    "chunk vectors zeroed": lambda f: [_zeros(p) for p in _files(f, "vector_storage-chunks/vectors/chunk_*")],
    "document vectors overwritten": lambda f: [_garbage(p) for p in
                                               _files(f, "vector_storage-document/vectors/chunk_*")],
    "document vectors zeroed": lambda f: [_zeros(p) for p in _files(f, "vector_storage-document/vectors/chunk_*")],
    "deleted flags overwritten": lambda f: [_garbage(p) for p in _files(f, "vector_storage-node/deleted/flags_*")],
    "settings garbled": lambda f: (f / "lmk_rag.json").write_text("{garbage"),
    "settings deleted": lambda f: (f / "lmk_rag.json").unlink(),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_damage_is_a_corrupt_store_error(template: Path, tmp_path: Path, minilm_encoder, docs, damage: str) -> None:
    folder = tmp_path / "store"
    shutil.copytree(template, folder, ignore=shutil.ignore_patterns("*.lock"))
    DAMAGE[damage](folder)
    query = next(iter(docs.values()))[:120]
    with pytest.raises(CorruptStoreError), LandmarkStore(folder, encoder=minilm_encoder) as store:
        store.search(query, k=3)  # some damage only shows in the vectors a search reads
        problems = store.check()
        if problems:
            raise CorruptStoreError("; ".join(problems))
    result = CliRunner().invoke(app, ["check", "--store", str(folder)])
    assert result.exit_code == 1 and result.stderr.startswith("error: ") and "Traceback" not in result.output


def test_a_sound_store_checks_clean(template: Path, tmp_path: Path, minilm_encoder) -> None:
    folder = tmp_path / "store"
    shutil.copytree(template, folder, ignore=shutil.ignore_patterns("*.lock"))
    with LandmarkStore(folder, encoder=minilm_encoder) as store:
        assert store.check() == []
    result = CliRunner().invoke(app, ["check", "--store", str(folder)])
    assert result.exit_code == 0 and result.stdout.startswith("ok: 8 documents")


@pytest.mark.parametrize("damage", ["node vectors overwritten", "node vectors zeroed", "chunk vectors zeroed",
                                    "chunk vectors overwritten", "deleted flags overwritten",
                                    "document vectors overwritten", "document vectors zeroed"])
def test_damaged_vectors_stop_the_first_search_and_check_lists_them(template: Path, tmp_path: Path, minilm_encoder,
                                                                    docs, damage: str) -> None:
    """Damaged vectors give wrong hits without an error unless looked for: the first search of a handle samples
    them and refuses, naming ``lmk-rag check``, which still opens the store and lists the damaged nodes."""
    folder = tmp_path / "store"
    shutil.copytree(template, folder, ignore=shutil.ignore_patterns("*.lock"))
    DAMAGE[damage](folder)
    with LandmarkStore(folder, encoder=minilm_encoder) as store:
        with pytest.raises(CorruptStoreError, match=r"stored vectors are damaged .* run lmk-rag check"):
            store.search(next(iter(docs.values()))[:120], k=3)
        with pytest.raises(CorruptStoreError, match="stored vectors are damaged"):
            store.search_mmr("archives", k=3)
        assert any("damaged vectors" in problem for problem in store.check())
    result = CliRunner().invoke(app, ["check", "--store", str(folder)])
    assert result.exit_code == 1 and "damaged vectors" in result.output


@pytest.mark.parametrize("stats", [{"chunks": "many", "coherence": 0.5}, {"chunks": 3}, {"chunks": 0, "coherence": 0.5},
                                   {"chunks": 3, "coherence": 7.0}, None])
def test_damaged_document_statistics_are_a_corrupt_store_error(template: Path, tmp_path: Path, minilm_encoder, docs,
                                                               stats) -> None:
    """The payload the store's document weight is measured from, edited behind its back, stops the search with the
    fix rather than giving a weight made of it."""
    from lmk_rag.store.records import DOCUMENT_KEY, nodes_filter

    folder = tmp_path / "store"
    shutil.copytree(template, folder, ignore=shutil.ignore_patterns("*.lock"))
    with LandmarkStore(folder, encoder=minilm_encoder) as store:
        store.backend.set_payload(nodes_filter(store.backend, None), {DOCUMENT_KEY: stats})
        with pytest.raises(CorruptStoreError, match=r"damaged document statistics.*lmk-rag check"):
            store.search(next(iter(docs.values()))[:120], k=3)
