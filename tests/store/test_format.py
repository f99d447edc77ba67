"""A store of another format than the one this lmk-rag writes (an earlier lmk-rag's, or a newer one's), or whose
settings record lacks a field the format requires, is refused with one typed error naming the fix, and left as it
is (Qdrant Edge)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lmk_rag.errors import CorruptStoreError, StoreFormatError
from lmk_rag.store import LandmarkStore, NodeRecord
from lmk_rag.store.settings import FORMAT_VERSION


def _edit_record(folder: Path, edit) -> str:
    """Edit a closed store's settings record (``lmk_rag.json``) with ``edit(record)``; return the text written."""
    record = json.loads((folder / "lmk_rag.json").read_text())
    edit(record)
    text = json.dumps(record)
    (folder / "lmk_rag.json").write_text(text)
    return text


@pytest.fixture
def written(tmp_path: Path, minilm_encoder, doc_records: dict[str, list[NodeRecord]]) -> Path:
    """A store folder holding one document, closed."""
    folder = tmp_path / "s"
    name = next(iter(doc_records))
    with LandmarkStore(folder, encoder=minilm_encoder) as store:
        store.upsert_encoded_document(name, doc_records[name])
        assert store.settings["format_version"] == FORMAT_VERSION
    return folder


@pytest.mark.parametrize("version", [1, FORMAT_VERSION - 1, None])
def test_a_store_of_an_earlier_format_is_refused_and_left_as_it_is(written: Path, minilm_encoder, version) -> None:
    text = _edit_record(written, lambda record: record.update(format_version=version))
    for opened in ({"read_only": True}, {"encoder": minilm_encoder}):
        with pytest.raises(StoreFormatError) as raised:
            LandmarkStore(written, **opened)
        said = str(raised.value)
        assert f"written by an earlier lmk-rag (store format {version!r}" in said, said
        assert f"reads format {FORMAT_VERSION} only" in said and "re-ingest" in said, said
        assert "lmk-rag ingest DOCS --store NEW_FOLDER" in said and "CHANGELOG.md" in said, said
        assert isinstance(raised.value, CorruptStoreError)  # what callers caught before
    assert (written / "lmk_rag.json").read_text() == text  # no upgrade, no repair: the store is as it was


def test_a_store_of_a_newer_format_says_to_upgrade(written: Path) -> None:
    _edit_record(written, lambda record: record.update(format_version=FORMAT_VERSION + 1))
    with pytest.raises(StoreFormatError, match=f"a newer lmk-rag \\(store format {FORMAT_VERSION + 1}.*upgrade "
                                               "lmk-rag, or re-ingest"):
        LandmarkStore(written, read_only=True)


@pytest.mark.parametrize("field", ["bm25_language", "quantization", "payload_indexes", "mode", "static"])
def test_a_record_that_lacks_a_field_of_the_format_is_refused(written: Path, field: str) -> None:
    _edit_record(written, lambda record: record.pop(field))
    with pytest.raises(StoreFormatError, match=f"lacks {field}, which every store of format {FORMAT_VERSION} "
                                               "records: it was written by an earlier lmk-rag, or edited; re-ingest"):
        LandmarkStore(written, read_only=True)
